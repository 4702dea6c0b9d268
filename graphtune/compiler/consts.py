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

import numpy as np
import tvm
from tvm import relax

__all__ = ["eval_const"]

_NUMPY_BINARY = {
    "relax.add": np.add, "relax.subtract": np.subtract, "relax.multiply": np.multiply,
    "relax.divide": np.divide, "relax.maximum": np.maximum, "relax.minimum": np.minimum,
}


def eval_const(call: relax.Expr, arrays: list[np.ndarray | None]) -> np.ndarray | None:
    """Numpy value of a call whose tensor arguments have the values ``arrays``, or None.

    Handles reshape, permute_dims, expand_dims, squeeze and elementwise binary
    ops; returns None for anything else (the binding is then kept as it is).

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
    return None
