"""Transposed conv2d (ONNX ConvTranspose, groups 1) in blocked layouts, skipping the zeros.

A transposed conv with stride ``s`` is a conv over the input dilated by ``s``
zeros; computing it that way wastes ``s*s - 1`` of every ``s*s`` multiplies.
This compute iterates only the contributing taps instead: output row ``oh``
has phase ``p = (oh + pad_top) % s`` and receives kernel rows
``ky = p + t*s`` (``t < T = ceil(KH / s)``) from input rows
``(oh + pad_top) // s - t`` (likewise for columns). The kernel is packed per
phase, ``[O/oc_bn, C/ic_bn, s_h, T_h, s_w, T_w, ic_bn, oc_bn]`` (taps past the
kernel's edge are zeros), so the reduction block ``conv2d_transpose_NCHWc``
has conv2d's shape: spatial ``(n, oc_chunk, oh, ow, oc_block)``, reduction
``(ic_chunk, th, tw, ic_block)``, and takes conv2d's register-tiled schedule
and knobs (``ic_bn``, ``oc_bn``, ``reg_n``, ``unroll_kw`` unrolling the
column taps, optional ``oh_bn``). A width tile ``reg_n`` that is a multiple
of the stride keeps each unrolled column's phase, hence its kernel vector, a
constant.

Examples
--------
>>> from tvm import te
>>> from graphtune.ops import conv2d_transpose_workload
>>> wl = conv2d_transpose_workload([1, 32, 7, 7], [32, 16, 4, 4], [2, 2], [1, 1, 1, 1])
>>> knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 14, "unroll_kw": True}
>>> d, k, o = conv2d_transpose_nchwc_shapes(wl, knobs)
>>> k, o
([1, 2, 2, 2, 2, 2, 16, 16], [1, 1, 14, 14, 16])
>>> conv2d_transpose_nchwc(te.placeholder(d), te.placeholder(k), wl, knobs).op.name
'conv2d_transpose_NCHWc'
"""

import math

import numpy as np
from tvm import te

from ..ops import Op, output_shape
from .conv2d import check_tensor_shape, pad_nchwc
from .knobs import CONV_KNOBS
from .packing import _split

__all__ = ["conv2d_transpose_nchwc", "conv2d_transpose_nchwc_shapes", "pack_conv2d_transpose_kernel", "taps"]


def taps(workload: dict) -> tuple:
    """Kernel taps per output phase, ``(T_h, T_w)`` = ``ceil(KH / s_h), ceil(KW / s_w)``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_transpose_workload
    >>> taps(conv2d_transpose_workload([1, 8, 4, 4], [8, 8, 3, 2], [2, 2], [1, 1, 1, 1]))
    (2, 1)
    """
    _, _, kh, kw = workload["kernel"]
    sh, sw = workload["strides"]
    return math.ceil(kh / sh), math.ceil(kw / sw)


def _data_padding(workload: dict) -> list:
    """Zero rows/columns (top, left, bottom, right) the tap loops read around the input."""
    _, _, h, w = workload["data"]
    _, _, oh, ow = output_shape(workload, Op.CONV2D_TRANSPOSE)
    top, left, _, _ = workload["padding"]
    (sh, sw), (th, tw) = workload["strides"], taps(workload)
    return [
        max(0, th - 1 - top // sh),
        max(0, tw - 1 - left // sw),
        max(0, (oh - 1 + top) // sh - (h - 1)),
        max(0, (ow - 1 + left) // sw - (w - 1)),
    ]


def conv2d_transpose_nchwc_shapes(workload: dict, knobs: dict) -> tuple:
    """``(data, packed kernel, output)`` shapes for ``knobs``.

    Data ``[N, C/ic_bn, H, W, ic_bn]``, kernel
    ``[O/oc_bn, C/ic_bn, s_h, T_h, s_w, T_w, ic_bn, oc_bn]``, output
    ``[N, O/oc_bn, OH, OW, oc_bn]``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_transpose_workload
    >>> wl = conv2d_transpose_workload([1, 8, 4, 4], [8, 4, 2, 2], [2, 2])
    >>> conv2d_transpose_nchwc_shapes(wl, {"ic_bn": 8, "oc_bn": 4, "reg_n": 8, "unroll_kw": False})[2]
    [1, 1, 8, 8, 4]
    """
    CONV_KNOBS.check(Op.CONV2D_TRANSPOSE, workload, knobs)
    ib, ob = knobs["ic_bn"], knobs["oc_bn"]
    n, c, h, w = workload["data"]
    _, o, _, _ = workload["kernel"]
    (sh, sw), (th, tw) = workload["strides"], taps(workload)
    _, _, oh, ow = output_shape(workload, Op.CONV2D_TRANSPOSE)
    return [n, c // ib, h, w, ib], [o // ob, c // ib, sh, th, sw, tw, ib, ob], [n, o // ob, oh, ow, ob]


def pack_conv2d_transpose_kernel(w: np.ndarray, ic_bn: int, oc_bn: int, strides: list) -> np.ndarray:
    """IOHW ``[C, O, KH, KW]`` -> the per-phase packed kernel of :func:`conv2d_transpose_nchwc`.

    Examples
    --------
    >>> w = np.arange(2 * 2 * 3 * 3, dtype="float32").reshape(2, 2, 3, 3)
    >>> p = pack_conv2d_transpose_kernel(w, 1, 2, [2, 2])
    >>> p.shape, bool(p[0, 1, 1, 0, 0, 1, 0, 0] == w[1, 0, 1, 2]), float(p[0, 0, 1, 1, 0, 0, 0, 0])
    ((1, 2, 2, 2, 2, 2, 1, 2), True, 0.0)
    """
    c, o, kh, kw = w.shape
    sh, sw = strides
    th, tw = math.ceil(kh / sh), math.ceil(kw / sw)
    oc, ic = _split(o, oc_bn, "output channels"), _split(c, ic_bn, "input channels")
    full = np.zeros((c, o, sh * th, sw * tw), dtype=w.dtype)
    full[:, :, :kh, :kw] = w
    # ky = p + t * s: [C, O, T_h, s_h, T_w, s_w] -> [O/ob, C/ib, s_h, T_h, s_w, T_w, ib, ob]
    split = full.reshape(ic, ic_bn, oc, oc_bn, th, sh, tw, sw)
    return np.ascontiguousarray(split.transpose(2, 0, 5, 4, 7, 6, 1, 3))


def conv2d_transpose_nchwc(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict) -> te.Tensor:
    """Transposed conv2d ``NCHW{ic_bn}c`` x per-phase kernel -> ``NCHW{oc_bn}c``.

    Parameters
    ----------
    data : te.Tensor
        ``[N, C/ic_bn, H, W, ic_bn]``.
    kernel : te.Tensor
        :func:`pack_conv2d_transpose_kernel` of the IOHW weight.
    workload, knobs : dict
        A conv2d_transpose workload and conv2d-style knobs (validated here).

    Returns
    -------
    te.Tensor
        ``[N, O/oc_bn, OH, OW, oc_bn]``, computed by the block ``conv2d_transpose_NCHWc``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_transpose_workload
    >>> wl = conv2d_transpose_workload([1, 8, 3, 3], [8, 8, 2, 2], [2, 2])
    >>> knobs = {"ic_bn": 8, "oc_bn": 8, "reg_n": 6, "unroll_kw": True}
    >>> d, k, o = conv2d_transpose_nchwc_shapes(wl, knobs)
    >>> [int(x) for x in conv2d_transpose_nchwc(te.placeholder(d), te.placeholder(k), wl, knobs).shape]
    [1, 1, 6, 6, 8]
    """
    data_shape, kernel_shape, out_shape = conv2d_transpose_nchwc_shapes(workload, knobs)
    check_tensor_shape(data, data_shape, "conv2d_transpose data")
    check_tensor_shape(kernel, kernel_shape, "conv2d_transpose kernel")
    sh, sw = workload["strides"]
    top, left, _, _ = workload["padding"]
    pad = _data_padding(workload)
    padded = pad_nchwc(data, pad)
    ic_chunk = te.reduce_axis((0, data_shape[1]), name="ic_chunk")
    th = te.reduce_axis((0, kernel_shape[3]), name="th")
    tw = te.reduce_axis((0, kernel_shape[5]), name="tw")
    ic_block = te.reduce_axis((0, data_shape[4]), name="ic_block")

    def body(n, oc_chunk, oh, ow, oc_block):
        y, x = oh + top, ow + left
        pixel = padded[n, ic_chunk, y // sh - th + pad[0], x // sw - tw + pad[1], ic_block]
        weight = kernel[oc_chunk, ic_chunk, y % sh, th, x % sw, tw, ic_block, oc_block]
        return te.sum(pixel * weight, axis=[ic_chunk, th, tw, ic_block])

    return te.compute(out_shape, body, name="conv2d_transpose_NCHWc", tag="conv2d_transpose_NCHWc")
