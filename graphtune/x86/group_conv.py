"""TE compute and weight packing of grouped conv2d (``1 < groups < C``) in ``NCHW{x}c``.

Knobs as for conv2d (``ic_bn``, ``oc_bn``, ``reg_n``, ``unroll_kw``,
optional ``oh_bn``), with the block rules of :mod:`graphtune.x86.groups`:
an output block lies inside one group or spans whole groups, and reduces
over the :func:`~graphtune.x86.groups.span` of its groups' input channels
only. The kernel is ``[O/oc_bn, span/ic_bn, KH, KW, ic_bn, oc_bn]``,
block-diagonal (zeros between groups) when a block spans several groups.
With the knob ``shuffle`` (a block of several groups of ``cg`` input and output
channels each, ``ic_bn == oc_bn``), output lane ``l`` reads only its own group's
inputs, lanes ``(l // cg) * cg + j`` of the input block, and the kernel is
``[O/oc_bn, 1, KH, KW, cg, oc_bn]`` (:func:`pack_shuffled_group_kernel`): ``cg``
products per output instead of ``oc_bn``, the input vector permuted in registers
(:mod:`graphtune.x86.shuffles`).
The reduction block ``group_conv2d_NCHWc`` has the axes of ``conv2d_NCHWc``
(``n, oc_chunk, oh, ow, oc_block`` x ``ic_chunk, kh, kw, ic_block``), so the
conv2d schedule applies unchanged.

Examples
--------
>>> from tvm import te
>>> from graphtune.ops import conv2d_workload
>>> wl = conv2d_workload([1, 32, 8, 8], [32, 4, 3, 3], padding=[1, 1, 1, 1], groups=8)
>>> knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": True}
>>> d, k, o = group_conv_nchwc_shapes(wl, knobs)
>>> d, k, o
([1, 2, 8, 8, 16], [2, 1, 3, 3, 16, 16], [1, 2, 8, 8, 16])
>>> group_conv2d_nchwc(te.placeholder(d), te.placeholder(k), wl, knobs).op.name
'group_conv2d_NCHWc'
"""

import numpy as np
from tvm import te

from ..errors import LayoutError
from ..ops import Op, output_shape
from .conv2d import check_tensor_shape, pad_nchwc
from .groups import group_sizes, span
from .knobs import GROUP_KNOBS

__all__ = ["group_conv2d_nchwc", "group_conv_nchwc_shapes", "pack_group_kernel", "pack_shuffled_group_kernel",
           "spanned_kernel"]


def group_conv_nchwc_shapes(workload: dict, knobs: dict) -> tuple:
    """``(data, kernel, output)`` shapes of the blocked group conv for ``knobs``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 64, 8, 8], [64, 16, 1, 1], groups=4)
    >>> group_conv_nchwc_shapes(wl, {"ic_bn": 8, "oc_bn": 8, "reg_n": 8, "unroll_kw": False})[1]
    [8, 2, 1, 1, 8, 8]
    """
    GROUP_KNOBS.check(Op.GROUP_CONV2D, workload, knobs)
    ib, ob = knobs["ic_bn"], knobs["oc_bn"]
    n, c, h, w = workload["data"]
    o, _, kh, kw = workload["kernel"]
    _, _, oh, ow = output_shape(workload, Op.GROUP_CONV2D)
    if knobs.get("shuffle"):  # one chunk: each output lane's own group's inputs
        cg = group_sizes(workload)[0]
        return [n, c // ib, h, w, ib], [o // ob, 1, kh, kw, cg, ob], [n, o // ob, oh, ow, ob]
    width = span(workload, ob)
    return [n, c // ib, h, w, ib], [o // ob, width // ib, kh, kw, ib, ob], [n, o // ob, oh, ow, ob]


def group_conv2d_nchwc(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict) -> te.Tensor:
    """Grouped conv2d ``NCHW{ic_bn}c`` x packed kernel -> ``NCHW{oc_bn}c``.

    Parameters
    ----------
    data : te.Tensor
        ``[N, C/ic_bn, H, W, ic_bn]``.
    kernel : te.Tensor
        ``[O/oc_bn, span/ic_bn, KH, KW, ic_bn, oc_bn]`` (:func:`pack_group_kernel`).
    workload, knobs : dict
        A group conv workload (``1 < groups``, not depthwise) and its knobs.

    Returns
    -------
    te.Tensor
        ``[N, O/oc_bn, OH, OW, oc_bn]``, computed by the block ``group_conv2d_NCHWc``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 16, 6, 6], [16, 8, 3, 3], groups=2)
    >>> knobs = {"ic_bn": 4, "oc_bn": 4, "reg_n": 4, "unroll_kw": True}
    >>> d, k, o = group_conv_nchwc_shapes(wl, knobs)
    >>> out = group_conv2d_nchwc(te.placeholder(d), te.placeholder(k), wl, knobs)
    >>> [int(x) for x in out.shape] == o
    True
    """
    data_shape, kernel_shape, out_shape = group_conv_nchwc_shapes(workload, knobs)
    check_tensor_shape(data, data_shape, "group conv data")
    check_tensor_shape(kernel, kernel_shape, "group conv kernel")
    ib, ob = knobs["ic_bn"], knobs["oc_bn"]
    cg, og = group_sizes(workload)
    sh, sw = workload["strides"]
    dh, dw = workload["dilation"]
    padded = pad_nchwc(data, workload["padding"])
    ic_chunk = te.reduce_axis((0, kernel_shape[1]), name="ic_chunk")
    kh = te.reduce_axis((0, kernel_shape[2]), name="kh")
    kw = te.reduce_axis((0, kernel_shape[3]), name="kw")
    ic_block = te.reduce_axis((0, kernel_shape[4]), name="ic_block")
    shuffle = bool(knobs.get("shuffle"))

    def body(n, oc_chunk, oh, ow, oc_block):
        first = (oc_chunk * ob // og) * cg // ib  # first input chunk of the block's groups
        lane = (oc_block // cg) * cg + ic_block if shuffle else ic_block  # shuffle: the lane's group
        pixel = padded[n, first + ic_chunk, oh * sh + kh * dh, ow * sw + kw * dw, lane]
        weight = kernel[oc_chunk, ic_chunk, kh, kw, ic_block, oc_block]
        return te.sum(pixel * weight, axis=[ic_chunk, kh, kw, ic_block])

    return te.compute(out_shape, body, name="group_conv2d_NCHWc", tag="group_conv2d_NCHWc")


def spanned_kernel(w: np.ndarray, groups: int, oc_bn: int) -> np.ndarray:
    """Grouped ``[O, C/groups, KH, KW]`` -> ``[O, span, KH, KW]``: each output channel's weights
    over the :func:`~graphtune.x86.groups.span` its block of ``oc_bn`` reads, zero where an input
    channel belongs to another group of the block (the dense weight of a group conv block).

    Examples
    --------
    >>> w = np.ones((8, 2, 1, 1), dtype="float32")
    >>> spanned_kernel(w, 4, 4)[:4, :, 0, 0].tolist()  # blocks of 4 outputs span 2 groups of 2
    [[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]
    """
    o, cg, kh, kw = w.shape
    if groups < 1 or o % groups or o % oc_bn:
        raise LayoutError(f"group kernel {list(w.shape)}: groups={groups} and oc_bn={oc_bn} must divide {o}")
    og = o // groups
    if og % oc_bn and oc_bn % og:
        raise LayoutError(f"oc_bn={oc_bn} must divide or be a multiple of the {og} output channels per group")
    width = cg * max(1, oc_bn // og)
    spanned = np.zeros((o, width, kh, kw), dtype=w.dtype)
    out = np.arange(o)
    offset = (out // og) * cg - (out // oc_bn * oc_bn // og) * cg  # group start inside the span
    for j in range(cg):
        spanned[out, offset + j] = w[:, j]
    return spanned


def pack_shuffled_group_kernel(w: np.ndarray, oc_bn: int) -> np.ndarray:
    """Grouped ``[O, C/groups, KH, KW]`` -> ``[O/oc_bn, 1, KH, KW, C/groups, oc_bn]``: output
    lane ``l`` of block ``b`` holds ``w[b * oc_bn + l, j]`` at input ``j`` of its group (the
    kernel of the ``shuffle`` candidates: no zeros between groups).

    Examples
    --------
    >>> w = np.arange(8, dtype="float32").reshape(4, 2, 1, 1)  # 2 groups of 2
    >>> pack_shuffled_group_kernel(w, 4)[0, 0, 0, 0].tolist()
    [[0.0, 2.0, 4.0, 6.0], [1.0, 3.0, 5.0, 7.0]]
    """
    o, cg, kh, kw = w.shape
    if o % oc_bn:
        raise LayoutError(f"group kernel {list(w.shape)}: oc_bn={oc_bn} must divide {o}")
    blocked = w.reshape(o // oc_bn, oc_bn, cg, kh, kw).transpose(0, 3, 4, 2, 1)
    return np.ascontiguousarray(blocked[:, None])


def pack_group_kernel(w: np.ndarray, groups: int, ic_bn: int, oc_bn: int) -> np.ndarray:
    """Grouped ``[O, C/groups, KH, KW]`` -> ``[O/oc_bn, span/ic_bn, KH, KW, ic_bn, oc_bn]``:
    the :func:`spanned_kernel` blocked as a conv2d kernel.

    Examples
    --------
    >>> w = np.ones((8, 2, 1, 1), dtype="float32")
    >>> p = pack_group_kernel(w, 4, 4, 4)  # blocks of 4 outputs span 2 groups of 2
    >>> p.shape, p[0, 0, 0, 0, :, 0].tolist(), p[0, 0, 0, 0, :, 3].tolist()
    ((2, 1, 1, 1, 4, 4), [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0])
    """
    spanned = spanned_kernel(w, groups, oc_bn)
    o, width, kh, kw = spanned.shape
    if width % ic_bn:
        raise LayoutError(f"ic_bn={ic_bn} does not divide the {width} input channels an output block reads")
    blocked = spanned.reshape(o // oc_bn, oc_bn, width // ic_bn, ic_bn, kh, kw)
    return np.ascontiguousarray(blocked.transpose(0, 2, 4, 5, 3, 1))
