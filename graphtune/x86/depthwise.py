"""TE compute of depthwise conv2d in ``NCHW{bn}c`` (channel multiplier 1), float32 or bfloat16.

One optional padding stage ``data_pad`` and one reduction block
``depthwise_conv2d_NCHWc`` with spatial axes ``(n, c_chunk, oh, ow, c_block)``
and reduction axes ``(kh, kw)``. The kernel is ``OIHW1i{bn}o``:
``[C/bn, 1, KH, KW, 1, bn]``. The bfloat16 conv (:func:`depthwise_conv2d_bf16`) reads its data
and kernel as bfloat16 bits and widens each value where it multiplies it (exact); products and
sums are float32, as the float32 conv's.

Examples
--------
>>> from tvm import te
>>> from graphtune.ops import conv2d_workload
>>> wl = conv2d_workload([1, 32, 8, 8], [32, 1, 3, 3], padding=[1, 1, 1, 1], groups=32)
>>> d, k, o = depthwise_nchwc_shapes(wl, {"bn": 16, "reg_n": 8})
>>> depthwise_conv2d_nchwc(te.placeholder(d), te.placeholder(k), wl, {"bn": 16, "reg_n": 8}).op.name
'depthwise_conv2d_NCHWc'
"""

from typing import Callable

from tvm import te, tirx

from ..errors import KnobError
from ..ops import Op, output_shape
from . import bf16
from .conv2d import check_tensor_shape, pad_nchwc
from .knobs import DEPTHWISE_KNOBS

__all__ = ["depthwise_conv2d_nchwc", "depthwise_conv2d_bf16", "depthwise_nchwc_shapes"]


def depthwise_nchwc_shapes(workload: dict, knobs: dict) -> tuple:
    """``(data, kernel, output)`` shapes of the blocked depthwise conv for ``knobs``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 32, 8, 8], [32, 1, 3, 3], groups=32)
    >>> depthwise_nchwc_shapes(wl, {"bn": 8, "reg_n": 6})
    ([1, 4, 8, 8, 8], [4, 1, 3, 3, 1, 8], [1, 4, 6, 6, 8])
    """
    DEPTHWISE_KNOBS.check(Op.DEPTHWISE_CONV2D, {**workload, "dtype": "float32"}, knobs)
    bn = knobs["bn"]
    n, c, h, w = workload["data"]
    _, _, kh, kw = workload["kernel"]
    _, _, oh, ow = output_shape(workload, Op.DEPTHWISE_CONV2D)
    return [n, c // bn, h, w, bn], [c // bn, 1, kh, kw, 1, bn], [n, c // bn, oh, ow, bn]


def depthwise_conv2d_nchwc(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict) -> te.Tensor:
    """Depthwise conv2d ``NCHW{bn}c`` x ``OIHW1i{bn}o`` -> ``NCHW{bn}c``.

    Parameters
    ----------
    data : te.Tensor
        ``[N, C/bn, H, W, bn]``.
    kernel : te.Tensor
        ``[C/bn, 1, KH, KW, 1, bn]``.
    workload, knobs : dict
        A depthwise workload (``groups == C == O``) and its knobs.

    Returns
    -------
    te.Tensor
        ``[N, C/bn, OH, OW, bn]`` computed by the block ``depthwise_conv2d_NCHWc``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 8, 6, 6], [8, 1, 3, 3], groups=8)
    >>> d, k, o = depthwise_nchwc_shapes(wl, {"bn": 8, "reg_n": 4})
    >>> out = depthwise_conv2d_nchwc(te.placeholder(d), te.placeholder(k), wl, {"bn": 8, "reg_n": 4})
    >>> [int(x) for x in out.shape] == o
    True
    """
    return _depthwise(data, kernel, workload, knobs, lambda value: value)


def depthwise_conv2d_bf16(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict) -> te.Tensor:
    """Depthwise conv2d of bfloat16 bits (``uint16``) data and kernel, float32 out: each value
    widened where it is multiplied (:func:`graphtune.x86.bf16.to_float32`), float32 sums.

    Raises
    ------
    KnobError
        Invalid knobs, tensors of other shapes, or data or kernel not ``uint16``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 8, 6, 6], [8, 1, 3, 3], groups=8)
    >>> d, k, o = depthwise_nchwc_shapes(wl, {"bn": 8, "reg_n": 4})
    >>> out = depthwise_conv2d_bf16(te.placeholder(d, "uint16"), te.placeholder(k, "uint16"), wl,
    ...                             {"bn": 8, "reg_n": 4})
    >>> str(out.dtype), out.op.name
    ('float32', 'depthwise_conv2d_bf16_NCHWc')
    """
    if data.dtype != bf16.STORAGE or kernel.dtype != bf16.STORAGE:
        raise KnobError(f"depthwise_conv2d_bf16 reads bfloat16 bits ({bf16.STORAGE}) data and kernel, got "
                        f"{data.dtype} and {kernel.dtype}")
    return _depthwise(data, kernel, workload, knobs, bf16.to_float32, "depthwise_conv2d_bf16_NCHWc")


def _depthwise(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict,
               value: Callable[[tirx.Expr], tirx.Expr], name: str = "depthwise_conv2d_NCHWc") -> te.Tensor:
    """The blocked depthwise conv, each data and kernel element read as ``value`` of it."""
    data_shape, kernel_shape, out_shape = depthwise_nchwc_shapes(workload, knobs)
    check_tensor_shape(data, data_shape, "depthwise data")
    check_tensor_shape(kernel, kernel_shape, "depthwise kernel")
    sh, sw = workload["strides"]
    dh, dw = workload["dilation"]
    padded = pad_nchwc(data, workload["padding"])
    kh = te.reduce_axis((0, kernel_shape[2]), name="kh")
    kw = te.reduce_axis((0, kernel_shape[3]), name="kw")

    def body(n, c_chunk, oh, ow, c_block):
        pixel = value(padded[n, c_chunk, oh * sh + kh * dh, ow * sw + kw * dw, c_block])
        return te.sum(pixel * value(kernel[c_chunk, 0, kh, kw, 0, c_block]), axis=[kh, kw])

    return te.compute(out_shape, body, name=name, tag=name)
