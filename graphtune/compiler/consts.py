"""Evaluate constant-only bindings (bias reshapes, weight transposes) in numpy.

The ONNX importer leaves small computations on constants in ``main`` (a bias
``[C]`` reshaped to ``[1, C, 1, 1]``, a Gemm weight transposed). Relax's
``FoldConstant`` would build and run a TVM kernel for each of them (about 20 s
for MobileNet-v2); these few ops are evaluated here instead, so the rewrite
can pre-transform the results into blocked layouts.

Examples
--------
>>> import numpy as np
>>> from tvm import relax
>>> x = relax.Var("x", relax.TensorType((4,), "float32"))
>>> call = relax.op.reshape(x, (1, 4, 1, 1))
>>> eval_const(call, [np.arange(4, dtype="float32"), None]).shape
(1, 4, 1, 1)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.special
import tvm
from tvm import relax

__all__ = ["eval_const"]

_NUMPY_BINARY = {
    "relax.add": np.add, "relax.subtract": np.subtract, "relax.multiply": np.multiply,
    "relax.divide": np.divide, "relax.maximum": np.maximum, "relax.minimum": np.minimum,
    "relax.power": np.power,
}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


_NUMPY_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relax.round": np.rint, "relax.negative": np.negative, "relax.abs": np.abs,
    "relax.square": np.square, "relax.nn.relu": lambda x: np.maximum(x, 0),
    "relax.sigmoid": _sigmoid, "relax.nn.silu": lambda x: x * _sigmoid(x), "relax.tanh": np.tanh,
    "relax.exp": np.exp, "relax.log": np.log, "relax.sqrt": np.sqrt,
    "relax.rsqrt": lambda x: 1 / np.sqrt(x), "relax.erf": lambda x: scipy.special.erf(x),
    "relax.nn.gelu": lambda x: 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2))),
}
"""Elementwise ops of one tensor, computed in float64 for float inputs and rounded once to the
input's type (``round`` is half to even, as in ONNX and TVM)."""


def eval_const(call: relax.Expr, arrays: list[np.ndarray | None]) -> np.ndarray | None:
    """Numpy value of a call whose tensor arguments have the values ``arrays``, or None.

    Handles reshape, permute_dims, expand_dims, squeeze, astype, clip and elementwise unary
    and binary ops; returns None for anything else (the binding is then kept as it is).

    Examples
    --------
    >>> x = relax.Var("x", relax.TensorType((2, 3), "float32"))
    >>> eval_const(relax.op.permute_dims(x), [np.zeros((2, 3), "float32")]).shape
    (3, 2)
    """
    if not isinstance(call, relax.Call) or not isinstance(call.op, tvm.ir.Op) or not arrays \
            or arrays[0] is None:
        return None
    name, data = call.op.name, arrays[0]
    if name == "relax.reshape" and isinstance(call.args[1], relax.ShapeExpr):
        return data.reshape([int(v) for v in call.args[1].values])
    if name == "relax.permute_dims":
        axes = call.attrs.axes
        return np.ascontiguousarray(data.transpose(None if axes is None else [int(a) for a in axes]))
    if name == "relax.expand_dims":
        return np.expand_dims(data, tuple(int(a) for a in call.attrs.axis))
    if name == "relax.squeeze" and call.attrs.axis is not None:
        return np.squeeze(data, tuple(int(a) for a in call.attrs.axis))
    if name in _NUMPY_BINARY and len(arrays) == 2 and arrays[1] is not None:
        return _NUMPY_BINARY[name](data, arrays[1]).astype(data.dtype)
    if name == "relax.astype":
        return data.astype(str(call.attrs.dtype))
    if name == "relax.clip" and len(arrays) == 3 and all(a is not None for a in arrays[1:]):
        return np.clip(data, arrays[1], arrays[2]).astype(data.dtype)
    if name in _NUMPY_UNARY:
        wide = data.astype(np.float64) if data.dtype.kind == "f" else data
        return np.asarray(_NUMPY_UNARY[name](wide)).astype(data.dtype)
    return None
