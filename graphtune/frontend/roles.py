"""What each Relax op means for layouts: the roles and op tables (no TVM import).

:func:`graphtune.frontend.walk` gives every binding of ``main`` a :class:`Role`
and, for the ops that run in a blocked ``NCHW{x}c`` layout (``pass`` and
``join`` steps), a :class:`Form` saying how the compiler re-emits it in that
layout. These tables are the only place graphtune decides which op is which:
extraction and the compiler both read them through the walk.

Examples
--------
>>> Role.PASS == "pass", Role("join") is Role.JOIN
(True, True)
>>> Form.of("relax.nn.max_pool2d"), Form.of("relax.power"), Form.of("relax.reshape") is None
(<Form.POOL: 'pool'>, <Form.CHANNEL_CONST: 'channel_const'>, True)
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Role", "Form", "UNARY", "POOLS", "BINARY", "KNOWN_FIXED"]


class Role(StrEnum):
    """Role of one binding of ``main`` (see :mod:`graphtune.frontend.walk`).

    str-valued: ``Role.PASS == "pass"`` and it serialises as ``"pass"``.

    Examples
    --------
    >>> [str(r) for r in Role]
    ['layout', 'pass', 'join', 'fixed', 'tuple', 'const']
    """

    LAYOUT = "layout"
    PASS = "pass"
    JOIN = "join"
    FIXED = "fixed"
    TUPLE = "tuple"
    CONST = "const"


class Form(StrEnum):
    """How a ``pass`` or ``join`` step is re-emitted in a blocked layout.

    ``ALIAS``
        ``y = x``: the same tensor.
    ``UNARY``
        Elementwise op of one tensor; other arguments (clip's bounds) kept.
    ``POOL``
        ``max_pool2d`` / ``avg_pool2d``, re-made with ``NCHW{x}c`` layout attrs.
    ``ADAPTIVE_POOL``
        ``adaptive_avg_pool2d``, re-made with ``NCHW{x}c`` layout attrs.
    ``MEAN``
        Keepdims mean over H and W (global average pool).
    ``CHANNEL_CONST``
        Binary elementwise op of a tensor and a scalar or per-channel constant
        (the constant is packed to the block).
    ``BINARY_JOIN``
        Binary elementwise op of two tensors (residual add, SE gating).
    ``CONCAT_JOIN``
        Concat along the channels, or along H or W (the same axis in ``NCHW{x}c``).
    ``SPATIAL_SLICE``
        ``strided_slice`` of H and W only: the same axes in ``NCHW{x}c``.
    ``RESIZE``
        ``image.resize2d`` of an ``NCHW`` tensor, re-made with ``NCHW{x}c``
        layout and its other attrs kept.

    Examples
    --------
    >>> Form.of("relax.nn.relu"), Form.of("relax.concat", join=True)
    (<Form.UNARY: 'unary'>, <Form.CONCAT_JOIN: 'concat_join'>)
    """

    ALIAS = "alias"
    UNARY = "unary"
    POOL = "pool"
    ADAPTIVE_POOL = "adaptive_pool"
    MEAN = "mean"
    CHANNEL_CONST = "channel_const"
    BINARY_JOIN = "binary_join"
    CONCAT_JOIN = "concat_join"
    RESIZE = "resize"
    SPATIAL_SLICE = "spatial_slice"

    @classmethod
    def of(cls, op: str | None, join: bool = False) -> "Form | None":
        """The form of a Relax op when its step passes (or, ``join=True``, joins) layouts.

        None for ops that never run in a blocked layout.
        """
        if op is None:
            return None
        if join:
            return _JOIN_FORMS.get(op)
        return _PASS_FORMS.get(op)


def _relax(*names: str) -> frozenset[str]:
    return frozenset("relax." + n for n in names)


UNARY = _relax(
    "nn.relu", "clip", "sigmoid", "tanh", "nn.silu", "nn.gelu", "nn.gelu_tanh",
    "nn.leakyrelu", "exp", "log", "sqrt", "rsqrt", "square", "erf", "negative", "abs", "round",
    "astype",
)
"""Elementwise ops of one tensor: they run in any layout."""
POOLS = _relax("nn.max_pool2d", "nn.avg_pool2d")
"""2-D pools with an NCHW{x}c form in Relax."""
ADAPTIVE_POOL = "relax.nn.adaptive_avg_pool2d"
MEAN = "relax.mean"
RESIZE = "relax.image.resize2d"
SLICE = "relax.strided_slice"
CONCAT = "relax.concat"
BINARY = _relax("add", "subtract", "multiply", "divide", "maximum", "minimum", "power")
"""Broadcasting binary elementwise ops: ``pass`` with a scalar / per-channel constant, else ``join``."""
KNOWN_FIXED = _relax(
    "reshape", "permute_dims", "flatten", "nn.softmax", "nn.log_softmax", "mean", "sum", "max",
    "min", "squeeze", "expand_dims", "strided_slice", "split", "take", "concat", "matmul",
    "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv2d_transpose", "image.resize2d", "nn.pad",
    "broadcast_to", "tile", "argmax", "topk", "nn.batch_norm", "nn.dropout",
    "nn.adaptive_avg_pool2d", "nn.prelu", "where", "isnan", "nn.layer_norm", "nn.group_norm",
    "nn.instance_norm", "quantize", "dequantize", "vision.roi_align",
)
"""Ops graphtune knows that need plain NCHW in some (or all) of their uses: no warning for them."""

_PASS_FORMS = {
    **{op: Form.UNARY for op in UNARY},
    **{op: Form.POOL for op in POOLS},
    ADAPTIVE_POOL: Form.ADAPTIVE_POOL,
    MEAN: Form.MEAN,
    RESIZE: Form.RESIZE,
    SLICE: Form.SPATIAL_SLICE,
    **{op: Form.CHANNEL_CONST for op in BINARY},
}
_JOIN_FORMS = {**{op: Form.BINARY_JOIN for op in BINARY}, CONCAT: Form.CONCAT_JOIN}
