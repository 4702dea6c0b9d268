"""TE compute of conv2d in blocked layouts (``NCHW{ic_bn}c`` -> ``NCHW{oc_bn}c``).

The compute has one zero-padding stage (``data_pad``, only when padding is
non-zero) and one reduction block ``conv2d_NCHWc`` with spatial axes
``(n, oc_chunk, oh, ow, oc_block)`` and reduction axes
``(ic_chunk, kh, kw, ic_block)``; :func:`graphtune.x86.schedule_fused` relies
on that shape.

Examples
--------
>>> from tvm import te
>>> from graphtune.ops import conv2d_workload
>>> wl = conv2d_workload([1, 32, 14, 14], [64, 32, 3, 3], padding=[1, 1, 1, 1])
>>> knobs = {"ic_bn": 8, "oc_bn": 16, "reg_n": 7, "unroll_kw": True}
>>> shapes = conv2d_nchwc_shapes(wl, knobs)
>>> shapes
([1, 4, 14, 14, 8], [4, 4, 3, 3, 8, 16], [1, 4, 14, 14, 16])
>>> out = conv2d_nchwc(te.placeholder(shapes[0]), te.placeholder(shapes[1]), wl, knobs)
>>> [int(x) for x in out.shape]
[1, 4, 14, 14, 16]
"""

from tvm import te, tirx

from ..errors import KnobError
from ..ops import Op, output_shape
from .knobs import CONV_KNOBS
from .winograd import winograd_nchwc, winograd_shapes

__all__ = ["conv2d_nchwc", "conv2d_nchwc_shapes", "pad_nchwc", "check_tensor_shape"]


def conv2d_nchwc_shapes(workload: dict, knobs: dict) -> tuple:
    """``(data, kernel, output)`` shapes of the blocked conv2d for ``knobs``.

    Data ``[N, C/ic_bn, H, W, ic_bn]``, kernel
    ``[O/oc_bn, C/ic_bn, KH, KW, ic_bn, oc_bn]``, output
    ``[N, O/oc_bn, OH, OW, oc_bn]``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 3, 8, 8], [16, 3, 3, 3])
    >>> conv2d_nchwc_shapes(wl, {"ic_bn": 3, "oc_bn": 16, "reg_n": 6, "unroll_kw": True})[1]
    [1, 1, 3, 3, 3, 16]
    """
    CONV_KNOBS.check(Op.CONV2D, workload, knobs)
    if "winograd" in knobs:
        return winograd_shapes(workload, knobs)
    ib, ob = knobs["ic_bn"], knobs["oc_bn"]
    n, c, h, w = workload["data"]
    o, _, kh, kw = workload["kernel"]
    _, _, oh, ow = output_shape(workload, Op.CONV2D)
    return [n, c // ib, h, w, ib], [o // ob, c // ib, kh, kw, ib, ob], [n, o // ob, oh, ow, ob]


def check_tensor_shape(tensor: te.Tensor, expected: list, role: str) -> None:
    """Raise KnobError if ``tensor`` does not have shape ``expected``.

    Examples
    --------
    >>> check_tensor_shape(te.placeholder((2, 3)), [2, 3], "data")
    """
    got = [int(x) for x in tensor.shape]
    if got != list(expected):
        raise KnobError(f"{role} tensor has shape {got} but the workload and knobs need {list(expected)}")


def pad_nchwc(data: te.Tensor, padding: list, name: str = "data_pad") -> te.Tensor:
    """Zero-pad the H and W axes of a 5-D ``NCHW{x}c`` tensor (``padding`` = top, left, bottom, right).

    Returns ``data`` itself when all padding is zero.

    Examples
    --------
    >>> x = te.placeholder((1, 2, 4, 4, 8))
    >>> [int(s) for s in pad_nchwc(x, [1, 1, 0, 2]).shape]
    [1, 2, 5, 7, 8]
    """
    top, left, bottom, right = padding
    if not any(padding):
        return data
    n, c, h, w, b = (int(x) for x in data.shape)

    def fetch(i, j, y, x, k):
        inside = tirx.all(y >= top, y < h + top, x >= left, x < w + left)
        return tirx.if_then_else(inside, data[i, j, y - top, x - left, k], tirx.const(0.0, data.dtype))

    return te.compute((n, c, h + top + bottom, w + left + right, b), fetch, name=name)


def conv2d_nchwc(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict) -> te.Tensor:
    """Blocked conv2d ``NCHW{ic_bn}c`` x ``OIHW{ic_bn}i{oc_bn}o`` -> ``NCHW{oc_bn}c``.

    With knob ``winograd`` the kernel is the transformed one and the compute
    :func:`graphtune.x86.winograd.winograd_nchwc`.

    Parameters
    ----------
    data : te.Tensor
        ``[N, C/ic_bn, H, W, ic_bn]``.
    kernel : te.Tensor
        ``[O/oc_bn, C/ic_bn, KH, KW, ic_bn, oc_bn]``.
    workload, knobs : dict
        The conv2d workload and its knobs (validated here).

    Returns
    -------
    te.Tensor
        ``[N, O/oc_bn, OH, OW, oc_bn]``, computed by the block ``conv2d_NCHWc``.

    Raises
    ------
    KnobError
        Invalid knobs, or tensors whose shapes do not match them.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 8, 8, 8], [8, 8, 1, 1])
    >>> knobs = {"ic_bn": 8, "oc_bn": 8, "reg_n": 8, "unroll_kw": False}
    >>> d, k, _ = conv2d_nchwc_shapes(wl, knobs)
    >>> conv2d_nchwc(te.placeholder(d), te.placeholder(k), wl, knobs).op.name
    'conv2d_NCHWc'
    """
    data_shape, kernel_shape, out_shape = conv2d_nchwc_shapes(workload, knobs)
    check_tensor_shape(data, data_shape, "conv2d data")
    check_tensor_shape(kernel, kernel_shape, "conv2d kernel")
    if "winograd" in knobs:
        return winograd_nchwc(data, kernel, workload, knobs)
    sh, sw = workload["strides"]
    dh, dw = workload["dilation"]
    padded = pad_nchwc(data, workload["padding"])
    ic_chunk = te.reduce_axis((0, data_shape[1]), name="ic_chunk")
    kh = te.reduce_axis((0, kernel_shape[2]), name="kh")
    kw = te.reduce_axis((0, kernel_shape[3]), name="kw")
    ic_block = te.reduce_axis((0, data_shape[4]), name="ic_block")

    def body(n, oc_chunk, oh, ow, oc_block):
        pixel = padded[n, ic_chunk, oh * sh + kh * dh, ow * sw + kw * dw, ic_block]
        weight = kernel[oc_chunk, ic_chunk, kh, kw, ic_block, oc_block]
        return te.sum(pixel * weight, axis=[ic_chunk, kh, kw, ic_block])

    return te.compute(out_shape, body, name="conv2d_NCHWc", tag="conv2d_NCHWc")
