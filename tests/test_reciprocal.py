"""Rounded divisions by a scalar constant become multiplications by its reciprocal
(graphtune/compiler/reciprocal.py).

The rewritten module is built by TVM's stock lowering and compared with the division in
numpy: equal except where ``x / c`` lies within an fp32 rounding of ``k + 0.5``. Compiled
quantized models keep matching ONNX Runtime (tests/test_int8_compile.py, tests/test_quantized.py).
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from graphtune.compiler.reciprocal import reciprocal_scales
from graphtune.frontend.walk import bindings, op_name

SHAPE = [1, 8, 16, 16]
SCALE = np.float32(0.023529412)  # 1/42.5: its reciprocal is not exact in fp32


def _quantize(divisor: relax.Expr, read_unrounded: bool = False) -> tvm.IRModule:
    """main(x) = uint8(clip(round(x / divisor) + 3)); with ``read_unrounded`` the quotient is
    also an output."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(SHAPE, "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            quotient = bb.emit(relax.op.divide(x, divisor))
            rounded = relax.op.add(relax.op.round(quotient), relax.const(np.float32(3)))
            out = bb.emit_output(relax.op.astype(relax.op.clip(rounded, 0, 255), "uint8"))
            extra = [bb.emit_output(relax.op.add(quotient, quotient))] if read_unrounded else []
        bb.emit_func_output(relax.Tuple([out, *extra]) if extra else out)
    return bb.get()


def _ops(mod: tvm.IRModule) -> list[str | None]:
    return [op_name(b.value) for b in bindings(mod["main"])]


def _run(mod: tvm.IRModule, x: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(relax.transform.LegalizeOps()(mod), target="llvm"), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


def test_a_quantize_multiplies_by_the_reciprocal_and_differs_only_at_ties():
    mod = reciprocal_scales(_quantize(relax.const(SCALE)))
    assert "relax.divide" not in _ops(mod) and _ops(mod)[0] == "relax.multiply"
    x = np.random.default_rng(0).uniform(-1, 7, SHAPE).astype(np.float32)
    x.flat[:64] = (np.arange(64, dtype=np.float32) + 0.5) * SCALE  # at the ties, as close as fp32 gets
    got = _run(mod, x).astype(int)
    want = np.clip(np.rint(x / SCALE) + 3, 0, 255).astype(int)
    quotient = x.astype(np.float64) / np.float64(SCALE)
    at_tie = np.abs(quotient - np.floor(quotient) - 0.5) < 1e-5 * np.maximum(1, np.abs(quotient))
    assert np.abs(got - want).max() <= 1
    assert (got == want)[~at_tie].all(), "a value away from k + 0.5 rounded differently"


def test_divisions_read_unrounded_or_by_tensors_stay():
    unrounded = _quantize(relax.const(SCALE), read_unrounded=True)
    assert reciprocal_scales(unrounded) is unrounded
    per_channel = _quantize(relax.const(np.full([1, 8, 1, 1], SCALE)))
    assert reciprocal_scales(per_channel) is per_channel
    zero = _quantize(relax.const(np.float32(0)))
    assert reciprocal_scales(zero) is zero
