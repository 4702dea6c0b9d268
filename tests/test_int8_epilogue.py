"""An int8 kernel's bias add and requantizing multiplication fold into its constants
(graphtune/compiler/int8_epilogue.py).

A real int8 kernel call (:func:`graphtune.compiler.int8.emit_int8`) followed by a QDQ model's
fp32 bias add, the multiplication by the output scale's reciprocal, ``round`` and the clip to
uint8, built by TVM's stock lowering before and after the fold and compared with the exact
integer requantization in numpy: equal except where a value lies within fp32 roundings of
``k + 0.5``. Whole quantized models keep matching ONNX Runtime (tests/test_int8_compile.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

from graphtune.compiler.int8 import emit_int8
from graphtune.compiler.int8_epilogue import fold_into_kernels
from graphtune.compiler.plan import NodePlan
from graphtune.frontend.walk import bindings, const_value, op_name
from graphtune.ops import conv2d_int8_workload

pytestmark = pytest.mark.unit

X_SCALE, X_ZERO, Y_SCALE = np.float32(0.05), 3, np.float32(0.125)
RNG = np.random.default_rng(0)
W_Q = RNG.integers(-127, 128, (16, 16, 1, 1)).astype(np.int8)
W_SCALE = RNG.uniform(0.01, 0.02, 16).astype(np.float32)
B_Q = RNG.integers(-5000, 5000, 16)
BIAS = (B_Q * (X_SCALE * W_SCALE)).astype(np.float32)  # DequantizeLinear(b_q, sx * sw)


def _model(bias: np.ndarray, factor: float, read_sum: bool = False) -> tvm.IRModule:
    """main(x_q) = uint8(clip(round((conv(x_q) + bias) * factor), 0, 255)) of a 1x1 int8 conv
    of 16 channels in NCHW16c; with ``read_sum`` the sum is an output too."""
    workload = conv2d_int8_workload([1, 16, 6, 6], [16, 16, 1, 1], out_dtype="float32")
    knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 6, "unroll_kw": False, "isa": "avx2"}
    plan = NodePlan("c", "conv2d_int8", workload, knobs, "NCHW16c", "NCHW16c",
                    {"x_scale": float(X_SCALE), "x_zero_point": X_ZERO, "w_scale": W_SCALE.tolist()})
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([1, 1, 6, 6, 16], "uint8"))
    with bb.function("main", [x]):
        with bb.dataflow():
            call, _ = emit_int8(bb, x, W_Q.astype(np.float32) * W_SCALE[:, None, None, None], plan)
            added = bb.emit(relax.op.add(bb.emit(call), relax.const(bias.reshape(1, 1, 1, 1, 16))))
            scaled = bb.emit(relax.op.multiply(added, relax.const(np.float32(factor))))
            out = bb.emit_output(relax.op.astype(relax.op.clip(relax.op.round(scaled), 0, 255), "uint8"))
            extra = [bb.emit_output(added)] if read_sum else []
        bb.emit_func_output(relax.Tuple([out, *extra]) if extra else out)
    return bb.get()


def _run(mod: tvm.IRModule, x: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(tvm.compile(relax.transform.LegalizeOps()(mod), target="llvm"), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(x))
    return (out if hasattr(out, "numpy") else out[0]).numpy()


def _ops(mod: tvm.IRModule) -> list[str | None]:
    return [op_name(b.value) for b in bindings(mod["main"])]


def test_bias_and_reciprocal_fold_into_the_kernel_and_differ_only_at_ties():
    unfolded = _model(BIAS, 1 / Y_SCALE)
    folded = fold_into_kernels(unfolded)
    assert _ops(unfolded) == ["relax.call_tir", "relax.add", "relax.multiply", "relax.round", "relax.clip",
                              "relax.astype"]
    assert _ops(folded) == ["relax.call_tir", "relax.round", "relax.clip", "relax.astype"]
    call = bindings(folded["main"])[0].value
    bias, scale = (const_value(arg) for arg in call.args[1].fields[-2:])
    sums = W_Q.astype(np.int64).reshape(16, -1).sum(axis=1)
    assert bias.reshape(-1).tolist() == (B_Q - X_ZERO * sums).tolist()  # exact in int32
    np.testing.assert_allclose(scale.reshape(-1), X_SCALE * W_SCALE / Y_SCALE, rtol=1e-6)
    x = np.random.default_rng(1).integers(0, 256, [1, 1, 6, 6, 16]).astype(np.uint8)
    acc = np.einsum("hwc,oc->hwo", x[0, 0].astype(np.int64) - X_ZERO, W_Q[:, :, 0, 0].astype(np.int64))
    exact = (acc + B_Q) * (np.float64(X_SCALE) * W_SCALE / np.float64(Y_SCALE))
    want = np.clip(np.rint(exact), 0, 255)
    at_tie = np.abs(exact - np.floor(exact) - 0.5) < 1e-4
    for mod in (unfolded, folded):
        got = _run(mod, x)[0, 0].astype(np.float64)
        assert np.abs(got - want).max() <= 1 and (got == want)[~at_tie].all()


def test_what_does_not_fold_stays():
    inexact = _model(BIAS + np.float32(0.3) * X_SCALE * W_SCALE, 1 / Y_SCALE)  # no multiple of sx * sw
    assert fold_into_kernels(inexact) is inexact
    negative = fold_into_kernels(_model(BIAS, -1 / Y_SCALE))  # the bias folds, the factor stays
    assert _ops(negative) == ["relax.call_tir", "relax.multiply", "relax.round", "relax.clip", "relax.astype"]
    shared = fold_into_kernels(_model(BIAS, 1 / Y_SCALE, read_sum=True))  # the sum is also an output
    assert _ops(shared) == ["relax.call_tir", "relax.multiply", "relax.round", "relax.clip", "relax.astype",
                            None]  # the bias folds; the output reads the kernel's call
