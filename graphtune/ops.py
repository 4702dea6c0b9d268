"""Op kinds and their workloads: the TVM-free core shared by graph, config, measure and x86.

An :class:`Op` names what a layout-graph node, a config node or a measurement
task is. A *workload* is the JSON-able description of one kernel op instance:

- conv2d / depthwise_conv2d / group_conv2d: ``{"data", "kernel", "strides",
  "padding", "dilation", "groups", "dtype"}`` (data NCHW, kernel OIHW with
  ``I = C // groups``, padding ``[top, left, bottom, right]``);
- conv2d_int8 / depthwise_conv2d_int8 / group_conv2d_int8: conv2d's fields (groups 1,
  ``C == O == groups``, or other groups) with
  ``"dtype": "uint8"`` (the activation; weights are
  symmetric int8) plus ``"out_dtype"``: ``"uint8"`` (requantized) or ``"float32"`` (dequantized)
  — precision is part of a node's format, so records and configs key it; a conv2d_int8 may
  carry ``"weight_pair_max"`` (:data:`WEIGHT_PAIR_MAX`), which decides the instructions it may run;
- conv2d_bf16: conv2d's fields (groups 1) with ``"dtype": "bfloat16"`` (activations and
  weights; float32 sums and output): the kernel a conv2d node's bfloat16 candidate runs
  (:func:`runs_as`), so records key it apart from the node's float32 one;
- dense_bf16: dense's fields with ``"dtype": "bfloat16"``, data ``[1, K]`` only (as dense_int8);
- depthwise_conv2d_bf16: depthwise_conv2d's fields with ``"dtype": "bfloat16"`` (activations and
  weights; float32 products, sums and output): a depthwise node's bfloat16 candidate;
- group_conv2d_bf16: group_conv2d's fields with ``"dtype": "bfloat16"``: a group conv node's
  bfloat16 candidate (conv2d_bf16's kernel with the group block rules);
- conv2d_transpose: the same plus ``"output_padding"`` (kernel ``[C, O, KH,
  KW]``, IOHW as in ONNX; groups 1, dilation 1);
- dense: ``{"data", "weight", "dtype"}`` (data ``[..., K]`` of rank 2 to 4:
  the leading dims are rows; weight ``[M, K]``);
- dense_int8: dense's fields with ``"dtype": "uint8"`` plus ``"out_dtype"`` (as the int8
  convs'), data ``[1, K]`` only (batch 1, 2-D: the conv2d_int8 kernel on a 1x1 map), and
  optionally ``"weight_pair_max"`` as conv2d_int8;
- transform (a measurement task, not a kernel): ``{"shape", "src", "dst", "dtype"}``;
- op group (a measurement task: one PrimFunc of a compiled model): ``{"ops", "args", "sha"}``.

:data:`OP_CLASSES` says how each op kind counts: its family in a profile, whether its
time is arithmetic (compute-bound) or where its data sits, whether it is a view.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Callable

from .errors import KnobError, ModelError

__all__ = [
    "Op", "LAYOUT_OPS", "KERNEL_OPS", "NODE_OPS", "GRAPH_OPS", "TASK_KINDS", "WORKLOAD_FIELDS", "DTYPES",
    "ModelNode",
    "as_op", "op_of", "conv_op", "check_workload", "output_shape", "flops",
    "conv2d_workload", "conv2d_transpose_workload", "dense_workload", "conv2d_int8_workload",
    "dense_int8_workload", "INT8_OPS", "BF16_OPS", "PRECISION", "PRECISIONS", "BF16_DTYPES", "MODEL_CHANNELS",
    "WEIGHT_PAIR_MAX", "runs_as", "timed_as",
    "input_dtype",
    "FAMILIES", "LAYOUT_TRANSFORM", "OpClass", "OP_CLASSES", "op_class",
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
    CONV2D_INT8 = "conv2d_int8"
    """conv2d of uint8 activations and int8 weights, int32 accumulation, requantized epilogue."""
    DEPTHWISE_CONV2D_INT8 = "depthwise_conv2d_int8"
    """depthwise_conv2d of uint8 activations and int8 weights (as :attr:`CONV2D_INT8`)."""
    GROUP_CONV2D_INT8 = "group_conv2d_int8"
    """group_conv2d of uint8 activations and int8 weights (as :attr:`CONV2D_INT8`)."""
    DENSE_INT8 = "dense_int8"
    """Batch-1 dense of uint8 activations and int8 weights (as :attr:`CONV2D_INT8`)."""
    CONV2D_BF16 = "conv2d_bf16"
    """conv2d of bfloat16 activations and weights, float32 accumulation and output: the kernel a
    conv2d node's bfloat16 candidate runs (:func:`runs_as`), never a node's own op."""
    DENSE_BF16 = "dense_bf16"
    """Batch-1 dense of bfloat16 activations and weights (as :attr:`CONV2D_BF16`): the kernel a
    dense node's bfloat16 candidate runs."""
    DEPTHWISE_CONV2D_BF16 = "depthwise_conv2d_bf16"
    """depthwise_conv2d of bfloat16 activations and weights, float32 products, sums and output:
    the kernel a depthwise node's bfloat16 candidate runs (it halves the bytes the conv reads, and
    lets the tensor it reads be stored in bfloat16)."""
    GROUP_CONV2D_BF16 = "group_conv2d_bf16"
    """group_conv2d of bfloat16 activations and weights, float32 sums and output (as
    :attr:`CONV2D_BF16`, with the block rules of :attr:`GROUP_CONV2D_INT8`): the kernel a group
    conv node's bfloat16 candidate runs."""
    JOIN = "join"
    """The common layout of an add / concat / gating mul's inputs (no kernel)."""
    BOUNDARY = "boundary"
    """A fixed-layout (NCHW / NC) place in the graph: model I/O, reshape, resize..."""
    TRANSFORM = "transform"
    """A layout transform, as a measurement task."""
    OP_GROUP = "segment"
    """An op group: one PrimFunc of a compiled model holding the ops around the kernels (a kernel
    with its fused epilogue, a pool, a join...), as a measurement task
    (:mod:`graphtune.opgroups.pricing`). Its value is the records' task kind since op groups
    were first measured."""
    IN_MODEL = "in_model"
    """The time a layout node's calls (kernel, fused epilogue, the op groups placed on it) or a
    layout transform took inside one compiled model, as a record (:mod:`graphtune.feedback`).
    Measured by profiling the whole model, never built alone: no builder."""


INT8_OPS = (Op.CONV2D_INT8, Op.DEPTHWISE_CONV2D_INT8, Op.GROUP_CONV2D_INT8, Op.DENSE_INT8)
"""The quantized ops: uint8 activations, int8 weights, an exact int32 sum; each may also run as
its fp32 op (:func:`runs_as`)."""

LAYOUT_OPS = (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.GROUP_CONV2D, Op.CONV2D_TRANSPOSE, Op.DENSE) + INT8_OPS
"""Ops with a tunable kernel: their layouts and knobs are chosen, their candidates measured."""

NODE_OPS = LAYOUT_OPS + (Op.JOIN,)
"""Ops a config node may have."""

GRAPH_OPS = NODE_OPS + (Op.BOUNDARY,)
"""Ops a layout-graph node may have."""

BF16_OPS = (Op.CONV2D_BF16, Op.DENSE_BF16, Op.DEPTHWISE_CONV2D_BF16, Op.GROUP_CONV2D_BF16)
"""The bfloat16 kernels: what a conv2d, depthwise_conv2d, group_conv2d or batch-1 dense node's
bfloat16 candidate runs."""

KERNEL_OPS = LAYOUT_OPS + BF16_OPS
"""Ops graphtune.x86 builds a kernel for: the layout ops, and the kernels their candidates may
run in another precision (:func:`runs_as`)."""

TASK_KINDS = KERNEL_OPS + (Op.TRANSFORM, Op.OP_GROUP, Op.IN_MODEL)
"""Kinds of measurement task: the kernels, layout transforms, op groups, and in-model times."""

DTYPES = ("float32",)
"""Data types graphtune's float kernels support."""

BF16_DTYPES = ("bfloat16",)
"""Activation and weight data types of the bfloat16 kernels (``dtype`` of their workloads)."""

PRECISIONS = ("float32", "bfloat16")
"""Values of the knob :data:`PRECISION`."""

INT8_DTYPES = ("uint8",)
"""Activation data types of the int8 kernels (``dtype`` of a conv2d_int8 workload)."""

INT8_OUT_DTYPES = ("uint8", "float32")
"""Output data types of the int8 kernels: requantized, or dequantized for a float consumer."""

ModelNode = tuple[str, str, dict[str, Any] | None]
"""``(name, op, workload)`` of one layout node of a model (a join's workload: its inputs, or
None): what a model reader gives (:func:`graphtune.bind.model_nodes`) and a config is checked
against (:meth:`graphtune.config.Config.check_nodes`)."""

Workload = dict[str, Any]
"""A workload: the JSON-able fields of one kernel op instance or measurement task."""

WEIGHT_PAIR_MAX = "weight_pair_max"
"""Optional field of a conv2d_int8 / dense_int8 workload: the largest ``|w[o, 2j]| + |w[o, 2j + 1]|``
over output channels ``o``, taps and input-channel pairs ``(2j, 2j + 1)`` of its int8 weights
(an int in 0..256; absent: unknown). The ``vpmaddubsw`` kernels are exact, and offered, only
where ``255 * weight_pair_max <= 32767`` (``graphtune.x86.ISAS``)."""

_CONV_FIELDS = ("data", "kernel", "strides", "padding", "dilation", "groups", "dtype")
_DENSE_FIELDS = ("data", "weight", "dtype")


def as_op(value: Any, known: tuple[str, ...] = tuple(Op), what: str = "op") -> Op:
    """``value`` as an :class:`Op` among ``known``, or one ValueError listing them.

    Examples
    --------
    >>> as_op("dense", LAYOUT_OPS) is Op.DENSE
    True
    >>> as_op("conv3d", LAYOUT_OPS)
    Traceback (most recent call last):
    ...
    ValueError: unknown op 'conv3d'; known: conv2d, depthwise_conv2d, group_conv2d, conv2d_transpose, dense,
        conv2d_int8, depthwise_conv2d_int8, group_conv2d_int8, dense_int8
    """
    if isinstance(value, str) and value in known:
        return Op(value)
    raise ValueError(f"unknown {what} {value!r}; known: {', '.join(known)}")


# ------------------------------------------------------------------ validation
def _ints(workload: Workload, field: str, length: int, minimum: int, where: str) -> list[int]:
    value = workload[field]
    if (
        not isinstance(value, (list, tuple))
        or len(value) != length
        or not all(isinstance(x, int) and not isinstance(x, bool) and x >= minimum for x in value)
    ):
        raise ModelError(f"{where}.{field} = {value!r}: expected a list of {length} ints >= {minimum}")
    return list(value)


def _check_fields(workload: Workload, op: Op, where: str) -> None:
    keys, optional = WORKLOAD_FIELDS[op], _SCHEMAS[op].optional
    missing = [k for k in keys if k not in workload]
    extra = [k for k in workload if k not in keys + optional]
    if missing or extra:
        field = f".{missing[0]}" if missing else ""
        also = f" (optionally also {list(optional)})" if optional else ""
        raise ModelError(
            f"{where}{field}: missing fields {missing}, unknown fields {extra}; "
            f"a {op} workload has exactly {list(keys)}{also}"
        )
    dtypes = _SCHEMAS[op].dtypes
    if "dtype" in keys and workload["dtype"] not in dtypes:
        raise ModelError(f"{where} dtype {workload['dtype']!r} is not supported; use one of {dtypes}")


def _check_nonempty(workload: Workload, op: Op, where: str) -> None:
    shape = _SCHEMAS[op].output_shape
    assert shape is not None  # only called for ops with an output shape
    if min(shape(workload)) < 1:
        raise ModelError(f"{where} {workload!r} has an empty output; check padding/strides/kernel")


def _check_conv(workload: Workload, op: Op | None, where: str) -> None:
    _, c, _, _ = _ints(workload, "data", 4, 1, where)
    o, cg, _, _ = _ints(workload, "kernel", 4, 1, where)
    _ints(workload, "strides", 2, 1, where)
    _ints(workload, "padding", 4, 0, where)
    _ints(workload, "dilation", 2, 1, where)
    groups = workload["groups"]
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1 or c % groups or o % groups:
        raise ModelError(
            f"{where}.groups = {groups!r} must be a positive int dividing the {c} input and {o} "
            "output channels"
        )
    if cg * groups != c:
        raise ModelError(
            f"{where}.kernel = {workload['kernel']} expects {cg * groups} input channels "
            f"(kernel[1] * groups) but data has {c}"
        )
    kind = _conv_kind(workload)
    if op is not None and op is not kind:
        raise ModelError(f"{where}: a {kind!r} workload (groups={groups}, {c} channels) does not "
                         f"match op {op!r}")


def _int8_kind(workload: Workload) -> Op:
    int8 = {Op.CONV2D: Op.CONV2D_INT8, Op.DEPTHWISE_CONV2D: Op.DEPTHWISE_CONV2D_INT8,
            Op.GROUP_CONV2D: Op.GROUP_CONV2D_INT8}
    return int8[_conv_kind(workload)]


def _check_out_dtype(workload: Workload, where: str) -> None:
    if workload["out_dtype"] not in INT8_OUT_DTYPES:
        raise ModelError(f"{where}.out_dtype = {workload['out_dtype']!r}: use one of {INT8_OUT_DTYPES}")
    bound = workload.get(WEIGHT_PAIR_MAX, 0)
    if not isinstance(bound, int) or isinstance(bound, bool) or not 0 <= bound <= 256:
        raise ModelError(f"{where}.{WEIGHT_PAIR_MAX} = {bound!r}: expected an int in 0..256 (the largest "
                         "|w0| + |w1| of an input-channel pair of the int8 weights), or no such field")


def _check_int8(workload: Workload, op: Op, where: str) -> None:
    _check_conv(workload, None, where)
    kind = _int8_kind(workload)
    if kind is not op:
        raise ModelError(f"{where}: a {kind!r} workload (groups={workload['groups']}) does not match "
                         f"op {op!r}")
    _check_out_dtype(workload, where)


MODEL_CHANNELS = "model_channels"
"""Optional field of a conv2d_bf16 workload: the node's own input channels, one fewer than the
kernel's (an odd count, padded with a zero channel: bfloat16 multiplies pairs)."""


def _check_bf16(workload: Workload, op: Op, where: str) -> None:
    _check_conv(workload, Op.CONV2D, where)
    channels = workload.get(MODEL_CHANNELS, workload["data"][1])
    if channels not in (workload["data"][1], workload["data"][1] - 1) or not isinstance(channels, int):
        raise ModelError(f"{where}.{MODEL_CHANNELS} = {channels!r}: expected the data's channels less "
                         f"one ({workload['data'][1] - 1}, a zero channel padding an odd count), or no such "
                         "field")


def _check_depthwise_bf16(workload: Workload, op: Op, where: str) -> None:
    _check_conv(workload, Op.DEPTHWISE_CONV2D, where)


def _check_group_bf16(workload: Workload, op: Op, where: str) -> None:
    _check_conv(workload, Op.GROUP_CONV2D, where)


def _check_dense_bf16(workload: Workload, op: Op, where: str) -> None:
    _check_one_row(workload, op, where, "bf16")


def _check_transpose(workload: Workload, op: Op, where: str) -> None:
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


def _check_dense(workload: Workload, op: Op, where: str) -> None:
    data = workload["data"]
    if not isinstance(data, (list, tuple)) or not 2 <= len(data) <= 4:
        raise ModelError(f"{where}.data = {data!r}: expected 2 to 4 ints (rows..., features)")
    k = _ints(workload, "data", len(data), 1, where)[-1]
    _, k2 = _ints(workload, "weight", 2, 1, where)
    if k != k2:
        raise ModelError(f"{where}.weight = {workload['weight']}: data has {k} features but weight "
                         f"expects {k2}")


def _check_one_row(workload: Workload, op: Op, where: str, kind: str) -> None:
    """A dense run as the ``kind`` conv2d kernel on a 1x1 map: one row ``[1, K]``."""
    _check_dense(workload, op, where)
    if len(workload["data"]) != 2 or workload["data"][0] != 1:
        article = "an" if kind == "int8" else "a"
        raise ModelError(f"{where}.data = {workload['data']}: {article} {kind} dense reads one row [1, K] "
                         "(the "
                         f"conv2d_{kind} kernel on a 1x1 map); other dense layers run in fp32 (dense)")


def _check_dense_int8(workload: Workload, op: Op, where: str) -> None:
    _check_one_row(workload, op, where, "int8")
    _check_out_dtype(workload, where)


def _check_transform(workload: Workload, op: Op, where: str) -> None:
    shape = workload["shape"]
    if not isinstance(shape, (list, tuple)) or not shape:
        raise ModelError(f"{where}.shape = {shape!r}: expected a list of ints")
    _ints(workload, "shape", len(shape), 1, where)
    for field in ("src", "dst"):
        if not isinstance(workload[field], str):
            raise ModelError(f"{where}.{field} = {workload[field]!r}: expected a layout name")


def _check_op_group(workload: Workload, op: Op, where: str) -> None:
    if not isinstance(workload["ops"], str) or not isinstance(workload["sha"], str):
        raise ModelError(f"{where}: an op group's ops and sha are strings, got "
                         f"{workload['ops']!r}, {workload['sha']!r}")
    if not isinstance(workload["args"], (list, tuple)):
        raise ModelError(f"{where}.args = {workload['args']!r}: expected a list of argument specs")


def _check_in_model(workload: Workload, op: Op, where: str) -> None:
    for name in ("model", "node", "in_layout", "out_layout", "protocol"):
        if not isinstance(workload[name], str):
            raise ModelError(f"{where}.{name} = {workload[name]!r}: expected a string")
    if not isinstance(workload["shape"], (list, tuple)):
        raise ModelError(f"{where}.shape = {workload['shape']!r}: expected a list of ints")
    if workload.get("dtype", "float32") not in _SCHEMAS[op].dtypes:  # a transform's: what it moved
        raise ModelError(f"{where}.dtype = {workload['dtype']!r}: expected one of {_SCHEMAS[op].dtypes}")


# ---------------------------------------------------------- shapes and flops
def _conv_shape(workload: Workload) -> list[int]:
    n, _, h, w = workload["data"]
    o, _, kh, kw = workload["kernel"]
    sh, sw = workload["strides"]
    top, left, bottom, right = workload["padding"]
    dh, dw = workload["dilation"]
    return [n, o, (h + top + bottom - (kh - 1) * dh - 1) // sh + 1,
            (w + left + right - (kw - 1) * dw - 1) // sw + 1]


def _transpose_shape(workload: Workload) -> list[int]:
    n, _, h, w = workload["data"]
    _, o, kh, kw = workload["kernel"]
    (sh, sw), (top, left, bottom, right) = workload["strides"], workload["padding"]
    ph, pw = workload["output_padding"]
    return [n, o, (h - 1) * sh - top - bottom + kh + ph, (w - 1) * sw - left - right + kw + pw]


def _dense_shape(workload: Workload) -> list[int]:
    return list(workload["data"][:-1]) + [workload["weight"][0]]


def _conv_flops(workload: Workload) -> int:
    n, o, oh, ow = _conv_shape(workload)
    _, cg, kh, kw = workload["kernel"]
    result: int = 2 * n * o * oh * ow * cg * kh * kw
    return result


def _transpose_flops(workload: Workload) -> int:  # every input pixel meets every kernel tap once
    n, _, h, w = workload["data"]
    result: int = 2 * n * h * w * math.prod(workload["kernel"])
    return result


def _dense_flops(workload: Workload) -> int:
    m, k = workload["weight"]
    result: int = 2 * math.prod(workload["data"][:-1]) * k * m
    return result


@dataclass(frozen=True)
class _Schema:
    """Fields, validation, output shape and flops of one op's workloads."""

    fields: tuple[str, ...]
    check: Callable[[Workload, Op, str], None]
    output_shape: Callable[[Workload], list[int]] | None = None
    flops: Callable[[Workload], int] | None = None
    dtypes: tuple[str, ...] = DTYPES
    optional: tuple[str, ...] = ()


_CONV = _Schema(_CONV_FIELDS, _check_conv, _conv_shape, _conv_flops)
_INT8 = _Schema(_CONV_FIELDS + ("out_dtype",), _check_int8, _conv_shape, _conv_flops, INT8_DTYPES)
_SCHEMAS = {
    Op.CONV2D: _CONV,
    Op.DEPTHWISE_CONV2D: _CONV,
    Op.GROUP_CONV2D: _CONV,
    Op.CONV2D_TRANSPOSE: _Schema(
        ("data", "kernel", "strides", "padding", "output_padding", "dilation", "groups", "dtype"),
        _check_transpose, _transpose_shape, _transpose_flops),
    Op.DENSE: _Schema(_DENSE_FIELDS, _check_dense, _dense_shape, _dense_flops),
    Op.CONV2D_INT8: replace(_INT8, optional=(WEIGHT_PAIR_MAX,)),
    Op.DEPTHWISE_CONV2D_INT8: _INT8,  # no dot product: no pair bound
    Op.GROUP_CONV2D_INT8: _INT8,  # its blocks' pairs may straddle two groups: no pair bound
    Op.DENSE_INT8: _Schema(_DENSE_FIELDS + ("out_dtype",), _check_dense_int8, _dense_shape, _dense_flops,
                           INT8_DTYPES, (WEIGHT_PAIR_MAX,)),
    Op.CONV2D_BF16: _Schema(_CONV_FIELDS, _check_bf16, _conv_shape, _conv_flops, BF16_DTYPES,
                            (MODEL_CHANNELS,)),
    Op.DENSE_BF16: _Schema(_DENSE_FIELDS, _check_dense_bf16, _dense_shape, _dense_flops, BF16_DTYPES),
    Op.DEPTHWISE_CONV2D_BF16: _Schema(_CONV_FIELDS, _check_depthwise_bf16, _conv_shape, _conv_flops,
                                      BF16_DTYPES),
    Op.GROUP_CONV2D_BF16: _Schema(_CONV_FIELDS, _check_group_bf16, _conv_shape, _conv_flops, BF16_DTYPES),
    Op.TRANSFORM: _Schema(("shape", "src", "dst", "dtype"), _check_transform, dtypes=DTYPES + INT8_DTYPES),
    Op.OP_GROUP: _Schema(("ops", "args", "sha"), _check_op_group),
    Op.IN_MODEL: _Schema(("model", "node", "in_layout", "out_layout", "shape", "protocol"),
                         _check_in_model, dtypes=DTYPES + INT8_DTYPES, optional=("dtype",)),
}

WORKLOAD_FIELDS = {op: schema.fields for op, schema in _SCHEMAS.items()}
"""The required fields of a workload, per op (layout ops, transform and op-group tasks)."""


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


def _conv_kind(workload: Workload) -> Op:
    return conv_op(workload["groups"], workload["data"][1], workload["kernel"][0])


def op_of(workload: Workload) -> Op:
    """The op of a valid kernel workload, inferred from its fields (the only place that does).

    ``dense`` has a ``weight`` (``dense_int8`` a ``weight`` and an ``out_dtype``),
    ``conv2d_transpose`` an ``output_padding``, int8 convs an ``out_dtype``, bfloat16 convs the
    ``dtype`` bfloat16; convs are ``depthwise_conv2d`` (``groups == C == O``), ``group_conv2d``
    (other ``groups > 1``) or ``conv2d``, in the precision their fields say.

    Raises
    ------
    ModelError
        If the workload is malformed or its op is not supported.

    Examples
    --------
    >>> str(op_of(conv2d_workload([1, 32, 8, 8], [32, 1, 3, 3], groups=32, padding=[1, 1, 1, 1])))
    'depthwise_conv2d'
    >>> str(op_of({"data": [1, 64], "weight": [10, 64], "dtype": "uint8", "out_dtype": "float32"}))
    'dense_int8'
    """
    if not isinstance(workload, dict):
        raise ModelError(f"workload must be a dict, got {type(workload).__name__}")
    if "output_padding" in workload:
        op = Op.CONV2D_TRANSPOSE
    elif "weight" in workload:
        op = Op.DENSE_INT8 if "out_dtype" in workload else (
            Op.DENSE_BF16 if workload.get("dtype") in BF16_DTYPES else Op.DENSE)
    elif "out_dtype" in workload:
        _check_fields(workload, Op.CONV2D_INT8, "workload")
        _check_conv(workload, None, "workload")
        op = _int8_kind(workload)
    elif workload.get("dtype") in BF16_DTYPES:
        _check_fields(workload, Op.CONV2D_BF16, "workload")
        op = _BF16_OF[_conv_kind(workload)]
    else:
        _check_fields(workload, Op.CONV2D, "workload")
        _check_conv(workload, None, "workload")
        op = _conv_kind(workload)
    check_workload(workload, op)
    return op


def check_workload(workload: Workload, op: Op | str | None = None, where: str = "workload") -> Workload:
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


def output_shape(workload: Workload, op: Op | str | None = None) -> list[int]:
    """Logical output shape: ``[N, O, OH, OW]`` for convs, ``[..., M]`` for dense.

    Examples
    --------
    >>> output_shape(conv2d_workload([1, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3]))
    [1, 64, 112, 112]
    """
    shape = _schema(op_of(workload) if op is None else op).output_shape
    if shape is None:
        raise TypeError("'NoneType' object is not callable")  # a task kind without an output shape
    return shape(workload)


def flops(workload: Workload, op: Op | str | None = None) -> int:
    """Floating-point operations (multiply + add = 2) of one run of the workload.

    Examples
    --------
    >>> flops(dense_workload([1, 4], [3, 4]))
    24
    """
    count = _schema(op_of(workload) if op is None else op).flops
    if count is None:
        raise TypeError("'NoneType' object is not callable")  # a task kind without flops
    return count(workload)


# ------------------------------------------------------------------ builders
def conv2d_workload(
    data: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0, 0, 0),
    dilation: Sequence[int] = (1, 1),
    groups: int = 1,
    dtype: str = "float32",
) -> Workload:
    """Build a (depthwise / group) conv2d workload dict with lists, not tuples.

    Examples
    --------
    >>> conv2d_workload([1, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3])["strides"]
    [2, 2]
    """
    workload: Workload = {
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
    data: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0, 0, 0),
    output_padding: Sequence[int] = (0, 0),
    dtype: str = "float32",
) -> Workload:
    """Build a transposed conv2d workload (kernel ``[C, O, KH, KW]``, groups 1, dilation 1).

    Examples
    --------
    >>> wl = conv2d_transpose_workload([1, 64, 28, 28], [64, 32, 2, 2], [2, 2])
    >>> str(op_of(wl)), output_shape(wl)
    ('conv2d_transpose', [1, 32, 56, 56])
    """
    workload: Workload = {
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


def dense_workload(data: Sequence[int], weight: Sequence[int], dtype: str = "float32") -> Workload:
    """Build a dense workload dict (``y = x @ W.T``).

    Examples
    --------
    >>> dense_workload([1, 2048], [1000, 2048])
    {'data': [1, 2048], 'weight': [1000, 2048], 'dtype': 'float32'}
    """
    workload: Workload = {"data": [int(x) for x in data], "weight": [int(x) for x in weight], "dtype": dtype}
    return check_workload(workload, Op.DENSE)


PRECISION = "precision"
"""Knob of a candidate that runs its node in another precision (:func:`runs_as`): a quantized
node's ``"float32"``, a conv2d's, depthwise conv2d's or one-row dense's ``"bfloat16"``."""


def input_dtype(op: Op | str, knobs: Mapping[str, Any]) -> str:
    """The dtype a node's candidate reads its activation in, so what a layout transform before it
    moves: ``"uint8"`` for a quantized op's (:data:`INT8_OPS`) candidate running int8 (the
    model's stored uint8 tensor, one byte per value), ``"float32"`` for every other candidate
    (a quantized op's fp32 one, :func:`runs_as`, reads the dequantized tensor; a bfloat16 one,
    :data:`BF16_OPS`, converts the float32 tensor where it reads it, in its own layout).

    Examples
    --------
    >>> input_dtype(Op.CONV2D_INT8, {"ic_bn": 16}), input_dtype("conv2d_int8", {"precision": "float32"})
    ('uint8', 'float32')
    >>> input_dtype(Op.CONV2D, {"ic_bn": 16})
    'float32'
    """
    return "uint8" if as_op(op) in INT8_OPS and knobs.get(PRECISION) is None else "float32"


_BF16_OF = {Op.CONV2D: Op.CONV2D_BF16, Op.DEPTHWISE_CONV2D: Op.DEPTHWISE_CONV2D_BF16,
            Op.GROUP_CONV2D: Op.GROUP_CONV2D_BF16, Op.DENSE: Op.DENSE_BF16}


def _bf16_workload(op: Op, workload: Workload) -> Workload:
    """The bfloat16 kernel's workload of a conv2d, depthwise or dense node: ``dtype`` bfloat16; a
    conv2d with an odd number of input channels (the RGB stem) gets a zero one
    (:data:`MODEL_CHANNELS`)."""
    low = {**workload, "dtype": "bfloat16"}
    if op is Op.CONV2D and workload["data"][1] % 2:
        (n, c, h, w), (o, _, kh, kw) = workload["data"], workload["kernel"]
        low.update(data=[n, c + 1, h, w], kernel=[o, c + 1, kh, kw], **{MODEL_CHANNELS: c})
    return low


def runs_as(op: Op | str, workload: Workload, knobs: dict[str, Any]) -> tuple[Op, Workload, dict[str, Any]]:
    """The kernel a node's candidate runs: ``(op, workload, knobs)``.

    A quantized node (:data:`INT8_OPS`) may run in fp32 where that is measured faster: its
    candidate's knobs then hold ``"precision": "float32"`` beside the fp32 op's knobs, and it
    runs the fp32 op of the same shapes (the workload without ``out_dtype``, ``dtype``
    float32: ``conv2d``, ``depthwise_conv2d`` or ``dense``) on the model's dequantized operands
    (what ONNX Runtime's QDQ reference computes). A conv2d, depthwise_conv2d, group_conv2d or batch-1 dense
    node tuned with bfloat16 allowed (``graphtune.tune(..., precision="bfloat16")``) may run in
    bfloat16: ``"precision": "bfloat16"`` beside the knobs of its bfloat16 kernel
    (:data:`BF16_OPS`), whose workload is the node's with ``dtype`` bfloat16 (a conv2d with an
    odd number of input channels, the RGB stem, gets a zero one: :data:`MODEL_CHANNELS`; its
    candidate reads the data in plain ``NCHW``). Every other candidate runs its node's own op.

    Raises
    ------
    KnobError
        A ``precision`` the node cannot run in.

    Examples
    --------
    >>> wl = conv2d_int8_workload([1, 64, 8, 8], [64, 64, 3, 3], padding=[1, 1, 1, 1])
    >>> op, fp32, knobs = runs_as(Op.CONV2D_INT8, wl, {"precision": "float32", "ic_bn": 16})
    >>> str(op), fp32["dtype"], "out_dtype" in fp32, knobs
    ('conv2d', 'float32', False, {'ic_bn': 16})
    >>> runs_as(Op.DENSE_INT8, dense_int8_workload([1, 64], [10, 64]), {"precision": "float32"})[:2]
    ('dense', {'data': [1, 64], 'weight': [10, 64], 'dtype': 'float32'})
    >>> str(runs_as(Op.CONV2D, fp32, {"precision": "bfloat16", "ic_bn": 16})[0])
    'conv2d_bf16'
    >>> dw = conv2d_workload([1, 32, 8, 8], [32, 1, 3, 3], groups=32)
    >>> str(runs_as(Op.DEPTHWISE_CONV2D, dw, {"precision": "bfloat16", "bn": 16, "reg_n": 6})[0])
    'depthwise_conv2d_bf16'
    >>> stem = runs_as(Op.CONV2D, conv2d_workload([1, 3, 8, 8], [8, 3, 3, 3]), {"precision": "bfloat16"})[1]
    >>> stem["data"], stem["model_channels"]
    ([1, 4, 8, 8], 3)
    >>> try:
    ...     runs_as(Op.CONV2D, fp32, {"precision": "float32"})
    ... except KnobError as err:
    ...     print(str(err).split(" (")[0])
    conv2d knob 'precision' = 'float32': a conv2d runs in float32 without the knob
    """
    op = as_op(op)
    precision = knobs.get(PRECISION)
    if precision is None:
        return op, workload, knobs
    rest = {k: v for k, v in knobs.items() if k != PRECISION}
    if op in _BF16_OF:
        if precision != "bfloat16":
            raise KnobError(f"{op} knob {PRECISION!r} = {precision!r}: a {op} runs in float32 without "
                            "the knob (remove it), or in 'bfloat16'")
        return _BF16_OF[op], _bf16_workload(op, workload), rest
    if op not in INT8_OPS:
        raise KnobError(f"{op} knob {PRECISION!r} = {precision!r}: only quantized ops "
                        f"({', '.join(INT8_OPS)}), float convs and dense choose a precision; "
                        "remove the knob")
    if precision != "float32":
        raise KnobError(f"{op} knob {PRECISION!r} = {precision!r}: expected 'float32' (the fp32 "
                        "op on the dequantized operands), or no such knob (int8)")
    int8_only = ("out_dtype", WEIGHT_PAIR_MAX)
    fp32 = {**{k: v for k, v in workload.items() if k not in int8_only}, "dtype": "float32"}
    return op_of(fp32), fp32, rest


def timed_as(op: Op | str, workload: Workload, knobs: dict[str, Any]) -> tuple[Op, Workload, dict[str, Any]]:
    """The kernel a node's candidate is *timed* as: :func:`runs_as`'s, but an int8 kernel writes
    its output requantized to uint8 (``out_dtype`` ``"uint8"``) whatever its node's workload says.

    A quantized node of a QDQ model nearly always stores its output as uint8 (the epilogue the
    model fuses into it ends with a ``QuantizeLinear``). Timed writing float32, four bytes per
    value, a kernel on a large map is bound by that traffic, and the ranking it gives is not the
    model's: a 1x1 conv of 256 -> 64 channels on a 128x128 map ran 0.51 ms on AMX tiles and 1.01
    ms on VNNI writing uint8, but 2.8 against 1.7 ms writing float32 (``docs/int8.md``).
    Op groups are priced against a bare twin timed the same way, so a node whose output the
    model keeps in float32 pays the difference in its op group.

    Examples
    --------
    >>> wl = conv2d_int8_workload([1, 64, 8, 8], [64, 64, 1, 1], out_dtype="float32")
    >>> timed_as(Op.CONV2D_INT8, wl, {"ic_bn": 16})[1]["out_dtype"]
    'uint8'
    >>> timed_as(Op.CONV2D_INT8, wl, {"precision": "float32", "ic_bn": 16})[1]["dtype"]
    'float32'
    """
    kind, timed, rest = runs_as(op, workload, knobs)
    if kind in INT8_OPS:
        timed = {**timed, "out_dtype": "uint8"}
    return kind, timed, rest


def conv2d_int8_workload(
    data: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0, 0, 0),
    dilation: Sequence[int] = (1, 1),
    out_dtype: str = "uint8",
    groups: int = 1,
    weight_pair_max: int | None = None,
) -> Workload:
    """Build a conv2d_int8 (with ``groups`` = channels depthwise_conv2d_int8, with other
    ``groups > 1`` group_conv2d_int8) workload: uint8
    activations, int8 weights, ``out_dtype`` output, and the weights' :data:`WEIGHT_PAIR_MAX`
    if known (conv2d_int8 only).

    Examples
    --------
    >>> wl = conv2d_int8_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
    >>> str(op_of(wl)), wl["dtype"], wl["out_dtype"], output_shape(wl)
    ('conv2d_int8', 'uint8', 'uint8', [1, 64, 56, 56])
    >>> conv2d_int8_workload([1, 8, 4, 4], [8, 8, 1, 1], weight_pair_max=128)["weight_pair_max"]
    128
    """
    workload: Workload = {**conv2d_workload(data, kernel, strides, padding, dilation, groups),
                          "dtype": "uint8", "out_dtype": out_dtype, **_pair_field(weight_pair_max)}
    op_of(workload)
    return workload


def _pair_field(weight_pair_max: int | None) -> Workload:
    return {} if weight_pair_max is None else {WEIGHT_PAIR_MAX: weight_pair_max}


def dense_int8_workload(data: Sequence[int], weight: Sequence[int], out_dtype: str = "uint8",
                        weight_pair_max: int | None = None) -> Workload:
    """Build a dense_int8 workload: one uint8 row ``[1, K]`` by int8 weights ``[M, K]``,
    ``out_dtype`` output, the weights' :data:`WEIGHT_PAIR_MAX` if known.

    Examples
    --------
    >>> wl = dense_int8_workload([1, 2048], [1000, 2048], out_dtype="float32")
    >>> str(op_of(wl)), output_shape(wl), flops(wl) == flops(dense_workload([1, 2048], [1000, 2048]))
    ('dense_int8', [1, 1000], True)
    """
    workload: Workload = {**dense_workload(data, weight), "dtype": "uint8", "out_dtype": out_dtype,
                          **_pair_field(weight_pair_max)}
    return check_workload(workload, Op.DENSE_INT8)


# ------------------------------------------------------------ classes of ops
FAMILIES = ("conv2d", "depthwise", "group_conv", "conv_transpose", "dense", "transform",
            "elementwise", "pool", "concat", "reduction", "resize", "reshape", "other")
"""What a profile totals its calls by (:data:`graphtune.profiling.KINDS`), in display order."""

LAYOUT_TRANSFORM = "layout_transform"
"""The op kind of a compiled layout transform (its ``graphtune.op`` attribute)."""


@dataclass(frozen=True)
class OpClass:
    """How graphtune counts one op kind.

    Attributes
    ----------
    family : str
        One of :data:`FAMILIES`.
    compute_bound : bool
        Arithmetic, not where its data sits, sets its time: the timing protocols give
        every other op a polluted cache (:func:`graphtune.measure.timing.memory_bound`).
    view : bool
        It computes nothing: a new shape of its input. A compiled function of layout
        transforms and views is a transform, priced by the layout graph's edges
        (:mod:`graphtune.opgroups.pricing`).

    Examples
    --------
    >>> op_class("conv2d").compute_bound, op_class("reshape").view, op_class("erf").family
    (True, True, 'elementwise')
    """

    family: str
    compute_bound: bool = False
    view: bool = False


_ELEMENTWISE = OpClass("elementwise")
_REDUCTION = OpClass("reduction")
_POOL = OpClass("pool")
_VIEW = OpClass("reshape", view=True)
_OTHER = OpClass("other")

OP_CLASSES: dict[str, OpClass] = {
    Op.CONV2D: OpClass("conv2d", compute_bound=True),
    Op.DEPTHWISE_CONV2D: OpClass("depthwise"),
    Op.GROUP_CONV2D: OpClass("group_conv", compute_bound=True),
    Op.CONV2D_TRANSPOSE: OpClass("conv_transpose", compute_bound=True),
    Op.DENSE: OpClass("dense", compute_bound=True),
    Op.CONV2D_INT8: OpClass("conv2d", compute_bound=True),
    Op.DEPTHWISE_CONV2D_INT8: OpClass("depthwise"),
    Op.GROUP_CONV2D_INT8: OpClass("group_conv", compute_bound=True),
    Op.DENSE_INT8: OpClass("dense", compute_bound=True),
    Op.CONV2D_BF16: OpClass("conv2d", compute_bound=True),
    Op.DENSE_BF16: OpClass("dense", compute_bound=True),
    Op.DEPTHWISE_CONV2D_BF16: OpClass("depthwise"),
    Op.GROUP_CONV2D_BF16: OpClass("group_conv", compute_bound=True),
    Op.TRANSFORM: OpClass("transform"),
    LAYOUT_TRANSFORM: OpClass("transform"),
    **dict.fromkeys(("reshape", "squeeze", "expand_dims"), _VIEW),
    "transpose": OpClass("reshape"),
    **dict.fromkeys(("mean", "sum", "max", "softmax"), _REDUCTION),
    **dict.fromkeys(("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "roi_align"), _POOL),
    "concatenate": OpClass("concat"),
    "resize2d": OpClass("resize"),
    **dict.fromkeys(("add", "subtract", "multiply", "divide", "sigmoid", "relu", "clip",
                     "maximum", "minimum", "tanh", "erf", "gelu", "exp", "sqrt", "power",
                     "tir_sigmoid", "int8_quantize", "bfloat16_rounding",
                     "bfloat16_widening", "lookup"), _ELEMENTWISE),
}
"""The class of every op kind graphtune tells apart: its own ops (kernels, tasks) and the op
kinds of a compiled model's functions (TVM's op names, :data:`LAYOUT_TRANSFORM`)."""


def op_class(op: str) -> OpClass:
    """The :class:`OpClass` of ``op`` (family ``other``, memory-bound, for op kinds not in
    :data:`OP_CLASSES`).

    Examples
    --------
    >>> op_class(Op.DEPTHWISE_CONV2D).family, op_class("nms").family
    ('depthwise', 'other')
    """
    return OP_CLASSES.get(op, _OTHER)
