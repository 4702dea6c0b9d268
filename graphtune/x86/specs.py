"""One :class:`OpSpec` per op kind: everything graphtune.x86 knows about running that op.

An op's spec gathers its TE compute and parameter shapes, its knob space
(names and rules), the activation layouts its knobs imply, its candidate
channel blocks and register tiles, its default blocks, its weight packing,
the anchor block its compute creates and its schedule. :data:`SPECS` holds
them by :class:`~graphtune.ops.Op`; the op-generic functions of
graphtune.x86 (:func:`check_knobs`, :func:`layouts_of`,
:func:`~graphtune.x86.candidates`, :func:`~graphtune.x86.kernel_func`,
:func:`~graphtune.x86.schedule_fused`) look the op up here instead of
branching on it. A new op kind is one more entry.

Examples
--------
>>> from graphtune.ops import Op, conv2d_workload
>>> spec = spec_of("depthwise_conv2d")
>>> spec.knobs.required, spec.params
(('bn', 'reg_n'), ('data', 'kernel'))
>>> wl = conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
>>> layouts_of(wl, {"ic_bn": 8, "oc_bn": 16, "reg_n": 14, "unroll_kw": True}, op=Op.CONV2D)
('NCHW8c', 'NCHW16c')
>>> spec_of("pool")
Traceback (most recent call last):
...
ValueError: unknown op 'pool' for graphtune.x86;
    known: conv2d, depthwise_conv2d, group_conv2d, conv2d_transpose, dense, conv2d_int8,
    depthwise_conv2d_int8, group_conv2d_int8, conv2d_bf16, group_conv2d_bf16, dense_bf16,
    depthwise_conv2d_bf16, dense_int8
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import numpy as np

from ..layouts import DENSE, PLAIN, data_layout, kernel_layout
from ..ops import MODEL_CHANNELS, Op, as_op, check_workload, op_of, output_shape, runs_as
from . import bf16, tiles
from .conv2d import conv2d_nchwc, conv2d_nchwc_shapes
from .conv2d_int8 import computed_width, conv2d_bf16, conv2d_int8_nchwc, conv2d_int8_shapes
from .conv2d_transpose import (
    conv2d_transpose_nchwc,
    conv2d_transpose_nchwc_shapes,
    pack_conv2d_transpose_kernel,
    taps,
)
from .dense import dense_packed, dense_packed_shapes
from .dense_int8 import as_conv2d_int8, conv_knobs, dense_bf16, dense_int8_nc, dense_int8_shapes
from .depthwise import depthwise_conv2d_bf16, depthwise_conv2d_nchwc, depthwise_nchwc_shapes
from .depthwise_int8 import depthwise_conv2d_int8_nchwc, depthwise_int8_shapes
from .group_conv import (
    group_conv2d_nchwc,
    group_conv_nchwc_shapes,
    pack_group_kernel,
    pack_shuffled_group_kernel,
    spanned_kernel,
)
from .groups import group_sizes, span
from .int8_packing import pack_int8_kernel
from .int8_schedule import fold_flat, fold_nc, schedule_conv2d_int8
from .int8_tiles import (
    dense_int8_blocks,
    dense_int8_default,
    dense_int8_tiles,
    group_int8_blocks,
    group_int8_default,
    int8_blocks,
    int8_default,
    int8_order,
    int8_tiles,
)
from .knobs import (
    BF16_KNOBS,
    BLOCKED_DEPTHWISE_KNOBS,
    CONV_KNOBS,
    DENSE_BF16_KNOBS,
    DENSE_INT8_KNOBS,
    DENSE_KNOBS,
    DEPTHWISE_KNOBS,
    GROUP_KNOBS,
    INT8_KNOBS,
    KnobSpace,
)
from .packing import pack_conv_kernel, pack_dense_weight, pack_depthwise_kernel
from .schedule import _fold_epilogue, fold_conv2d, schedule_conv2d, schedule_dense, schedule_depthwise
from .winograd import pack_winograd_kernel, winograd_tiles

__all__ = ["OpSpec", "SPECS", "KNOBS", "spec_of", "spec_for", "check_knobs", "layouts_of", "pack_weight"]


@dataclass(frozen=True)
class OpSpec:
    """How graphtune.x86 runs one op kind.

    Attributes
    ----------
    op : Op
    knobs : KnobSpace
        Knob names and the rules they obey.
    layouts : callable
        ``(workload, knobs) -> (in_layout, out_layout)`` of the activation.
    shapes : callable
        ``(workload, knobs) -> (data shape, weight shape, output shape)`` of the kernel.
    compute : callable
        ``(data, weight, workload, knobs) -> te.Tensor``, the blocked TE compute.
    params : tuple of str
        Names of the kernel's two inputs.
    pack : callable
        ``(weight, workload, knobs) -> (packed array, kernel layout name or None)``: the
        model's weight (OIHW; IOHW for conv2d_transpose; ``[M, K]`` for dense) as the
        compute reads it. The name is None where Relax has no layout for the packing.
    anchor : callable
        ``(workload, knobs) -> (spatial extents, reduction extents)`` of the compute's
        reduction block (how :func:`~graphtune.x86.schedule_fused` finds it).
    schedule : callable
        ``(sch, anchor, epilogue, knobs, lanes)``: the knob schedule (:mod:`graphtune.x86.schedule`;
        ``lanes``: the floats of one vector register of the target).
    blocks : callable
        ``(workload, max_block, target) -> [(tier, blocks), ...]``: channel-block choices.
    tiles : callable
        ``(workload, blocks, target) -> [knobs, ...]``: full knobs with those blocks, best first.
    default_blocks : callable
        ``(workload, block, target) -> blocks`` nearest to a wanted channel block.
    keeps_padding : callable
        ``knobs -> bool``: whether the schedule places the padding block itself (the
        width-vectorised depthwise conv copies the rows a tile reads; a Winograd conv's
        input transform) instead of :func:`~graphtune.x86.schedule_fused` inlining it
        into the anchor's loads.
    fold : callable
        ``(sch, anchor, knobs) -> block or None``: fold the elementwise epilogue and return
        the block writing the output (:func:`~graphtune.x86.schedule._fold_epilogue`: the
        anchor's register tile; a Winograd conv: its output transform).
    order : callable
        ``(ranked, workload, target) -> knobs list``: the candidates ranked by block tier and
        tile rank (:func:`~graphtune.x86.candidates`), reordered for the op (the int8 conv2d:
        turns among register-tile shapes, :func:`~graphtune.x86.int8_tiles.int8_order`; the
        conv2d: a Winograd tile second, :func:`~graphtune.x86.tiles.conv_order`);
        default: as ranked.
    """

    op: Op
    knobs: KnobSpace
    layouts: Callable[[dict, dict], tuple]
    shapes: Callable[[dict, dict], tuple]
    compute: Callable[..., Any]
    params: tuple
    pack: Callable[[np.ndarray, dict, dict], tuple]
    anchor: Callable[[dict, dict], tuple]
    schedule: Callable[..., None]
    blocks: Callable[[dict, int, Any], list]
    tiles: Callable[[dict, dict, Any], list]
    default_blocks: Callable[[dict, int, Any], dict]
    keeps_padding: Callable[[dict], bool] = lambda knobs: False
    fold: Callable[..., Any] = lambda sch, anchor, knobs: _fold_epilogue(sch, anchor)
    order: Callable[[list, dict, Any], list] = lambda ranked, workload, target: ranked


# ------------------------------------------------------------------ layouts
def _blocked_layouts(workload: dict, knobs: dict) -> tuple:
    return data_layout(knobs["ic_bn"]), data_layout(knobs["oc_bn"])


def _bf16_layouts(workload: dict, knobs: dict) -> tuple:  # a padded stem reads plain NCHW (and pads it)
    return PLAIN if MODEL_CHANNELS in workload else data_layout(knobs["ic_bn"]), data_layout(knobs["oc_bn"])


def _depthwise_layouts(workload: dict, knobs: dict) -> tuple:
    return data_layout(knobs["bn"]), data_layout(knobs["bn"])


def _dense_layouts(workload: dict, knobs: dict) -> tuple:
    return (DENSE, DENSE) if len(workload["data"]) == 2 else (PLAIN, PLAIN)


# ------------------------------------------------------------------ packing
def _pack_conv(weight: np.ndarray, workload: dict, knobs: dict) -> tuple:
    if "winograd" in knobs:
        return pack_winograd_kernel(weight, knobs["winograd"], knobs["ic_bn"], knobs["oc_bn"]), None
    ic_bn, oc_bn = knobs["ic_bn"], knobs["oc_bn"]
    return pack_conv_kernel(weight, ic_bn, oc_bn), kernel_layout(ic_bn, oc_bn)


def _pack_group(weight: np.ndarray, workload: dict, knobs: dict) -> tuple:
    if knobs.get("shuffle"):  # typed as a kernel of cg-input blocks (one per group)
        cg = group_sizes(workload)[0]
        return pack_shuffled_group_kernel(weight, knobs["oc_bn"]), kernel_layout(cg, knobs["oc_bn"])
    packed = pack_group_kernel(weight, workload["groups"], knobs["ic_bn"], knobs["oc_bn"])
    return packed, kernel_layout(knobs["ic_bn"], knobs["oc_bn"])


def _pack_depthwise(weight: np.ndarray, workload: dict, knobs: dict) -> tuple:
    return pack_depthwise_kernel(weight, knobs["bn"]), kernel_layout(1, knobs["bn"])


def _pack_transpose(weight: np.ndarray, workload: dict, knobs: dict) -> tuple:
    return pack_conv2d_transpose_kernel(weight, knobs["ic_bn"], knobs["oc_bn"], workload["strides"]), None


def _pack_dense(weight: np.ndarray, workload: dict, knobs: dict) -> tuple:
    return pack_dense_weight(weight, knobs["oc_bn"]), None


def _pack_int8(weight: np.ndarray, workload: dict, knobs: dict) -> tuple:
    return pack_int8_kernel(weight, knobs["ic_bn"], knobs["oc_bn"], knobs["isa"]), None


def _pack_bf16(weight: np.ndarray, workload: dict, knobs: dict) -> tuple:  # a padded stem: a zero channel
    missing = workload["kernel"][1] - weight.shape[1]
    return _pack_int8(np.pad(weight, ((0, 0), (0, missing), (0, 0), (0, 0))), workload, knobs)


def _pack_group_int8(weight: np.ndarray, workload: dict, knobs: dict) -> tuple:  # bfloat16 too: isa's type
    return _pack_int8(spanned_kernel(weight, workload["groups"], knobs["oc_bn"]), workload, knobs)


def _pack_dense_int8(weight: np.ndarray, workload: dict, knobs: dict) -> tuple:  # [M, K]: [M, K, 1, 1]
    conv, conv_knobs = as_conv2d_int8(workload, knobs)
    return _pack_int8(weight.reshape(conv["kernel"]), conv, conv_knobs)


def _pack_depthwise_bf16(weight: np.ndarray, workload: dict, knobs: dict) -> tuple:
    return bf16.np_from_float32(pack_depthwise_kernel(weight, knobs["bn"])), kernel_layout(1, knobs["bn"])


def _pack_depthwise_int8(weight: np.ndarray, workload: dict, knobs: dict) -> tuple:
    return pack_depthwise_kernel(weight.astype(np.int8), knobs["bn"]), kernel_layout(1, knobs["bn"])


# ------------------------------------------------------------------- anchors
def _nchwc_anchor(op: Op, workload: dict, knobs: dict, reduced: int, kh: int, kw: int) -> tuple:
    n, o, oh, ow = output_shape(workload, op)
    ib, ob = knobs["ic_bn"], knobs["oc_bn"]
    return [n, o // ob, oh, ow, ob], [reduced // ib, kh, kw, ib]


def _conv_anchor(workload: dict, knobs: dict) -> tuple:
    if "winograd" in knobs:  # the products, per transform position and tile
        a, ib, ob = knobs["winograd"] + 2, knobs["ic_bn"], knobs["oc_bn"]
        tiles = winograd_tiles(workload, knobs["winograd"])
        return ([a, a, output_shape(workload, Op.CONV2D)[1] // ob, tiles, ob],
                [workload["data"][1] // ib, ib])
    return _nchwc_anchor(Op.CONV2D, workload, knobs, workload["data"][1], *workload["kernel"][2:])


def _int8_anchor(workload: dict, knobs: dict) -> tuple:  # the input block as (outer, inner) channels
    (n, oc, oh, _, ob), (chunks, kh, kw, ib) = _conv_anchor(workload, {"ic_bn": knobs["ic_bn"],
                                                                     "oc_bn": knobs["oc_bn"]})
    dot = conv2d_int8_shapes(workload, knobs)[1][6]
    rows = 1 if knobs.get("flat") else oh  # a flat conv's map is one row (x86.conv2d_int8.flat_row)
    return [n, oc, rows, computed_width(workload, knobs), ob], [chunks, kh, kw, ib // dot, dot]


def _group_int8_anchor(workload: dict, knobs: dict) -> tuple:  # over its groups' inputs
    spatial, (_, kh, kw, ib, dot) = _int8_anchor(workload, knobs)
    return spatial, [span(workload, knobs["oc_bn"]) // knobs["ic_bn"], kh, kw, ib, dot]


def _dense_int8_anchor(workload: dict, knobs: dict) -> tuple:
    return _int8_anchor(*as_conv2d_int8(workload, knobs))


def _group_anchor(workload: dict, knobs: dict) -> tuple:  # an output block reads its groups' inputs
    if knobs.get("shuffle"):  # each lane its own group's inputs: one chunk of cg
        _, cg, kh, kw = workload["kernel"]
        return _nchwc_anchor(Op.GROUP_CONV2D, workload, knobs, knobs["ic_bn"], kh, kw)[0], [1, kh, kw, cg]
    return _nchwc_anchor(Op.GROUP_CONV2D, workload, knobs, span(workload, knobs["oc_bn"]),
                         *workload["kernel"][2:])


def _transpose_anchor(workload: dict, knobs: dict) -> tuple:  # over the taps of one output phase
    return _nchwc_anchor(Op.CONV2D_TRANSPOSE, workload, knobs, workload["data"][1], *taps(workload))


def _depthwise_anchor(workload: dict, knobs: dict) -> tuple:
    n, o, oh, ow = output_shape(workload, Op.DEPTHWISE_CONV2D)
    bn = knobs["bn"]
    return [n, o // bn, oh, ow, bn], list(workload["kernel"][2:])


def _dense_anchor(workload: dict, knobs: dict) -> tuple:
    return output_shape(workload, Op.DENSE), [workload["data"][-1]]


def _schedule_dense_int8(sch: Any, anchor: Any, epilogue: Any, knobs: dict, lanes: int) -> None:
    """The int8 / bfloat16 dense schedule: the conv2d_int8 one with the dense's knobs as a conv's."""
    schedule_conv2d_int8(sch, anchor, epilogue, conv_knobs(knobs), lanes)


SPECS = {
    Op.CONV2D: OpSpec(
        Op.CONV2D, CONV_KNOBS, _blocked_layouts, conv2d_nchwc_shapes, conv2d_nchwc, ("data", "kernel"),
        _pack_conv, _conv_anchor, schedule_conv2d, tiles.conv_blocks, tiles.conv_tiles, tiles.conv_default,
        keeps_padding=lambda knobs: "winograd" in knobs, fold=fold_conv2d, order=tiles.conv_order),
    Op.DEPTHWISE_CONV2D: OpSpec(
        Op.DEPTHWISE_CONV2D, DEPTHWISE_KNOBS, _depthwise_layouts, depthwise_nchwc_shapes,
        depthwise_conv2d_nchwc, ("data", "kernel"), _pack_depthwise, _depthwise_anchor, schedule_depthwise,
        tiles.depthwise_blocks, tiles.depthwise_tiles, tiles.depthwise_default,
        keeps_padding=lambda knobs: "c_tile" in knobs),
    Op.GROUP_CONV2D: OpSpec(
        Op.GROUP_CONV2D, GROUP_KNOBS, _blocked_layouts, group_conv_nchwc_shapes, group_conv2d_nchwc,
        ("data", "kernel"), _pack_group, _group_anchor, schedule_conv2d, tiles.group_blocks,
        tiles.group_tiles, tiles.group_default),
    Op.CONV2D_TRANSPOSE: OpSpec(
        Op.CONV2D_TRANSPOSE, CONV_KNOBS, _blocked_layouts, conv2d_transpose_nchwc_shapes,
        conv2d_transpose_nchwc, ("data", "kernel"), _pack_transpose, _transpose_anchor, schedule_conv2d,
        partial(tiles.conv_blocks, op=Op.CONV2D_TRANSPOSE), tiles.transpose_tiles,
        partial(tiles.conv_default, op=Op.CONV2D_TRANSPOSE)),
    Op.DENSE: OpSpec(
        Op.DENSE, DENSE_KNOBS, _dense_layouts, dense_packed_shapes, dense_packed, ("data", "weight"),
        _pack_dense, _dense_anchor, schedule_dense, tiles.dense_blocks, tiles.dense_tiles,
        tiles.dense_default),
    Op.CONV2D_INT8: OpSpec(
        Op.CONV2D_INT8, INT8_KNOBS, _blocked_layouts, conv2d_int8_shapes, conv2d_int8_nchwc,
        ("data", "kernel"), _pack_int8, _int8_anchor, schedule_conv2d_int8, int8_blocks, int8_tiles,
        int8_default, keeps_padding=lambda knobs: True, order=int8_order),
    Op.DEPTHWISE_CONV2D_INT8: OpSpec(
        Op.DEPTHWISE_CONV2D_INT8, BLOCKED_DEPTHWISE_KNOBS, _depthwise_layouts, depthwise_int8_shapes,
        depthwise_conv2d_int8_nchwc, ("data", "kernel"), _pack_depthwise_int8, _depthwise_anchor,
        schedule_depthwise, tiles.depthwise_blocks, tiles.blocked_depthwise_tiles, tiles.depthwise_default),
    Op.GROUP_CONV2D_INT8: OpSpec(
        Op.GROUP_CONV2D_INT8, INT8_KNOBS, _blocked_layouts, conv2d_int8_shapes, conv2d_int8_nchwc,
        ("data", "kernel"), _pack_group_int8, _group_int8_anchor, schedule_conv2d_int8, group_int8_blocks,
        int8_tiles, group_int8_default, keeps_padding=lambda knobs: True, order=int8_order),
    Op.CONV2D_BF16: OpSpec(  # the conv2d_int8 kernel on bfloat16 (a conv2d node's bfloat16 candidate)
        Op.CONV2D_BF16, BF16_KNOBS, _bf16_layouts, conv2d_int8_shapes, conv2d_bf16,
        ("data", "kernel"), _pack_bf16, _int8_anchor, schedule_conv2d_int8, int8_blocks, int8_tiles,
        int8_default, keeps_padding=lambda knobs: True, fold=fold_flat, order=int8_order),
    Op.GROUP_CONV2D_BF16: OpSpec(  # the group_conv2d_int8 kernel on bfloat16 (a group conv node's)
        Op.GROUP_CONV2D_BF16, BF16_KNOBS, _blocked_layouts, conv2d_int8_shapes, conv2d_bf16,
        ("data", "kernel"), _pack_group_int8, _group_int8_anchor, schedule_conv2d_int8, group_int8_blocks,
        int8_tiles, group_int8_default, keeps_padding=lambda knobs: True, order=int8_order),
    Op.DENSE_BF16: OpSpec(  # the conv2d_bf16 kernel on a 1x1 map (a dense node's bfloat16 candidate)
        Op.DENSE_BF16, DENSE_BF16_KNOBS, _dense_layouts, dense_int8_shapes, dense_bf16, ("data", "kernel"),
        _pack_dense_int8, _dense_int8_anchor,
        _schedule_dense_int8,
        dense_int8_blocks, dense_int8_tiles, dense_int8_default, fold=fold_nc),
    Op.DEPTHWISE_CONV2D_BF16: OpSpec(  # the blocked depthwise conv on bfloat16 bits (a depthwise node's)
        Op.DEPTHWISE_CONV2D_BF16, BLOCKED_DEPTHWISE_KNOBS, _depthwise_layouts, depthwise_nchwc_shapes,
        depthwise_conv2d_bf16, ("data", "kernel"), _pack_depthwise_bf16, _depthwise_anchor,
        schedule_depthwise, tiles.depthwise_blocks, tiles.blocked_depthwise_tiles, tiles.depthwise_default),
    Op.DENSE_INT8: OpSpec(  # the conv2d_int8 kernel on a 1x1 map (NC data: its bytes)
        Op.DENSE_INT8, DENSE_INT8_KNOBS, _dense_layouts, dense_int8_shapes, dense_int8_nc, ("data", "kernel"),
        _pack_dense_int8, _dense_int8_anchor,
        _schedule_dense_int8,
        dense_int8_blocks, dense_int8_tiles, dense_int8_default,
        keeps_padding=lambda knobs: bool(knobs.get("widen")), fold=fold_nc),
}
"""The spec of every op kind graphtune.x86 runs."""

KNOBS = {op: {"required": spec.knobs.required, "optional": spec.knobs.optional} for op, spec in SPECS.items()}
"""Required and optional knob names per op."""


def spec_of(op: Op | str) -> OpSpec:
    """The spec of ``op``, or one ValueError listing the ops graphtune.x86 runs.

    Examples
    --------
    >>> spec_of("dense").params
    ('data', 'weight')
    """
    try:
        return SPECS[as_op(op, tuple(SPECS))]
    except ValueError:
        raise ValueError(f"unknown op {op!r} for graphtune.x86; known: {', '.join(SPECS)}") from None


def spec_for(workload: dict, op: Op | str | None = None) -> OpSpec:
    """The spec of a valid ``workload`` of ``op`` (inferred by :func:`graphtune.ops.op_of` when None).

    Raises
    ------
    ModelError
        If the workload is invalid or not a workload of ``op``.
    ValueError
        If graphtune.x86 does not run ``op``.

    Examples
    --------
    >>> from graphtune.ops import dense_workload
    >>> spec_for(dense_workload([1, 8], [4, 8])).op
    'dense'
    """
    if op is None:
        return SPECS[op_of(workload)]
    spec = spec_of(op)
    check_workload(workload, spec.op)
    return spec


def check_knobs(workload: dict, knobs: dict, op: Op | str | None = None) -> dict:
    """Validate ``knobs`` for ``workload``; return them or raise KnobError.

    The message names the op, the knob, the rule broken and the valid values.

    Raises
    ------
    KnobError
        Missing or unknown knobs, wrong types, blocks that do not divide the
        channels, tiles larger than the output.
    ModelError
        If the workload itself is invalid, unsupported, or not an ``op`` workload.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 24, 8, 8], [32, 24, 1, 1])
    >>> check_knobs(wl, {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": False})
    Traceback (most recent call last):
    ...
    graphtune.errors.KnobError: conv2d knob 'ic_bn' = 16 must divide the 24 input channels;
        valid values: 1, 2, 3, 4, 6, 8, 12, 24
    """
    if isinstance(knobs, dict) and knobs.get("precision") is not None:  # an int8 node's fp32 candidate
        kind, fp32, rest = runs_as(op or op_of(workload), workload, knobs)
        return {**check_knobs(fp32, rest, kind), "precision": knobs["precision"]}
    spec = spec_for(workload, op)
    return spec.knobs.check(spec.op, workload, knobs)


def layouts_of(workload: dict, knobs: dict, op: Op | str | None = None) -> tuple:
    """``(in_layout, out_layout)`` of the activation for a candidate (knobs validated).

    An int8 node's fp32 candidate (:func:`graphtune.ops.runs_as`) has the fp32 op's.

    Examples
    --------
    >>> from graphtune.ops import dense_workload
    >>> layouts_of(dense_workload([1, 64], [10, 64]), {"oc_bn": 10, "k_bn": 8})
    ('NC', 'NC')
    """
    if isinstance(knobs, dict):  # else the spec's check names the type
        op, workload, knobs = runs_as(op or op_of(workload), workload, knobs)
    spec = spec_for(workload, op)
    spec.knobs.check(spec.op, workload, knobs)
    return spec.layouts(workload, knobs)


def pack_weight(weight: np.ndarray, workload: dict, knobs: dict, op: Op | str | None = None) -> np.ndarray:
    """The model's ``weight`` packed as the candidate's kernel reads it (the op's
    :attr:`OpSpec.pack`: blocked, per phase for conv2d_transpose, transformed for Winograd).

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 8, 4, 4], [16, 8, 3, 3], padding=[1, 1, 1, 1])
    >>> pack_weight(np.zeros((16, 8, 3, 3), "float32"), wl, {"ic_bn": 8, "oc_bn": 16, "reg_n": 4,
    ...                                                       "unroll_kw": False, "winograd": 2}).shape
    (4, 4, 1, 1, 8, 16)
    """
    spec = spec_for(workload, op)
    spec.knobs.check(spec.op, workload, knobs)
    return spec.pack(weight, workload, knobs)[0]
