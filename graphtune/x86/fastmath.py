"""Vectorisable float32 ``exp``, ``sigmoid``, ``tanh``, ``silu`` and ``erf`` for TE computes.

TVM lowers ``exp`` / ``sigmoid`` / ``tanh`` to LLVM's ``llvm.exp`` intrinsic,
which on x86 without a vector math library becomes one scalar ``expf`` call
per element: a vectorised loop of them is no faster than a scalar one. A SiLU
epilogue after a 1x1 conv of EfficientNet-B0 took 20x the conv's own time
that way. The functions here build the same values from multiplies, adds, a
``floor`` and an integer shift (Cephes' ``expf``: range reduction by ``ln 2``
and a degree-6 polynomial; relative error about 2e-7 on the clamped range
``[-87.3, 88]``), which LLVM compiles to vector instructions.

``round`` (ties to even, ONNX ``Round`` and the rounding of every ``QuantizeLinear``) is no
approximation: TVM's stock legalization computes it with ``tirx.nearbyint``, which TVM's
vectorizer leaves a scalar loop (LLVM then vectorizes it at 8 lanes with gathers and scatters),
while ``tirx.round`` is the same ``llvm.nearbyint`` on whole vectors. The requantizing epilogue
of a quantized model's conv rounds twice per value: on AVX-512 it ran on 8-lane halves.

Scalar builders (:func:`exp`, :func:`sigmoid`, :func:`tanh`) take and return a
float32 ``PrimExpr``; :data:`COMPUTES` maps a Relax op name to a TE compute
over a tensor, which :mod:`graphtune.compiler.legalize` uses in place of
TVM's stock legalization for float32 tensors.

Examples
--------
>>> import numpy as np, tvm
>>> from tvm import te
>>> x = te.placeholder((64,), name="x")
>>> y = COMPUTES["relax.sigmoid"](x)
>>> f = tvm.compile(te.create_prim_func([x, y]), target={"kind": "llvm"})
>>> a = np.linspace(-20, 20, 64, dtype="float32")
>>> out = tvm.runtime.tensor(np.zeros(64, "float32"))
>>> f(tvm.runtime.tensor(a), out)
>>> bool(np.allclose(out.numpy(), 1 / (1 + np.exp(-a)), rtol=1e-6, atol=1e-7))
True
"""

from __future__ import annotations

from typing import Callable

from tvm import te, tirx, topi

__all__ = ["exp", "sigmoid", "tanh", "COMPUTES"]

_HI, _LO = 88.0, -87.3
"""Clamp of the argument of :func:`exp`: 2**n stays a normal float32 (n in [-126, 127])."""

_LN2_HI, _LN2_LO = 0.693359375, -2.12194440e-4  # ln 2 = HI + LO, HI exact in few bits
_LOG2E = 1.44269504088896341
_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
         1.6666665459e-1, 5.0000001201e-1)


def _f(value: float) -> tirx.PrimExpr:
    return tirx.const(value, "float32")


def exp(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """``e**x`` for a float32 expression, from vectorisable arithmetic (see module docstring).

    Arguments above 88 give ``e**88``, below -87.3 give ``e**-87.3`` (about
    1e-38) rather than overflowing or flushing to zero.

    Examples
    --------
    >>> from tvm import tirx
    >>> "floor" in str(exp(tirx.Var("x", "float32")))
    True
    """
    x = tirx.max(tirx.min(x, _f(_HI)), _f(_LO))
    n = tirx.floor(x * _f(_LOG2E) + _f(0.5))
    r = x - n * _f(_LN2_HI) - n * _f(_LN2_LO)
    poly = _f(_POLY[0])
    for coeff in _POLY[1:]:
        poly = poly * r + _f(coeff)
    poly = poly * r * r + r + _f(1.0)
    bits = tirx.shift_left(n.astype("int32") + tirx.const(127, "int32"), tirx.const(23, "int32"))
    return poly * tirx.reinterpret("float32", bits)


def sigmoid(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """``1 / (1 + e**-x)`` for a float32 expression (absolute error below 1e-7).

    Examples
    --------
    >>> from tvm import tirx
    >>> "floor" in str(sigmoid(tirx.Var("x", "float32")))
    True
    """
    return _f(1.0) / (_f(1.0) + exp(-x))


def tanh(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """``tanh(x)`` as ``1 - 2 / (1 + e**2x)`` for a float32 expression (absolute error below 2e-7).

    Examples
    --------
    >>> from tvm import tirx
    >>> "floor" in str(tanh(tirx.Var("x", "float32")))
    True
    """
    return _f(1.0) - _f(2.0) / (_f(1.0) + exp(x * _f(2.0)))


def _elementwise(scalar: Callable[[tirx.PrimExpr], tirx.PrimExpr], name: str) -> Callable:
    def compute(x: te.Tensor) -> te.Tensor:
        return te.compute(x.shape, lambda *i: scalar(x(*i)), name=name, tag="elemwise")
    return compute


def _silu(x: te.Tensor) -> te.Tensor:
    return te.compute(x.shape, lambda *i: x(*i) * sigmoid(x(*i)), name="silu", tag="elemwise")


def _gelu(x: te.Tensor) -> te.Tensor:
    """GELU with TOPI's ``fast_erf`` (a rational approximation, absolute error < 5e-7)."""
    erf = topi.fast_erf(topi.multiply(x, tirx.const(0.7071067811865476, "float32")))
    return topi.multiply(topi.multiply(x, _f(0.5)), topi.add(erf, _f(1.0)))


COMPUTES: dict[str, Callable[[te.Tensor], te.Tensor]] = {
    "relax.exp": _elementwise(exp, "exp"),
    "relax.sigmoid": _elementwise(sigmoid, "sigmoid"),
    "relax.tanh": _elementwise(tanh, "tanh"),
    "relax.nn.silu": _silu,
    "relax.erf": topi.fast_erf,
    "relax.nn.gelu": _gelu,
    "relax.round": _elementwise(tirx.round, "round"),
}
"""Relax op name -> vectorisable TE compute of the op on a float32 tensor."""
