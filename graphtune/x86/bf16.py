"""bfloat16 as graphtune's kernels store it: the upper 16 bits of a float32, in ``uint16`` tensors.

TVM 0.27's LLVM code generator has no ``bfloat`` type: its TIR passes turn bfloat16 arithmetic into
float32 and bfloat16 storage into ``uint16`` before code generation, which leaves no way to hand
``<32 x bfloat>`` operands to ``vdpbf16ps``. graphtune therefore keeps bfloat16 values as their
bits in ``uint16`` tensors and spells the conversions out:

- :func:`to_float32`: bits -> float32, exact (a 16-bit shift);
- :func:`from_float32`: float32 -> bits, rounding to nearest even (as ``vcvtneps2bf16`` and
  PyTorch do; a NaN stays a NaN);
- :func:`dpbf16ps`: ``vdpbf16ps`` (AVX512-BF16: 16 float32 lanes each adding two bfloat16
  products) as a call to a small LLVM function whose IR :data:`LLVM_IR` carries into the module
  (:func:`with_llvm_ir`); LLVM inlines it, so each call is one instruction.

:func:`np_from_float32` and :func:`np_to_float32` are the NumPy twins (weights, references).

Examples
--------
>>> import numpy as np
>>> bits = np_from_float32(np.array([1.0, 1.00390625, 1.01171875, -2.5], "float32"))
>>> [hex(b) for b in bits], np_to_float32(bits).tolist()  # ties round to even
(['0x3f80', '0x3f80', '0x3f82', '0xc020'], [1.0, 1.0, 1.015625, -2.5])
"""

from __future__ import annotations

import numpy as np
from tvm import ir, te, tirx

__all__ = ["STORAGE", "to_float32", "from_float32", "convert", "widen", "np_to_float32", "np_from_float32",
           "dpbf16ps", "LLVM_IR", "with_llvm_ir"]

STORAGE = "uint16"
"""The dtype of a tensor holding bfloat16 values (their bits)."""

_FUNCTION = "graphtune_dpbf16ps"


def _llvm_function(lanes: int) -> str:
    """The IR of ``vdpbf16ps`` on ``lanes`` float32 lanes (16: zmm; 8: ymm, AVX512-VL)."""
    name, bits = f"{_FUNCTION}_{lanes}", lanes * 32
    acc, words, pairs = f"<{lanes} x float>", f"<{lanes} x i32>", f"<{2 * lanes} x bfloat>"
    intrinsic = f"llvm.x86.avx512bf16.dpbf16ps.{bits}"
    return f"""
define internal {acc} @{name}({acc} %acc, {words} %a, {words} %b) alwaysinline {{
  %x = bitcast {words} %a to {pairs}
  %y = bitcast {words} %b to {pairs}
  %r = call {acc} @{intrinsic}({acc} %acc, {pairs} %x, {pairs} %y)
  ret {acc} %r
}}
declare {acc} @{intrinsic}({acc}, {pairs}, {pairs})
"""


LLVM_IR = _llvm_function(16) + _llvm_function(8)
"""LLVM IR of the functions :func:`dpbf16ps` calls (LLVM 22 types their operands ``<N x bfloat>``)."""


def to_float32(bits: tirx.Expr) -> tirx.Expr:
    """The float32 value of bfloat16 ``bits`` (a uint16 expression): exact.

    Examples
    --------
    >>> print(to_float32(tirx.Var("b", "uint16")))
    T.reinterpret("float32", T.Cast("uint32", b) << T.uint32(16))
    """
    return tirx.reinterpret("float32", bits.astype("uint32") << tirx.const(16, "uint32"))


def from_float32(value: tirx.Expr) -> tirx.Expr:
    """The bfloat16 bits (uint16) nearest float32 ``value``, ties to even; NaN stays NaN.

    Examples
    --------
    >>> str(from_float32(tirx.Var("x", "float32")).ty)
    'uint16'
    """
    word = tirx.reinterpret("uint32", value)
    one = tirx.const(1, "uint32")
    rounded = (word + tirx.const(0x7FFF, "uint32") + ((word >> tirx.const(16, "uint32")) & one)) >> 16
    quiet = (word >> tirx.const(16, "uint32")) | tirx.const(0x40, "uint32")
    return tirx.if_then_else(value != value, quiet, rounded).astype(STORAGE)


def convert(data: te.Tensor, blocked: list | None = None) -> te.Tensor:
    """``data`` (float32, any layout) as bfloat16 bits (:func:`from_float32`): what a bfloat16
    candidate reads; with ``blocked`` (``[N, C'/b, H, W, b]``), plain ``NCHW`` data of fewer
    channels rounded into that blocked shape, the missing channels zero (a padded RGB stem).

    Examples
    --------
    >>> out = convert(te.placeholder((1, 2, 4, 4, 8), "float32"))
    >>> str(out.dtype), out.op.name
    ('uint16', 'bfloat16_rounding')
    >>> [int(d) for d in convert(te.placeholder((1, 3, 4, 4), "float32"), [1, 1, 4, 4, 4]).shape]
    [1, 1, 4, 4, 4]
    """
    if blocked is None:
        return te.compute(data.shape, lambda *index: from_float32(data(*index)), name="bfloat16_rounding")
    channels, block = int(data.shape[1]), blocked[4]

    def padded(n, chunk, y, x, lane):
        c = chunk * block + lane
        value = from_float32(data[n, tirx.min(c, channels - 1), y, x])
        return tirx.if_then_else(c < channels, value, tirx.const(0, STORAGE))

    return te.compute(blocked, padded, name="bfloat16_rounding")


def widen(bits: te.Tensor) -> te.Tensor:
    """``bits`` (bfloat16 as ``uint16``, any layout) as float32 (:func:`to_float32`, exact): how a
    float32 op reads a tensor stored in bfloat16.

    Examples
    --------
    >>> out = widen(te.placeholder((1, 2, 4, 4, 8), STORAGE))
    >>> str(out.dtype), out.op.name
    ('float32', 'bfloat16_widening')
    """
    return te.compute(bits.shape, lambda *index: to_float32(bits(*index)), name="bfloat16_widening")


def np_to_float32(bits: np.ndarray) -> np.ndarray:
    """NumPy :func:`to_float32`."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def np_from_float32(values: np.ndarray) -> np.ndarray:
    """NumPy :func:`from_float32`."""
    word = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((word + 0x7FFF + ((word >> 16) & 1)) >> 16).astype(np.uint16)
    quiet = ((word >> 16) | 0x40).astype(np.uint16)
    return np.where(np.isnan(values), quiet, rounded)


def dpbf16ps(acc: tirx.Expr, pairs: tirx.Expr, weights: tirx.Expr, lanes: int) -> tirx.Expr:
    """``vdpbf16ps``: ``acc`` (``lanes`` float32: 16 on zmm, 8 on ymm) plus, per lane, the two
    products of the lane's bfloat16 pair of ``pairs`` and of ``weights`` (``lanes`` int32: two
    bfloat16 per int32). The PrimFunc using it needs :func:`with_llvm_ir`.

    Examples
    --------
    >>> acc, words = tirx.Var("acc", "float32x8"), tirx.Var("w", "int32x8")
    >>> call = dpbf16ps(acc, words, words, lanes=8)
    >>> call.args[0].value, str(call.ty)
    ('graphtune_dpbf16ps_8', 'float32x8')
    """
    if lanes not in (8, 16):
        raise ValueError(f"vdpbf16ps runs 8 or 16 float32 lanes, not {lanes}")
    return tirx.call_extern(f"float32x{lanes}", f"{_FUNCTION}_{lanes}", acc, pairs, weights)


def with_llvm_ir(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with :data:`LLVM_IR` imported at its body (once): what a PrimFunc calling
    :func:`dpbf16ps` needs.

    Examples
    --------
    >>> x = te.placeholder((4,), "float32")
    >>> f = te.create_prim_func([x, te.compute((4,), lambda i: x[i] * 2.0)])
    >>> with_llvm_ir(f).body.attr_key
    'pragma_import_llvm'
    """
    body = tirx.AttrStmt(tirx.const(0, "int32"), "pragma_import_llvm", ir.StringImm(LLVM_IR), func.body)
    return func.with_body(body)
