"""TE compute of the int8 conv2d (and group conv2d) in blocked layouts, with its requantizing epilogue.

uint8 activations ``NCHW{ic_bn}c`` x int8 weights packed ``OIHW{ic_bn/dot}i{oc_bn}o{dot}i``
(``dot`` and the weights' storage type come from the knob ``isa``,
:mod:`graphtune.x86.int8_isa`) accumulate exactly in int32 (block ``conv2d_int8_NCHWc``,
spatial axes ``(n, oc_chunk, oh, ow, oc_block)``, reduction axes ``(ic_chunk, kh, kw,
ic_outer, ic_inner)``). A group conv2d (``group_conv2d_int8``) is the same compute with the
block rules of :mod:`graphtune.x86.groups`: an output block reduces over the
:func:`~graphtune.x86.groups.span` of its groups' input channels only, with block-diagonal
weights (zeros between the groups) when it spans several groups. Padding pixels hold the
activation zero point ``zx``, so that every output sums ``x * w`` over all taps and the zero
point is one per-channel constant (``sum((x - zx) * w) = sum(x * w) - zx * sum(w)``, folded
into ``bias`` when the weights are packed, :func:`graphtune.x86.int8_packing.pack_int8_params`).

:func:`requantize` is the epilogue, one elementwise block over the accumulator:
``out = clip(round_half_even(float(acc + bias[oc]) * scale[oc]) + zy, lo, 255)`` as uint8
(ONNX ``QLinearConv``; ``lo = zy`` with a fused ReLU, else 0), or ``float(acc + bias[oc]) *
scale[oc]`` as float32 (dequantized, for a float consumer).

Examples
--------
>>> from tvm import te
>>> from graphtune.ops import conv2d_int8_workload
>>> wl = conv2d_int8_workload([1, 32, 14, 14], [64, 32, 3, 3], padding=[1, 1, 1, 1])
>>> knobs = {"ic_bn": 8, "oc_bn": 16, "reg_n": 7, "unroll_kw": True, "isa": "avx2"}
>>> shapes = conv2d_int8_shapes(wl, knobs)
>>> shapes
([1, 4, 14, 14, 8], [4, 4, 3, 3, 4, 16, 2], [1, 4, 14, 14, 16])
>>> acc = conv2d_int8_nchwc(te.placeholder(shapes[0], "uint8"), te.placeholder(shapes[1], "int16"),
...                         wl, knobs, x_zero_point=3)
>>> acc.op.name, str(acc.dtype)
('conv2d_int8_NCHWc', 'int32')
"""

from tvm import te, tirx

from ..errors import KnobError
from ..ops import BF16_OPS, Op, op_of, output_shape
from .conv2d import check_tensor_shape
from .groups import group_sizes, span
from .int8_isa import ISAS
from .knobs import BF16_KNOBS, INT8_KNOBS

__all__ = ["conv2d_int8_shapes", "computed_width", "flat_row", "conv2d_int8_nchwc", "conv2d_bf16",
           "requantize",
           "quantize",
           "param_shape"]


def conv2d_int8_shapes(workload: dict, knobs: dict) -> tuple:
    """``(data, kernel, output)`` shapes of the int8 (group) conv2d for ``knobs`` (validated).

    Data ``[N, C/ic_bn, H, W, ic_bn]``, kernel
    ``[O/oc_bn, span/ic_bn, KH, KW, ic_bn/dot, oc_bn, dot]`` (``span``: the input channels an
    output block reads, ``C`` for groups 1), output ``[N, O/oc_bn, OH, OW, oc_bn]``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> wl = conv2d_int8_workload([1, 4, 8, 8], [16, 4, 3, 3])
    >>> conv2d_int8_shapes(wl, {"ic_bn": 4, "oc_bn": 16, "reg_n": 6, "unroll_kw": True,
    ...                         "isa": "avx512vnni"})[1]
    [1, 1, 3, 3, 1, 16, 4]
    """
    op = op_of(workload)
    if op not in (Op.CONV2D_INT8, Op.GROUP_CONV2D_INT8, Op.CONV2D_BF16, Op.GROUP_CONV2D_BF16):
        raise KnobError(f"conv2d_int8_shapes: a {op} workload is no (group) conv2d_int8 or (group) "
                        "conv2d_bf16")
    (BF16_KNOBS if op in BF16_OPS else INT8_KNOBS).check(op, workload, knobs)
    ib, ob, dot = knobs["ic_bn"], knobs["oc_bn"], ISAS[knobs["isa"]].dot
    n, c, h, w = workload["data"]
    o, _, kh, kw = workload["kernel"]
    _, _, oh, ow = output_shape(workload, op)
    return ([n, c // ib, h, w, ib], [o // ob, span(workload, ob) // ib, kh, kw, ib // dot, ob, dot],
            [n, o // ob, oh, ow, ob])


def computed_width(workload: dict, knobs: dict) -> int:
    """Output columns the int8 conv's accumulation computes: the output width rounded up to whole
    register tiles of ``reg_n`` pixels (a tensorized tile has no guarded tail). The extra columns
    read zero-point padding and are never written out.

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> wl = conv2d_int8_workload([1, 16, 73, 73], [16, 16, 3, 3])  # 71 columns out
    >>> computed_width(wl, {"reg_n": 8}), computed_width(wl, {"reg_n": 71})
    (72, 71)
    """
    _, _, oh, ow = output_shape(workload, op_of(workload))
    rows = knobs.get("reg_n", 1) * knobs.get("pixel_tiles", 1)
    if knobs.get("flat"):
        ow = oh * flat_row(workload)
    return -(-ow // rows) * rows


def flat_row(workload: dict) -> int:
    """Pixels per row of a conv's map flattened at its padded width (knob ``flat``): output
    pixel ``(y, x)`` is flat pixel ``y * row + x``, and its tap ``(kh, kw)`` the padded input's
    flat pixel ``kh * row + kw`` after it, so one tile's rows may span rows of the map; the
    ``row - OW`` columns past each output row are computed and dropped.

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> flat_row(conv2d_int8_workload([1, 32, 7, 7], [32, 32, 3, 3], padding=[1, 1, 1, 1]))
    9
    """
    return workload["data"][3] + workload["padding"][1] + workload["padding"][3]


def param_shape(workload: dict, knobs: dict, op: Op | str | None = None) -> list:
    """Shape ``[O/block, block]`` of the per-output-channel ``bias`` and ``scale`` of an int8
    node's epilogue (``block``: the knob ``oc_bn``, or a depthwise conv's ``bn``).

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> param_shape(conv2d_int8_workload([1, 8, 4, 4], [32, 8, 1, 1]), {"oc_bn": 16})
    [2, 16]
    """
    block = knobs["oc_bn"] if "oc_bn" in knobs else knobs["bn"]
    return [output_shape(workload, op)[1] // block, block]


def _pad(data: te.Tensor, padding: list, value: int, widen: bool) -> te.Tensor:
    """``data`` with ``value`` (the zero point) around its H and W axes (``padding``: top, left,
    bottom, right), as int16 if ``widen``; ``data`` itself if neither."""
    top, left, bottom, right = padding
    if not any(padding) and not widen:
        return data
    n, c, h, w, b = (int(x) for x in data.shape)
    dtype = "int16" if widen else data.dtype

    def fetch(i, j, y, x, k):
        inside = tirx.all(y >= top, y < h + top, x >= left, x < w + left)
        pixel = data[i, j, y - top, x - left, k].astype(dtype)
        return pixel if not any(padding) else tirx.if_then_else(inside, pixel, tirx.const(value, dtype))

    return te.compute((n, c, h + top + bottom, w + left + right, b), fetch, name="data_pad")


def conv2d_int8_nchwc(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict,
                      x_zero_point: int = 0) -> te.Tensor:
    """The int32 accumulator ``sum(x * w)`` of the blocked int8 (group) conv2d (padding = ``x_zero_point``).

    Parameters
    ----------
    data : te.Tensor
        uint8 ``[N, C/ic_bn, H, W, ic_bn]``.
    kernel : te.Tensor
        ``[O/oc_bn, span/ic_bn, KH, KW, ic_bn/dot, oc_bn, dot]`` of the ``isa``'s weight type.
    workload, knobs : dict
        The conv2d_int8 (or group_conv2d_int8) workload and its knobs (validated here).
    x_zero_point : int
        The activation zero point, the value of padding pixels.

    Returns
    -------
    te.Tensor
        int32 ``[N, O/oc_bn, OH, W', oc_bn]``, computed by the block ``conv2d_int8_NCHWc``
        (``W'``: :func:`computed_width`, the output width in whole register tiles); with the
        knob ``flat``, ``[N, O/oc_bn, 1, W', oc_bn]``: ``W'`` pixels of the map flattened at
        its padded width (:func:`flat_row`).

    Raises
    ------
    KnobError
        Invalid knobs, or tensors whose shapes or types do not match them.

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> wl = conv2d_int8_workload([1, 8, 8, 8], [8, 8, 1, 1])
    >>> knobs = {"ic_bn": 8, "oc_bn": 8, "reg_n": 8, "unroll_kw": False, "isa": "avx2"}
    >>> conv2d_int8_nchwc(te.placeholder([1, 1, 8, 8, 8], "uint8"), te.placeholder([1, 1, 1, 1, 8, 8, 1]),
    ...                   wl, knobs)
    Traceback (most recent call last):
    ...
    graphtune.errors.KnobError: conv2d_int8 kernel tensor has shape [1, 1, 1, 1, 8, 8, 1] but the \
workload and knobs need [1, 1, 1, 1, 4, 8, 2]
    """
    data_shape, kernel_shape, out_shape = conv2d_int8_shapes(workload, knobs)
    check_tensor_shape(data, data_shape, "conv2d_int8 data")
    check_tensor_shape(kernel, kernel_shape, "conv2d_int8 kernel")
    isa = ISAS[knobs["isa"]]
    if data.dtype != isa.data_dtype or kernel.dtype != isa.weight_dtype:
        raise KnobError(f"conv2d_int8 with isa {isa.name!r} reads {isa.data_dtype} data and "
                        f"{isa.weight_dtype} "
                        f"weights, got {data.dtype} and {kernel.dtype} (graphtune.x86.conv2d_int8_func "
                        "builds the kernel with its parameters)")
    if not 0 <= x_zero_point <= 255:
        raise KnobError(f"x_zero_point = {x_zero_point} is no uint8 value")
    sh, sw = workload["strides"]
    dh, dw = workload["dilation"]
    ib, ob = knobs["ic_bn"], knobs["oc_bn"]
    cg, og = group_sizes(workload)
    width = computed_width(workload, knobs)
    flat = bool(knobs.get("flat"))
    if flat:
        padded, row = _flat_pad(data, workload, width, x_zero_point), flat_row(workload)
    else:
        top, left, bottom, right = workload["padding"]
        right += (width - out_shape[3]) * sw  # the columns whole tiles read past the last output
        padded = _pad(data, [top, left, bottom, right], x_zero_point, knobs.get("widen", False))
    ic_chunk = te.reduce_axis((0, kernel_shape[1]), name="ic_chunk")
    kh = te.reduce_axis((0, kernel_shape[2]), name="kh")
    kw = te.reduce_axis((0, kernel_shape[3]), name="kw")
    ic_outer = te.reduce_axis((0, kernel_shape[4]), name="ic_outer")
    ic_inner = te.reduce_axis((0, isa.dot), name="ic_inner")

    def body(n, oc_chunk, oh, ow, oc_block):
        # the first input chunk of the block's groups (0 for groups 1)
        chunk = ic_chunk if workload["groups"] == 1 else (oc_chunk * ob // og) * cg // ib + ic_chunk
        channel = ic_outer * isa.dot + ic_inner
        if flat:  # one row of flat pixels; tap (kh, kw) kh * row + kw pixels on
            pixel = padded[n, chunk, ow + kh * row + kw, channel]
        else:
            pixel = padded[n, chunk, oh * sh + kh * dh, ow * sw + kw * dw, channel]
        weight = kernel[oc_chunk, ic_chunk, kh, kw, ic_outer, oc_block, ic_inner]
        return te.sum(isa.operand(pixel) * isa.operand(weight), axis=[ic_chunk, kh, kw, ic_outer, ic_inner])

    computed = [*out_shape[:2], 1 if flat else out_shape[2], width, out_shape[4]]
    name = "conv2d_int8_NCHWc" if isa.element == "int8" else "conv2d_bf16_NCHWc"
    return te.compute(computed, body, name=name, tag=name)


def _flat_pad(data: te.Tensor, workload: dict, width: int, x_zero_point: int) -> te.Tensor:
    """``data`` padded (``x_zero_point`` around it) and flattened at its padded width
    (:func:`flat_row`): ``data_pad``, ``[N, C/ic_bn, pixels, ic_bn]``, as many zero-point pixels
    past its last row as the taps of ``width`` flat output pixels reach (a stride-1 conv)."""
    n, chunks, h, w, b = (int(x) for x in data.shape)
    kh, kw = workload["kernel"][2:]
    top, left = workload["padding"][:2]
    row = flat_row(workload)

    def fetch(i, j, p, k):
        y, x = p // row - top, p % row - left
        inside = tirx.all(y >= 0, y < h, x >= 0, x < w)
        pixel = data[i, j, tirx.max(tirx.min(y, h - 1), 0), tirx.max(tirx.min(x, w - 1), 0), k]
        return tirx.if_then_else(inside, pixel, tirx.const(x_zero_point, data.dtype))

    return te.compute((n, chunks, width + (kh - 1) * row + kw - 1, b), fetch, name="data_pad")


def conv2d_bf16(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict) -> te.Tensor:
    """The blocked bfloat16 conv2d (a ``conv2d_bf16`` workload) in its output shape: the float32
    accumulation of :func:`conv2d_int8_nchwc` on bfloat16 bits, cut to the output
    width where it computed whole register tiles past it.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload, runs_as
    >>> wl = runs_as("conv2d", conv2d_workload([1, 16, 7, 7], [32, 16, 3, 3]), {"precision": "bfloat16"})[1]
    >>> knobs = {"ic_bn": 16, "oc_bn": 32, "reg_n": 4, "unroll_kw": True, "isa": "avx512bf16"}
    >>> data, kernel = (te.placeholder(s, "uint16") for s in ([1, 1, 7, 7, 16], [1, 1, 3, 3, 8, 32, 2]))
    >>> out = conv2d_bf16(data, kernel, wl, knobs)
    >>> [int(d) for d in out.shape], str(out.dtype)
    ([1, 1, 5, 5, 32], 'float32')
    """
    out_shape = conv2d_int8_shapes(workload, knobs)[2]
    acc = conv2d_int8_nchwc(data, kernel, workload, knobs)
    if knobs.get("flat"):
        row = flat_row(workload)
        return te.compute(out_shape, lambda n, c, y, x, b: acc[n, c, 0, y * row + x, b],
                          name="conv2d_bf16_cut")
    if [int(d) for d in acc.shape] == out_shape:
        return acc
    return te.compute(out_shape, lambda *index: acc(*index), name="conv2d_bf16_cut")


def requantize(acc: te.Tensor, bias: te.Tensor, scale: te.Tensor, out_dtype: str = "uint8",
               y_zero_point: int = 0, relu: bool = False, shape: list | None = None) -> te.Tensor:
    """The epilogue of an int8 conv: ``acc + bias`` scaled per channel, requantized or dequantized.

    Parameters
    ----------
    acc : te.Tensor
        int32 ``[N, O/ob, OH, OW, ob]``.
    bias, scale : te.Tensor
        int32 and float32 ``[O/ob, ob]``: the bias with the zero-point correction folded in,
        and ``x_scale * w_scale[oc] / y_scale`` (``uint8`` out) or ``x_scale * w_scale[oc]``
        (``float32`` out).
    out_dtype : str
        ``"uint8"``: ``clip(round_half_even(v) + y_zero_point, lo, 255)`` with
        ``lo = y_zero_point`` if ``relu`` else 0; ``"float32"``: ``v`` itself.
    y_zero_point : int
    relu : bool
    shape : list, optional
        The output's shape (default: the accumulator's; narrower where the accumulation
        computed a padded width, :func:`computed_width`).

    Examples
    --------
    >>> acc = te.placeholder((1, 2, 4, 4, 8), "int32")
    >>> b, s = te.placeholder((2, 8), "int32"), te.placeholder((2, 8), "float32")
    >>> out = requantize(acc, b, s, "uint8", y_zero_point=5, relu=True)
    >>> str(out.dtype), out.op.name
    ('uint8', 'requantize')
    """
    if out_dtype not in ("uint8", "float32"):
        raise KnobError(f"requantize out_dtype {out_dtype!r}: use 'uint8' or 'float32'")
    if not 0 <= y_zero_point <= 255:
        raise KnobError(f"y_zero_point = {y_zero_point} is no uint8 value")

    def value(n, c, h, w, b):
        return (acc[n, c, h, w, b] + bias[c, b]).astype("float32") * scale[c, b]

    shape = list(acc.shape) if shape is None else shape
    if out_dtype == "float32":
        return te.compute(shape, value, name="dequantize")
    low = tirx.const(float(y_zero_point if relu else 0), "float32")
    high = tirx.const(255.0, "float32")

    def quantized(*index):
        rounded = tirx.round(value(*index)) + tirx.const(float(y_zero_point), "float32")
        return tirx.min(tirx.max(rounded, low), high).astype("uint8")

    return te.compute(shape, quantized, name="requantize")


def quantize(data: te.Tensor, scale: float, zero_point: int) -> te.Tensor:
    """ONNX ``QuantizeLinear`` to uint8 of a float32 tensor (any layout):
    ``clip(round_half_even(x / scale) + zero_point, 0, 255)``, what an int8 conv reads.

    Examples
    --------
    >>> x = te.placeholder((1, 2, 4, 4, 8), "float32")
    >>> q = quantize(x, 0.05, 128)
    >>> str(q.dtype), q.op.name
    ('uint8', 'quantize')
    """
    if not 0 <= zero_point <= 255:
        raise KnobError(f"zero_point = {zero_point} is no uint8 value")
    divisor = tirx.const(scale, "float32")
    zero = tirx.const(float(zero_point), "float32")

    def quantized(*index):
        value = tirx.round(data(*index) / divisor) + zero
        return tirx.min(tirx.max(value, tirx.const(0.0, "float32")),
                        tirx.const(255.0, "float32")).astype("uint8")

    return te.compute(data.shape, quantized, name="quantize")
