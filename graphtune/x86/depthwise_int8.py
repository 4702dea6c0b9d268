"""TE compute of the int8 depthwise conv2d (``NCHW{bn}c``), exact in int32.

uint8 activations x int8 weights packed ``OIHW1i{bn}o`` (as the fp32 depthwise conv,
:func:`graphtune.x86.packing.pack_depthwise_kernel`) accumulate in int32 (block
``depthwise_conv2d_int8_NCHWc``, the fp32 depthwise conv's axes, so its schedule
:func:`graphtune.x86.schedule.schedule_depthwise` applies). A depthwise conv sums no channels:
each lane is one channel, widened to int32 and multiplied there (no dot-product instruction;
LLVM's own vector code). Padding pixels hold the activation zero point, and the same
epilogue (:func:`graphtune.x86.conv2d_int8.requantize`) follows.

Examples
--------
>>> from tvm import te
>>> from graphtune.ops import conv2d_int8_workload
>>> wl = conv2d_int8_workload([1, 32, 8, 8], [32, 1, 3, 3], padding=[1, 1, 1, 1], groups=32)
>>> shapes = depthwise_int8_shapes(wl, {"bn": 16, "reg_n": 8})
>>> shapes
([1, 2, 8, 8, 16], [2, 1, 3, 3, 1, 16], [1, 2, 8, 8, 16])
>>> acc = depthwise_conv2d_int8_nchwc(te.placeholder(shapes[0], "uint8"), te.placeholder(shapes[1], "int8"),
...                                   wl, {"bn": 16, "reg_n": 8}, x_zero_point=9)
>>> acc.op.name, str(acc.dtype)
('depthwise_conv2d_int8_NCHWc', 'int32')
"""

from tvm import te, tirx

from ..errors import KnobError
from ..ops import Op
from .conv2d import check_tensor_shape
from .depthwise import depthwise_nchwc_shapes
from .knobs import BLOCKED_DEPTHWISE_KNOBS

__all__ = ["depthwise_int8_shapes", "depthwise_conv2d_int8_nchwc"]


def depthwise_int8_shapes(workload: dict, knobs: dict) -> tuple:
    """``(data, kernel, output)`` shapes: the fp32 depthwise conv's (knobs validated).

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> wl = conv2d_int8_workload([1, 8, 4, 4], [8, 1, 3, 3], groups=8)
    >>> depthwise_int8_shapes(wl, {"bn": 8, "reg_n": 2})[1]
    [1, 1, 3, 3, 1, 8]
    """
    BLOCKED_DEPTHWISE_KNOBS.check(Op.DEPTHWISE_CONV2D_INT8, workload, knobs)
    fp32 = {**workload, "dtype": "float32"}
    del fp32["out_dtype"]
    return depthwise_nchwc_shapes(fp32, knobs)


def depthwise_conv2d_int8_nchwc(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict,
                                x_zero_point: int = 0) -> te.Tensor:
    """The int32 accumulator ``sum(x * w)`` per channel (padding = ``x_zero_point``).

    Raises
    ------
    KnobError
        Invalid knobs, tensors of other shapes, or not uint8 data and int8 weights.

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> wl = conv2d_int8_workload([1, 8, 4, 4], [8, 1, 3, 3], groups=8)
    >>> depthwise_conv2d_int8_nchwc(te.placeholder([1, 1, 4, 4, 8]), te.placeholder([1, 1, 3, 3, 1, 8]),
    ...                             wl, {"bn": 8, "reg_n": 2})
    Traceback (most recent call last):
    ...
    graphtune.errors.KnobError: depthwise_conv2d_int8 reads uint8 data and int8 weights, got float32 and
        float32
    """
    data_shape, kernel_shape, out_shape = depthwise_int8_shapes(workload, knobs)
    check_tensor_shape(data, data_shape, "depthwise_conv2d_int8 data")
    check_tensor_shape(kernel, kernel_shape, "depthwise_conv2d_int8 kernel")
    if data.dtype != "uint8" or kernel.dtype != "int8":
        raise KnobError(f"depthwise_conv2d_int8 reads uint8 data and int8 weights, got {data.dtype} and "
                        f"{kernel.dtype}")
    if not 0 <= x_zero_point <= 255:
        raise KnobError(f"x_zero_point = {x_zero_point} is no uint8 value")
    (sh, sw), (dh, dw) = workload["strides"], workload["dilation"]
    top, left, _, _ = workload["padding"]
    h, w = workload["data"][2:]
    kh = te.reduce_axis((0, kernel_shape[2]), name="kh")
    kw = te.reduce_axis((0, kernel_shape[3]), name="kw")

    def body(n, c, oh, ow, b):
        y, x = oh * sh + kh * dh - top, ow * sw + kw * dw - left
        inside = tirx.all(y >= 0, y < h, x >= 0, x < w)
        pixel = tirx.if_then_else(inside, data[n, c, y, x, b], tirx.const(x_zero_point, "uint8"))
        return te.sum(pixel.astype("int32") * kernel[c, 0, kh, kw, 0, b].astype("int32"), axis=[kh, kw])

    return te.compute(out_shape, body, name="depthwise_conv2d_int8_NCHWc", tag="depthwise_conv2d_int8_NCHWc")
