"""Which kernel taps of a conv read the input: the rule behind dropping the others.

Tap ``k`` of a spatial axis (input extent ``H``, output extent ``OH``, stride ``s``,
dilation ``d``, leading pad ``p``) is *live* when some output row ``y < OH`` reads input row
``y * s - p + k * d`` inside ``[0, H)``; a dead tap multiplies padding zeros only. A conv
computes exactly what the conv of its live taps computes, from the first live tap to the
last, with the leading pad shortened by ``first * d`` and the trailing pad set so that the
output extent stays ``OH`` (an axis left with one tap takes dilation 1). DeepLabV3's ASPP
convs (3x3, dilation 24 and 36) on a 14x14 map are 1x1 convs that way.

When every tap is live somewhere but most output positions read padding with some of them
(the dilation-12 ASPP conv on 14x14: the two rows at each border reach the input with two
kernel rows, the ten between with the centre row only), the output splits into *bands*,
runs of positions with the same live taps, and each rectangle of a row band and a column
band is a conv of its live taps on the slice of the input they read, without padding:
324 instead of 1764 taps x positions there. A conv is split when that at least halves its
work (``MIN_BAND_SAVING``) and the multiply-adds saved outweigh the calls the pieces add
(``MIN_MACS_PER_CALL``): a 3x3 conv on a 2x2 map halves its work too, by a few microseconds.

:func:`live_axis` is the rule for one axis, :func:`without_dead_taps` applies it to a conv
workload (:mod:`graphtune.ops`), :func:`graphtune.frontend.taps.drop_dead_taps` to an ONNX
model; :func:`bands` and :func:`band_split` are the band rule,
:func:`graphtune.frontend.taps.split_by_band` its ONNX rewrite. Importing this module never
loads TVM.

Examples
--------
>>> from graphtune.ops import conv2d_workload
>>> aspp = conv2d_workload([1, 960, 14, 14], [256, 960, 3, 3], padding=[36] * 4, dilation=[36, 36])
>>> slim = without_dead_taps(aspp)
>>> slim["kernel"], slim["padding"], slim["dilation"]
([256, 960, 1, 1], [0, 0, 0, 0], [1, 1])
"""

from __future__ import annotations

from typing import NamedTuple

from .ops import Workload

__all__ = ["LiveAxis", "live_taps", "live_axis", "without_dead_taps", "Band", "bands", "band_split",
           "MIN_BAND_SAVING", "MIN_MACS_PER_CALL"]

MIN_BAND_SAVING = 2.0
"""A conv is split by band only if the pieces compute at most this fraction's inverse of its
taps x output positions (each piece is a call of its own, with a slice of the input)."""

MIN_MACS_PER_CALL = 1_000_000
"""Multiply-adds a split must save per call it adds (a slice and a conv per piece, the concats):
a call costs a parallel launch and join, a few microseconds; a million multiply-adds take
10-20 microseconds on two cores of the x86 CPUs graphtune targets."""


class LiveAxis(NamedTuple):
    """One spatial axis of a conv without its dead taps."""

    first: int
    """The first live tap (the kernel is sliced from here)."""
    taps: int
    """Taps kept: first to last live one."""
    dilation: int
    pad_begin: int
    pad_end: int


def live_taps(extent: int, out_extent: int, kernel: int, stride: int, dilation: int,
              pad_begin: int) -> list[int]:
    """The taps of a conv axis that read the input for some output position.

    Examples
    --------
    >>> live_taps(14, 14, 3, 1, 36, 36)  # only the centre tap reaches the 14 input rows
    [1]
    >>> live_taps(14, 14, 3, 1, 12, 12)
    [0, 1, 2]
    """
    return [k for k in range(kernel)
            if any(0 <= y * stride - pad_begin + k * dilation < extent for y in range(out_extent))]


def live_axis(extent: int, kernel: int, stride: int, dilation: int,
              pads: tuple[int, int]) -> LiveAxis | None:
    """The axis without its dead taps, or None when every tap is live, none is, or the new
    pads would be negative (the axis then stays as it is).

    Examples
    --------
    >>> live_axis(14, 3, 1, 24, (24, 24))
    LiveAxis(first=1, taps=1, dilation=1, pad_begin=0, pad_end=0)
    >>> live_axis(56, 3, 1, 1, (1, 1)) is None
    True
    """
    out_extent = (extent + pads[0] + pads[1] - dilation * (kernel - 1) - 1) // stride + 1
    live = live_taps(extent, out_extent, kernel, stride, dilation, pads[0])
    if not live or len(live) == kernel:
        return None
    first, taps = live[0], live[-1] - live[0] + 1
    if taps == kernel:
        return None
    kept_dilation = dilation if taps > 1 else 1
    pad_begin = pads[0] - first * dilation
    pad_end = (out_extent - 1) * stride + kept_dilation * (taps - 1) + 1 - extent - pad_begin
    if pad_begin < 0 or pad_end < 0:
        return None
    return LiveAxis(first, taps, kept_dilation, pad_begin, pad_end)


def without_dead_taps(workload: Workload) -> Workload:
    """A (depthwise / group / int8) conv2d workload without its dead taps; any other workload,
    or a conv whose taps are all live, as it is.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> head = conv2d_workload([1, 64, 1, 1], [64, 64, 3, 3], padding=[1, 1, 1, 1])  # a 1x1 map
    >>> without_dead_taps(head)["kernel"]
    [64, 64, 1, 1]
    """
    if not {"data", "kernel", "padding", "strides", "dilation"} <= set(workload) \
            or "output_padding" in workload:
        return workload
    kernel, padding = list(workload["kernel"]), list(workload["padding"])
    dilation = list(workload["dilation"])
    changed = False
    for axis in range(2):
        live = live_axis(workload["data"][2 + axis], kernel[2 + axis], workload["strides"][axis],
                         dilation[axis], (padding[axis], padding[2 + axis]))
        if live is not None:
            kernel[2 + axis], dilation[axis] = live.taps, live.dilation
            padding[axis], padding[2 + axis] = live.pad_begin, live.pad_end
            changed = True
    if not changed:
        return workload
    return {**workload, "kernel": kernel, "padding": padding, "dilation": dilation}


class Band(NamedTuple):
    """A run of output positions of one spatial axis that read the input with the same taps."""

    out_begin: int
    out_end: int
    """Output positions ``[out_begin, out_end)``."""
    first: int
    taps: int
    """Live taps ``first`` to ``first + taps - 1``."""
    dilation: int
    """The piece's dilation (1 when it has one tap)."""
    in_begin: int
    in_end: int
    """Input positions the band reads, ``[in_begin, in_end)``: inside the input."""


def bands(extent: int, kernel: int, stride: int, dilation: int, pads: tuple[int, int]) -> list[Band] | None:
    """The output positions of a conv axis in runs of the same live taps, or None when some
    output position reads padding only (its value is the bias alone).

    Examples
    --------
    >>> [(b.out_begin, b.out_end, b.first, b.taps) for b in bands(14, 3, 1, 12, (12, 12))]
    [(0, 2, 1, 2), (2, 12, 1, 1), (12, 14, 0, 2)]
    >>> len(bands(56, 3, 1, 1, (1, 1)))  # the first and last rows miss one tap each
    3
    """
    out_extent = (extent + pads[0] + pads[1] - dilation * (kernel - 1) - 1) // stride + 1
    runs: list[Band] = []
    for y in range(out_extent):
        live = [k for k in range(kernel) if 0 <= y * stride - pads[0] + k * dilation < extent]
        if not live:
            return None
        first, taps = live[0], live[-1] - live[0] + 1
        if runs and (runs[-1].first, runs[-1].taps) == (first, taps):
            runs[-1] = runs[-1]._replace(out_end=y + 1,
                                         in_end=y * stride - pads[0] + live[-1] * dilation + 1)
            continue
        runs.append(Band(y, y + 1, first, taps, dilation if taps > 1 else 1,
                         y * stride - pads[0] + first * dilation,
                         y * stride - pads[0] + live[-1] * dilation + 1))
    return runs


def band_split(workload: Workload, min_macs_per_call: float = MIN_MACS_PER_CALL
               ) -> tuple[list[Band], list[Band]] | None:
    """Row and column bands of a 2-D conv workload (:mod:`graphtune.ops`) whose pieces
    compute at most ``1 / MIN_BAND_SAVING`` of its taps x output positions and save at least
    ``min_macs_per_call`` multiply-adds per call they add, else None.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> aspp12 = conv2d_workload([1, 960, 14, 14], [256, 960, 3, 3], padding=[12] * 4, dilation=[12, 12])
    >>> rows, cols = band_split(aspp12)
    >>> [(b.out_begin, b.out_end) for b in rows], len(cols)
    ([(0, 2), (2, 12), (12, 14)], 3)
    >>> band_split(conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1] * 4)) is None
    True
    >>> band_split(conv2d_workload([1, 256, 2, 2], [256, 256, 3, 3], padding=[1] * 4)) is None  # too small
    True
    """
    if not {"data", "kernel", "padding", "strides", "dilation"} <= set(workload) \
            or "output_padding" in workload or len(workload["kernel"]) != 4:
        return None
    axes = []
    for axis in range(2):
        found = bands(workload["data"][2 + axis], workload["kernel"][2 + axis], workload["strides"][axis],
                      workload["dilation"][axis], (workload["padding"][axis], workload["padding"][2 + axis]))
        if found is None:
            return None
        axes.append(found)
    rows, cols = axes
    full = (rows[-1].out_end * workload["kernel"][2]) * (cols[-1].out_end * workload["kernel"][3])
    pieces = sum((b.out_end - b.out_begin) * b.taps for b in rows) \
        * sum((b.out_end - b.out_begin) * b.taps for b in cols)
    macs_per_tap = workload["data"][0] * workload["kernel"][0] * workload["kernel"][1]
    calls = 2 * len(rows) * len(cols) + (len(rows) if len(cols) > 1 else 0) + (len(rows) > 1) - 1
    worth = pieces * MIN_BAND_SAVING <= full and (full - pieces) * macs_per_tap >= min_macs_per_call * calls
    return (rows, cols) if worth else None
