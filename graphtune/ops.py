"""Op kinds and their workloads: the TVM-free core shared by graph, config, measure and x86.

An :class:`Op` names what a layout-graph node, a config node or a measurement
task is. A *workload* is the JSON-able description of one kernel op instance:

- conv2d / depthwise_conv2d / group_conv2d: ``{"data", "kernel", "strides",
  "padding", "dilation", "groups", "dtype"}`` (data NCHW, kernel OIHW with
  ``I = C // groups``, padding ``[top, left, bottom, right]``);
- conv2d_transpose: the same plus ``"output_padding"`` (kernel ``[C, O, KH,
  KW]``, IOHW as in ONNX; groups 1, dilation 1);
- dense: ``{"data", "weight", "dtype"}`` (data ``[..., K]`` of rank 2 to 4:
  the leading dims are rows; weight ``[M, K]``);
- transform (a measurement task, not a kernel): ``{"shape", "src", "dst", "dtype"}``.

:func:`op_of` is the only place that infers an op from a workload's fields;
where the op is known (a graph node, a config node, a task), pass it.
Importing this module never loads TVM.

Examples
--------
>>> wl = conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
>>> op_of(wl) == Op.CONV2D == "conv2d", output_shape(wl)
(True, [1, 64, 56, 56])
>>> check_workload({**wl, "strides": [1]}, Op.CONV2D)
Traceback (most recent call last):
...
graphtune.errors.ModelError: workload.strides = [1]: expected a list of 2 ints >= 1
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any, Callable

from .errors import ModelError

__all__ = [
    "Op", "LAYOUT_OPS", "NODE_OPS", "GRAPH_OPS", "TASK_KINDS", "WORKLOAD_FIELDS", "DTYPES",
    "as_op", "op_of", "conv_op", "check_workload", "output_shape", "flops",
    "conv2d_workload", "conv2d_transpose_workload", "dense_workload",
]


class Op(str, enum.Enum):
    """Every op kind graphtune names; each member *is* its string (``Op.DENSE == "dense"``).

    Members hash, compare, print and serialise (JSON) as their string, and
    their ``repr`` is the string's too, so messages and printed dicts read
    the same as before ops were an enum.

    Examples
    --------
    >>> Op("depthwise_conv2d") is Op.DEPTHWISE_CONV2D, Op.JOIN, f"{Op.DENSE}"
    (True, 'join', 'dense')
    """

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __repr__(self) -> str:
        return repr(self.value)

    CONV2D = "conv2d"
    DEPTHWISE_CONV2D = "depthwise_conv2d"
    GROUP_CONV2D = "group_conv2d"
    CONV2D_TRANSPOSE = "conv2d_transpose"
    DENSE = "dense"
    JOIN = "join"
    """The common layout of an add / concat / gating mul's inputs (no kernel)."""
    BOUNDARY = "boundary"
    """A fixed-layout (NCHW / NC) place in the graph: model I/O, reshape, resize..."""
    TRANSFORM = "transform"
    """A layout transform, as a measurement task."""
    SEGMENT = "segment"
    """One PrimFunc of a compiled model holding the ops around the kernels (a kernel with its
    fused epilogue, a pool, a join...), as a measurement task (:mod:`graphtune.opgroups.pricing`)."""


LAYOUT_OPS = (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.GROUP_CONV2D, Op.CONV2D_TRANSPOSE, Op.DENSE)
"""Ops with a tunable kernel: their layouts and knobs are chosen, their candidates measured."""

NODE_OPS = LAYOUT_OPS + (Op.JOIN,)
"""Ops a config node may have."""

GRAPH_OPS = NODE_OPS + (Op.BOUNDARY,)
"""Ops a layout-graph node may have."""

TASK_KINDS = LAYOUT_OPS + (Op.TRANSFORM, Op.SEGMENT)
"""Kinds of measurement task: the kernels, layout transforms, and op-group segments."""

DTYPES = ("float32",)
"""Data types graphtune's kernels support."""

_CONV_FIELDS = ("data", "kernel", "strides", "padding", "dilation", "groups", "dtype")


def as_op(value: Any, known: tuple = tuple(Op), what: str = "op") -> Op:
    """``value`` as an :class:`Op` among ``known``, or one ValueError listing them.

    Examples
    --------
    >>> as_op("dense", LAYOUT_OPS) is Op.DENSE
    True
    >>> as_op("conv3d", LAYOUT_OPS)
    Traceback (most recent call last):
    ...
    ValueError: unknown op 'conv3d'; known: conv2d, depthwise_conv2d, group_conv2d, conv2d_transpose, dense
    """
    if isinstance(value, str) and value in known:
        return Op(value)
    raise ValueError(f"unknown {what} {value!r}; known: {', '.join(known)}")


# ------------------------------------------------------------------ validation
def _ints(workload: dict, field: str, length: int, minimum: int, where: str) -> list:
    value = workload[field]
    if (
        not isinstance(value, (list, tuple))
        or len(value) != length
        or not all(isinstance(x, int) and not isinstance(x, bool) and x >= minimum for x in value)
    ):
        raise ModelError(f"{where}.{field} = {value!r}: expected a list of {length} ints >= {minimum}")
    return list(value)


def _check_fields(workload: dict, op: Op, where: str) -> None:
    keys = WORKLOAD_FIELDS[op]
    missing = [k for k in keys if k not in workload]
    extra = [k for k in workload if k not in keys]
    if missing or extra:
        field = f".{missing[0]}" if missing else ""
        raise ModelError(
            f"{where}{field}: missing fields {missing}, unknown fields {extra}; "
            f"a {op} workload has exactly {list(keys)}"
        )
    if "dtype" in keys and workload["dtype"] not in DTYPES:
        raise ModelError(f"{where} dtype {workload['dtype']!r} is not supported; use one of {DTYPES}")


def _check_nonempty(workload: dict, op: Op, where: str) -> None:
    if min(_SCHEMAS[op].output_shape(workload)) < 1:
        raise ModelError(f"{where} {workload!r} has an empty output; check padding/strides/kernel")


def _check_conv(workload: dict, op: Op | None, where: str) -> None:
    _, c, _, _ = _ints(workload, "data", 4, 1, where)
    o, cg, _, _ = _ints(workload, "kernel", 4, 1, where)
    _ints(workload, "strides", 2, 1, where)
    _ints(workload, "padding", 4, 0, where)
    _ints(workload, "dilation", 2, 1, where)
    groups = workload["groups"]
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1 or c % groups or o % groups:
        raise ModelError(
            f"{where}.groups = {groups!r} must be a positive int dividing the {c} input and {o} output channels"
        )
    if cg * groups != c:
        raise ModelError(
            f"{where}.kernel = {workload['kernel']} expects {cg * groups} input channels "
            f"(kernel[1] * groups) but data has {c}"
        )
    kind = _conv_kind(workload)
    if op is not None and op is not kind:
        raise ModelError(f"{where}: a {kind!r} workload (groups={groups}, {c} channels) does not match op {op!r}")


def _check_transpose(workload: dict, op: Op, where: str) -> None:
    _, c, _, _ = _ints(workload, "data", 4, 1, where)
    c2, _, _, _ = _ints(workload, "kernel", 4, 1, where)
    sh, sw = _ints(workload, "strides", 2, 1, where)
    _ints(workload, "padding", 4, 0, where)
    ph, pw = _ints(workload, "output_padding", 2, 0, where)
    if c2 != c:
        raise ModelError(f"{where}.kernel = {workload['kernel']} (IOHW) expects {c2} "
                         f"input channels but data has {c}")
    if workload["groups"] != 1 or _ints(workload, "dilation", 2, 1, where) != [1, 1]:
        raise ModelError(
            f"{where}: conv2d_transpose with groups={workload['groups']}, dilation={workload['dilation']} "
            "is not supported by graphtune.x86: only groups=1 and dilation [1, 1] are"
        )
    if ph >= sh or pw >= sw:
        raise ModelError(f"{where}.output_padding = {[ph, pw]} must be smaller than the strides {[sh, sw]}")


def _check_dense(workload: dict, op: Op, where: str) -> None:
    data = workload["data"]
    if not isinstance(data, (list, tuple)) or not 2 <= len(data) <= 4:
        raise ModelError(f"{where}.data = {data!r}: expected 2 to 4 ints (rows..., features)")
    k = _ints(workload, "data", len(data), 1, where)[-1]
    _, k2 = _ints(workload, "weight", 2, 1, where)
    if k != k2:
        raise ModelError(f"{where}.weight = {workload['weight']}: data has {k} features but weight expects {k2}")


def _check_transform(workload: dict, op: Op, where: str) -> None:
    shape = workload["shape"]
    if not isinstance(shape, (list, tuple)) or not shape:
        raise ModelError(f"{where}.shape = {shape!r}: expected a list of ints")
    _ints(workload, "shape", len(shape), 1, where)
    for field in ("src", "dst"):
        if not isinstance(workload[field], str):
            raise ModelError(f"{where}.{field} = {workload[field]!r}: expected a layout name")


def _check_segment(workload: dict, op: Op, where: str) -> None:
    if not isinstance(workload["ops"], str) or not isinstance(workload["sha"], str):
        raise ModelError(f"{where}: a segment's ops and sha are strings, got "
                         f"{workload['ops']!r}, {workload['sha']!r}")
    if not isinstance(workload["args"], (list, tuple)):
        raise ModelError(f"{where}.args = {workload['args']!r}: expected a list of argument specs")


# ---------------------------------------------------------- shapes and flops
def _conv_shape(workload: dict) -> list:
    n, _, h, w = workload["data"]
    o, _, kh, kw = workload["kernel"]
    sh, sw = workload["strides"]
    top, left, bottom, right = workload["padding"]
    dh, dw = workload["dilation"]
    return [n, o, (h + top + bottom - (kh - 1) * dh - 1) // sh + 1,
            (w + left + right - (kw - 1) * dw - 1) // sw + 1]


def _transpose_shape(workload: dict) -> list:
    n, _, h, w = workload["data"]
    _, o, kh, kw = workload["kernel"]
    (sh, sw), (top, left, bottom, right) = workload["strides"], workload["padding"]
    ph, pw = workload["output_padding"]
    return [n, o, (h - 1) * sh - top - bottom + kh + ph, (w - 1) * sw - left - right + kw + pw]


def _dense_shape(workload: dict) -> list:
    return list(workload["data"][:-1]) + [workload["weight"][0]]


def _conv_flops(workload: dict) -> int:
    n, o, oh, ow = _conv_shape(workload)
    _, cg, kh, kw = workload["kernel"]
    return 2 * n * o * oh * ow * cg * kh * kw


def _transpose_flops(workload: dict) -> int:  # every input pixel meets every kernel tap once
    n, _, h, w = workload["data"]
    return 2 * n * h * w * math.prod(workload["kernel"])


def _dense_flops(workload: dict) -> int:
    m, k = workload["weight"]
    return 2 * math.prod(workload["data"][:-1]) * k * m


@dataclass(frozen=True)
class _Schema:
    """Fields, validation, output shape and flops of one op's workloads."""

    fields: tuple
    check: Callable[[dict, Op, str], None]
    output_shape: Callable[[dict], list] | None = None
    flops: Callable[[dict], int] | None = None


_CONV = _Schema(_CONV_FIELDS, _check_conv, _conv_shape, _conv_flops)
_SCHEMAS = {
    Op.CONV2D: _CONV,
    Op.DEPTHWISE_CONV2D: _CONV,
    Op.GROUP_CONV2D: _CONV,
    Op.CONV2D_TRANSPOSE: _Schema(
        ("data", "kernel", "strides", "padding", "output_padding", "dilation", "groups", "dtype"),
        _check_transpose, _transpose_shape, _transpose_flops),
    Op.DENSE: _Schema(("data", "weight", "dtype"), _check_dense, _dense_shape, _dense_flops),
    Op.TRANSFORM: _Schema(("shape", "src", "dst", "dtype"), _check_transform),
    Op.SEGMENT: _Schema(("ops", "args", "sha"), _check_segment),
}

WORKLOAD_FIELDS = {op: schema.fields for op, schema in _SCHEMAS.items()}
"""The fields of a workload, per op (layout ops, transform and segment tasks)."""


def _schema(op: Any) -> _Schema:
    try:
        return _SCHEMAS[as_op(op, tuple(_SCHEMAS), "workload op")]
    except ValueError as err:
        raise ModelError(str(err)) from None


def conv_op(groups: int, channels: int, out_channels: int) -> Op:
    """The op of a 2-D convolution: ``conv2d``, ``depthwise_conv2d`` (``groups == C == O``)
    or ``group_conv2d`` (other ``groups > 1``).

    Examples
    --------
    >>> str(conv_op(32, 32, 32)), str(conv_op(2, 32, 64))
    ('depthwise_conv2d', 'group_conv2d')
    """
    if groups == 1:
        return Op.CONV2D
    return Op.DEPTHWISE_CONV2D if groups == channels == out_channels else Op.GROUP_CONV2D


def _conv_kind(workload: dict) -> Op:
    return conv_op(workload["groups"], workload["data"][1], workload["kernel"][0])


def op_of(workload: dict) -> Op:
    """The op of a valid kernel workload, inferred from its fields (the only place that does).

    ``dense`` has a ``weight``, ``conv2d_transpose`` an ``output_padding``;
    other convs are ``depthwise_conv2d`` (``groups == C == O``),
    ``group_conv2d`` (other ``groups > 1``) or ``conv2d``.

    Raises
    ------
    ModelError
        If the workload is malformed or its op is not supported.

    Examples
    --------
    >>> str(op_of(conv2d_workload([1, 32, 8, 8], [32, 1, 3, 3], groups=32, padding=[1, 1, 1, 1])))
    'depthwise_conv2d'
    """
    if not isinstance(workload, dict):
        raise ModelError(f"workload must be a dict, got {type(workload).__name__}")
    if "output_padding" in workload:
        op = Op.CONV2D_TRANSPOSE
    elif "weight" in workload:
        op = Op.DENSE
    else:
        _check_fields(workload, Op.CONV2D, "workload")
        _check_conv(workload, None, "workload")
        op = _conv_kind(workload)
    check_workload(workload, op)
    return op


def check_workload(workload: dict, op: Op | str | None = None, where: str = "workload") -> dict:
    """Validate ``workload`` as a workload of ``op``; return it unchanged.

    Parameters
    ----------
    workload : dict
    op : Op or str, optional
        The op it must describe (default: :func:`op_of` infers it).
    where : str
        How error messages name the workload (``nodes.conv1.workload`` in a config).

    Raises
    ------
    ModelError
        Naming the field: missing/unknown fields, bad shapes, mismatched
        channels, an empty output, an unsupported dtype, or a workload of another op.

    Examples
    --------
    >>> check_workload({"data": [1, 8], "weight": [4, 8], "dtype": "float32"}, "dense")["weight"]
    [4, 8]
    """
    if not isinstance(workload, dict):
        raise ModelError(f"{where} must be a dict, got {type(workload).__name__}")
    if op is None:
        op_of(workload)
        return workload
    schema = _schema(op)
    op = Op(op)
    _check_fields(workload, op, where)
    schema.check(workload, op, where)
    if schema.output_shape is not None:
        _check_nonempty(workload, op, where)
    return workload


def output_shape(workload: dict, op: Op | str | None = None) -> list:
    """Logical output shape: ``[N, O, OH, OW]`` for convs, ``[..., M]`` for dense.

    Examples
    --------
    >>> output_shape(conv2d_workload([1, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3]))
    [1, 64, 112, 112]
    """
    return _schema(op_of(workload) if op is None else op).output_shape(workload)


def flops(workload: dict, op: Op | str | None = None) -> int:
    """Floating-point operations (multiply + add = 2) of one run of the workload.

    Examples
    --------
    >>> flops(dense_workload([1, 4], [3, 4]))
    24
    """
    return _schema(op_of(workload) if op is None else op).flops(workload)


# ------------------------------------------------------------------ builders
def conv2d_workload(
    data: list,
    kernel: list,
    strides: list = (1, 1),
    padding: list = (0, 0, 0, 0),
    dilation: list = (1, 1),
    groups: int = 1,
    dtype: str = "float32",
) -> dict:
    """Build a (depthwise / group) conv2d workload dict with lists, not tuples.

    Examples
    --------
    >>> conv2d_workload([1, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3])["strides"]
    [2, 2]
    """
    workload = {
        "data": [int(x) for x in data],
        "kernel": [int(x) for x in kernel],
        "strides": [int(x) for x in strides],
        "padding": [int(x) for x in padding],
        "dilation": [int(x) for x in dilation],
        "groups": int(groups),
        "dtype": dtype,
    }
    op_of(workload)
    return workload


def conv2d_transpose_workload(
    data: list,
    kernel: list,
    strides: list = (1, 1),
    padding: list = (0, 0, 0, 0),
    output_padding: list = (0, 0),
    dtype: str = "float32",
) -> dict:
    """Build a transposed conv2d workload (kernel ``[C, O, KH, KW]``, groups 1, dilation 1).

    Examples
    --------
    >>> wl = conv2d_transpose_workload([1, 64, 28, 28], [64, 32, 2, 2], [2, 2])
    >>> str(op_of(wl)), output_shape(wl)
    ('conv2d_transpose', [1, 32, 56, 56])
    """
    workload = {
        "data": [int(x) for x in data],
        "kernel": [int(x) for x in kernel],
        "strides": [int(x) for x in strides],
        "padding": [int(x) for x in padding],
        "output_padding": [int(x) for x in output_padding],
        "dilation": [1, 1],
        "groups": 1,
        "dtype": dtype,
    }
    return check_workload(workload, Op.CONV2D_TRANSPOSE)


def dense_workload(data: list, weight: list, dtype: str = "float32") -> dict:
    """Build a dense workload dict (``y = x @ W.T``).

    Examples
    --------
    >>> dense_workload([1, 2048], [1000, 2048])
    {'data': [1, 2048], 'weight': [1000, 2048], 'dtype': 'float32'}
    """
    workload = {"data": [int(x) for x in data], "weight": [int(x) for x in weight], "dtype": dtype}
    return check_workload(workload, Op.DENSE)
