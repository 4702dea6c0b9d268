"""Which kernel taps of a conv read the input: the rule behind dropping the others.

Tap ``k`` of a spatial axis (input extent ``H``, output extent ``OH``, stride ``s``,
dilation ``d``, leading pad ``p``) is *live* when some output row ``y < OH`` reads input row
``y * s - p + k * d`` inside ``[0, H)``; a dead tap multiplies padding zeros only. A conv
computes exactly what the conv of its live taps computes, from the first live tap to the
last, with the leading pad shortened by ``first * d`` and the trailing pad set so that the
output extent stays ``OH`` (an axis left with one tap takes dilation 1). DeepLabV3's ASPP
convs (3x3, dilation 24 and 36) on a 14x14 map are 1x1 convs that way.

:func:`live_axis` is the rule for one axis, :func:`without_dead_taps` applies it to a conv
workload (:mod:`graphtune.ops`), :func:`graphtune.frontend.taps.drop_dead_taps` to an ONNX
model. Importing this module never loads TVM.

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

__all__ = ["LiveAxis", "live_taps", "live_axis", "without_dead_taps"]


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
