"""Costly uint8 -> uint8 chains become 256-entry table lookups (graphtune/compiler/lut.py).

The tables are checked against the chains evaluated independently in numpy and, built, by
TVM's stock lowering; tests/test_quantized.py compiles a quantized model with them against
ONNX Runtime.
"""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from tvm import relax

from graphtune.compiler.lut import LOOKUP, lookup_table_of, lookup_tables

SHAPE = [1, 16, 4, 4]
SCALE_IN, ZERO_IN, SCALE_OUT, ZERO_OUT = 0.05, 120, 0.004, 3


def _f32(value: float) -> relax.Expr:
    return relax.const(np.float32(value))


def _silu_chain(bb: relax.BlockBuilder, q: relax.Expr) -> tuple[relax.Expr, relax.Expr]:
    """QDQ SiLU on stored uint8 ``q``: (the dequantized input, the requantized uint8 result)."""
    x = bb.emit(relax.op.multiply(relax.op.subtract(relax.op.astype(q, "float32"), _f32(ZERO_IN)),
                                  _f32(SCALE_IN)))
    y = bb.emit(relax.op.multiply(x, relax.op.sigmoid(x)))
    rounded = relax.op.add(relax.op.round(relax.op.divide(y, _f32(SCALE_OUT))), _f32(ZERO_OUT))
    return x, bb.emit(relax.op.astype(relax.op.clip(rounded, 0, 255), "uint8"))


def _module(read_inside: bool = False) -> tvm.IRModule:
    """main(q) = silu chain of q; with ``read_inside`` its sigmoid's input is also an output."""
    bb = relax.BlockBuilder()
    q = relax.Var("q", relax.TensorType(SHAPE, "uint8"))
    with bb.function("main", [q]):
        with bb.dataflow():
            x, out = _silu_chain(bb, q)
            outputs = [bb.emit_output(out)] + ([bb.emit_output(relax.op.sigmoid(x))] if read_inside else [])
        bb.emit_func_output(relax.Tuple(outputs) if read_inside else outputs[0])
    return bb.get()


def _reference(q: np.ndarray) -> np.ndarray:
    """The chain in float64 numpy, rounded half to even, saturated."""
    x = (q.astype(np.float64) - ZERO_IN) * np.float32(SCALE_IN)
    y = x / (1 + np.exp(-x))
    return np.clip(np.rint(y / np.float32(SCALE_OUT)) + ZERO_OUT, 0, 255).astype(np.uint8)


def _run(mod: tvm.IRModule, q: np.ndarray) -> np.ndarray:
    """``main(q)`` built by TVM's stock lowering."""
    vm = relax.VirtualMachine(tvm.compile(relax.transform.LegalizeOps()(mod), target="llvm"), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(q)).numpy()


def test_a_silu_chain_becomes_its_table():
    mod = lookup_tables(_module())
    table = lookup_table_of(mod)
    np.testing.assert_array_equal(table, _reference(np.arange(256)))
    calls = [b.value for block in mod["main"].body.blocks for b in block.bindings
             if isinstance(b.value, relax.Call)]
    assert len(calls) == 1 and calls[0].args[0].name_hint.startswith(LOOKUP)  # the chain is gone
    q = np.random.default_rng(0).integers(0, 256, SHAPE).astype(np.uint8)
    np.testing.assert_array_equal(_run(mod, q), _reference(q))


def _quantize(x: relax.Expr, scale: float, zero: int) -> relax.Expr:
    rounded = relax.op.add(relax.op.round(relax.op.divide(x, _f32(scale))), _f32(zero))
    return relax.op.astype(relax.op.clip(rounded, 0, 255), "uint8")


def test_a_hardswish_chain_rounding_twice_becomes_its_table():
    """QDQ hardswish: no costly op, but a rounding inside -- one table for both."""
    bb = relax.BlockBuilder()
    q = relax.Var("q", relax.TensorType(SHAPE, "uint8"))
    with bb.function("main", [q]):
        with bb.dataflow():
            x = bb.emit(relax.op.multiply(relax.op.astype(q, "float32"), _f32(SCALE_IN)))
            gate = relax.op.clip(relax.op.add(relax.op.multiply(x, _f32(1 / 6)), _f32(0.5)), 0, 1)
            gate = relax.op.multiply(relax.op.astype(bb.emit(_quantize(gate, 1 / 255, 0)), "float32"),
                                     _f32(1 / 255))
            out = bb.emit_output(_quantize(relax.op.multiply(x, gate), SCALE_OUT, ZERO_OUT))
        bb.emit_func_output(out)
    table = lookup_table_of(lookup_tables(bb.get()))
    f32 = np.float32  # the chain's arithmetic: float32, round half to even (a tie at q = 24)
    x = np.arange(256, dtype=f32) * f32(SCALE_IN)
    gate = np.clip(np.rint(np.clip(x * f32(1 / 6) + f32(0.5), 0, 1) / f32(1 / 255)), 0, 255) * f32(1 / 255)
    np.testing.assert_array_equal(table, np.clip(np.rint(x * gate / f32(SCALE_OUT)) + ZERO_OUT, 0, 255))


def test_a_chain_whose_costly_value_is_read_elsewhere_stays():
    """Its sigmoid would still run for the other reader: a table would only add a load."""
    mod = _module(read_inside=True)
    assert lookup_tables(mod) is mod


def test_a_plain_requantization_stays_arithmetic():
    bb = relax.BlockBuilder()
    q = relax.Var("q", relax.TensorType(SHAPE, "uint8"))
    with bb.function("main", [q]):
        with bb.dataflow():
            x = bb.emit(relax.op.nn.relu(relax.op.multiply(relax.op.astype(q, "float32"), _f32(0.1))))
            out = bb.emit_output(relax.op.astype(relax.op.clip(relax.op.round(x), 0, 255), "uint8"))
        bb.emit_func_output(out)
    mod = bb.get()
    assert lookup_tables(mod) is mod
    with pytest.raises(IndexError, match="0 table lookups"):
        lookup_table_of(mod)
