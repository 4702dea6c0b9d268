"""Bilinear resize2d as two one-dimensional passes: rows, then columns.

TVM's resize computes every output element from its four neighbours, with the
source index arithmetic of both axes, and vectorised along the output width
each neighbour is a gather. Bilinear interpolation is separable: blending the
two source rows once per (output row, input column) and then the two columns
per output element reads two neighbours per output element and does the row
arithmetic once per row. The row pass is its own loop nest (the generic schedule
does not inline a producer its consumer gathers from). DeepLabV3-MobileNetV3's
last resize (21 channels, 14x14 -> 224x224, from ``NCHW7c`` to ``NCHW``, 2-core
AMD EPYC): 1.27 -> 0.86 ms in the model's function. Where a channel block fills
a vector the neighbours are contiguous vector loads and the row pass only adds a
buffer: U-Net's 2x resizes in ``NCHW16c`` (fused with their concat) took 1.37 ms
one-pass, 1.54 separable, so :func:`supported` leaves those to TVM.

In plain ``NCHW`` the column pass runs along the output width, and its neighbours are a
gather. When the width grows by an integer factor ``r >=`` :data:`MIN_PHASES` (segmentation
heads upsampling to the input size: 8x, 16x) and the coordinate mode is ``half_pixel``,
``pytorch_half_pixel`` or ``asymmetric``, output column ``w = r * i + p`` reads input columns
``i - 1``, ``i``, ``i + 1`` only, whichever phase ``p`` it has, with a weight that depends on
``p`` alone: the pass is written that way and its loop split by ``r``
(:data:`~graphtune.x86.schedule.VECTOR_SPLIT_ATTR`), so one vector of phases reads three
scalars of one row.

Examples
--------
>>> from tvm import te
>>> x = te.placeholder((1, 2, 3, 4, 8), name="x")
>>> y = bilinear_resize2d(x, "NCHW8c", (6, 8), "half_pixel")
>>> [int(d) for d in y.shape]
[1, 2, 6, 8, 8]
"""

from __future__ import annotations

from typing import Sequence

from tvm import te, tirx

from ..errors import LayoutError
from ..layouts import DENSE, block_of
from .schedule import VECTOR_SPLIT_ATTR

__all__ = ["COORDINATE_MODES", "MIN_PHASES", "supported", "phased", "bilinear_resize2d"]

COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
"""ONNX ``coordinate_transformation_mode`` values :func:`bilinear_resize2d` implements."""

MIN_PHASES = 4
"""Smallest integer width factor whose column pass is vectorised over phases (module docstring)."""

_PHASED_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric")


def supported(layout: str, method: str, coordinate_mode: str, lanes: int | None = None) -> bool:
    """Whether :func:`bilinear_resize2d` computes this resize (else TVM's own does): a bilinear
    resize in ``NCHW`` or ``NCHW{x}c`` whose channel block is below ``lanes`` (None: any block).

    Examples
    --------
    >>> supported("NCHW7c", "linear", "half_pixel", lanes=16)
    True
    >>> supported("NCHW16c", "linear", "half_pixel", lanes=16), supported("NHWC", "linear", "half_pixel")
    (False, False)
    >>> supported("NCHW", "nearest_neighbor", "asymmetric")
    False
    """
    if method != "linear" or coordinate_mode not in COORDINATE_MODES or layout == DENSE:
        return False
    try:
        block = max(block_of(layout), 1)
    except LayoutError:
        return False
    return lanes is None or block < lanes


def phased(method: str, coordinate_mode: str, in_width: int, out_width: int) -> bool:
    """Whether a bilinear resize in ``NCHW`` runs its column pass per phase (module docstring):
    the width grows by an integer factor of at least :data:`MIN_PHASES`, in a mode whose phases
    repeat.

    Examples
    --------
    >>> phased("linear", "half_pixel", 14, 224), phased("linear", "align_corners", 14, 224)
    (True, False)
    >>> phased("linear", "half_pixel", 14, 28), phased("nearest_neighbor", "asymmetric", 14, 224)
    (False, False)
    """
    return method == "linear" and coordinate_mode in _PHASED_MODES and out_width % in_width == 0 \
        and out_width // in_width >= MIN_PHASES


def _source(out_index, in_size: int, out_size: int, mode: str) -> tuple:
    """(lower source index, upper source index, weight of the upper) of an output index along
    one axis, as ONNX's ``Resize`` defines them (indices clamped to the input)."""
    out_f = out_index.astype("float32")
    if mode == "align_corners":
        scale = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        position = out_f * tirx.const(scale, "float32")
    elif mode == "asymmetric":
        position = out_f * tirx.const(in_size / out_size, "float32")
    elif mode == "pytorch_half_pixel" and out_size == 1:
        position = tirx.const(0.0, "float32")
    else:  # half_pixel, pytorch_half_pixel
        position = (out_f + tirx.const(0.5, "float32")) * tirx.const(in_size / out_size, "float32") \
            - tirx.const(0.5, "float32")
    floor = te.floor(position)
    lower = floor.astype("int32")
    last = tirx.const(in_size - 1, "int32")
    zero = tirx.const(0, "int32")
    return (te.max(te.min(lower, last), zero), te.max(te.min(lower + 1, last), zero),
            position - floor)


def bilinear_resize2d(data: te.Tensor, layout: str, size: Sequence[int],
                      coordinate_mode: str) -> te.Tensor:
    """Bilinear resize of ``data`` (``NCHW`` or ``NCHW{x}c``) to ``size`` = (height, width).

    Parameters
    ----------
    data : te.Tensor
        The input, float.
    layout : str
        Its layout; H and W are axes 2 and 3 either way.
    size : (int, int)
        Output height and width.
    coordinate_mode : str
        One of :data:`COORDINATE_MODES`.

    Returns
    -------
    te.Tensor
        The resized tensor, named ``resize``; it reads a row pass named ``resize_rows``.

    Examples
    --------
    >>> from tvm import te
    >>> x = te.placeholder((1, 16, 7, 7), name="x")
    >>> bilinear_resize2d(x, "NCHW", (14, 14), "align_corners").op.input_tensors[0].name
    'resize_rows'
    """
    if not supported(layout, "linear", coordinate_mode):
        raise ValueError(f"bilinear_resize2d: layout {layout!r} with coordinate mode "
                         f"{coordinate_mode!r} is not supported; supported: NCHW or NCHW{{x}}c with "
                         f"{', '.join(COORDINATE_MODES)}")
    in_h, in_w = (int(d) for d in data.shape[2:4])
    out_h, out_w = (int(d) for d in size)
    shape = [int(d) for d in data.shape]

    def rows_of(n, c, h, w, *block):
        top, bottom, weight = _source(h, in_h, out_h, coordinate_mode)
        return data(n, c, top, w, *block) * (1 - weight) + data(n, c, bottom, w, *block) * weight

    rows = te.compute([*shape[:2], out_h, in_w, *shape[4:]], rows_of, name="resize_rows")
    factor = out_w // in_w
    if len(shape) == 4 and phased("linear", coordinate_mode, in_w, out_w):
        return te.compute([*shape[:2], out_h, out_w], _phased_columns(rows, in_w, factor, coordinate_mode),
                          name="resize", attrs={VECTOR_SPLIT_ATTR: factor})

    def columns_of(n, c, h, w, *block):
        left, right, weight = _source(w, in_w, out_w, coordinate_mode)
        return rows(n, c, h, left, *block) * (1 - weight) + rows(n, c, h, right, *block) * weight

    return te.compute([*shape[:2], out_h, out_w, *shape[4:]], columns_of, name="resize")


def _phased_columns(rows: te.Tensor, in_w: int, factor: int, mode: str):
    """The column pass of an integer width ``factor`` (module docstring): output column
    ``w = factor * i + p`` blends input columns ``i - 1`` and ``i`` (phases below
    ``factor // 2``, half-pixel modes) or ``i`` and ``i + 1``, weights by phase only, indices
    clamped to the row as ONNX's ``Resize`` clamps them."""
    last = tirx.const(in_w - 1, "int32")
    zero = tirx.const(0, "int32")
    inverse = tirx.const(1.0 / factor, "float32")

    def columns_of(n, c, h, w):
        column, phase = w // factor, w % factor
        mid = rows(n, c, h, column)
        right = rows(n, c, h, te.min(column + 1, last))
        offset = phase.astype("float32") * inverse
        if mode == "asymmetric":
            return mid + (right - mid) * offset
        left = rows(n, c, h, te.max(column - 1, zero))
        below = phase < factor // 2  # the source position lies left of input column i
        weight = offset + tirx.const(0.5 / factor - 0.5, "float32") \
            + tirx.Select(below, tirx.const(1.0, "float32"), tirx.const(0.0, "float32"))
        low, high = tirx.Select(below, left, mid), tirx.Select(below, mid, right)
        return low + (high - low) * weight

    return columns_of
