"""Max pooling without a padded copy, and average pooling on integers, in any ``NCHW[x]c`` layout.

TVM's stock max pool builds a padded copy of its input (``-inf`` borders);
read through in place, the padding becomes one branch per window element in
the innermost loop (a 3x3 pool ran at 8 to 28 times the time of copying its
output). But a max over a window is unchanged by repeating elements of the
window: clamping each row / column index into the input reads a border
element of the same window instead of the padding, so :func:`max_pool2d`
reads its input directly with two integer ``min``/``max`` per window row and
column, hoisted out of the vectorised channel loop. This holds as long as
every window overlaps the input (always with ONNX / PyTorch pads smaller than
the kernel, ceil mode included); :func:`max_pool2d` says when it does not.

TVM's average pool sums in its input's type, which overflows on integers:
:func:`avg_pool2d` averages a quantized model's stored ``uint8`` / ``int8``
exactly (wider sums, the quotient rounded half to even).

Examples
--------
>>> import numpy as np, tvm
>>> from tvm import te
>>> x = te.placeholder((1, 1, 4, 4, 8), name="x")
>>> y = max_pool2d(x, "NCHW8c", (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (1, 1, 4, 4, 8))
>>> f = tvm.compile(te.create_prim_func([x, y]), target={"kind": "llvm"})
>>> a = np.arange(128, dtype="float32").reshape(1, 1, 4, 4, 8)
>>> out = tvm.runtime.tensor(np.zeros((1, 1, 4, 4, 8), "float32"))
>>> f(tvm.runtime.tensor(a), out)
>>> float(out.numpy()[0, 0, 0, 0, 0]), float(out.numpy()[0, 0, 3, 3, 7])
(40.0, 127.0)
"""

from __future__ import annotations

from typing import Sequence

from tvm import te, tirx, topi

__all__ = ["avg_pool2d", "max_pool2d", "windows_overlap"]


def windows_overlap(size: int, out: int, kernel: int, stride: int, dilation: int, pad_before: int) -> bool:
    """True if every one of ``out`` windows along an axis of ``size`` holds an input element.

    Examples
    --------
    >>> windows_overlap(7, 4, 3, 2, 1, 1), windows_overlap(4, 3, 1, 2, 1, 1)
    (True, False)
    """
    for o in range(out):
        taps = [o * stride + k * dilation - pad_before for k in range(kernel)]
        if not any(0 <= t < size for t in taps):
            return False
    return True


def max_pool2d(x: te.Tensor, layout: str, pool_size: Sequence[int], strides: Sequence[int],
               dilation: Sequence[int], padding: Sequence[int], out_shape: Sequence[int]) -> te.Tensor:
    """Max pool of ``x`` (layout ``NCHW``, ``NHWC`` or ``NCHW{x}c``) reading clamped indices.

    Parameters
    ----------
    x : te.Tensor
        The input.
    layout : str
        Its layout; ``H`` and ``W`` name the pooled axes.
    pool_size, strides, dilation : pair of int
        Window, step and dilation along (H, W).
    padding : four ints
        ``(top, left, bottom, right)``; only top and left matter here (the
        output shape, given, accounts for the rest and for ceil mode).
    out_shape : sequence of int
        Output shape.

    Returns
    -------
    te.Tensor

    Raises
    ------
    ValueError
        If some window lies wholly in the padding (:func:`windows_overlap`)
        or the layout has no ``H`` / ``W`` axis: use TVM's pool then.

    Examples
    --------
    >>> from tvm import te
    >>> x = te.placeholder((1, 2, 8, 8, 16), name="x")
    >>> max_pool2d(x, "NCHW16c", (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), (1, 2, 4, 4, 16)).shape
    (1, 2, 4, 4, 16)
    """
    if "H" not in layout or "W" not in layout:
        raise ValueError(f"max_pool2d: layout {layout!r} has no H or W axis")
    h_axis, w_axis = layout.index("H"), layout.index("W")
    sizes = [int(x.shape[h_axis]), int(x.shape[w_axis])]
    outs = [int(out_shape[h_axis]), int(out_shape[w_axis])]
    pads = [int(padding[0]), int(padding[1])]
    for axis, name in enumerate("HW"):
        if not windows_overlap(sizes[axis], outs[axis], int(pool_size[axis]), int(strides[axis]),
                               int(dilation[axis]), pads[axis]):
            raise ValueError(f"max_pool2d: a window along {name} lies wholly in the padding")
    kh = te.reduce_axis((0, int(pool_size[0])), name="kh")
    kw = te.reduce_axis((0, int(pool_size[1])), name="kw")

    def clamp(index, axis):
        return tirx.max(tirx.min(index, sizes[axis] - 1), 0)

    def value(*i):
        index = list(i)
        index[h_axis] = clamp(i[h_axis] * int(strides[0]) + kh * int(dilation[0]) - pads[0], 0)
        index[w_axis] = clamp(i[w_axis] * int(strides[1]) + kw * int(dilation[1]) - pads[1], 1)
        return te.max(x(*index), axis=[kh, kw])

    return te.compute([int(d) for d in out_shape], value, name="pool_max", tag="pool_max")


def avg_pool2d(x: te.Tensor, layout: str, pool_size: Sequence[int], strides: Sequence[int],
               padding: Sequence[int], count_include_pad: bool, out_shape: Sequence[int]) -> te.Tensor:
    """Average pool of the integers ``x`` (``uint8`` / ``int8``; layout ``NCHW``, ``NHWC`` or
    ``NCHW{x}c``): the mean of each window rounded half to even, exactly.

    The padding counts as zeros: a window's sum is divided by the window size when
    ``count_include_pad``, else by the number of input elements in the window. That is what
    ONNX's ``DequantizeLinear -> AveragePool -> QuantizeLinear`` computes on a quantized
    tensor when the ``QuantizeLinear`` shares the scale and zero point and the padding is
    the zero point (up to the float rounding it does). The sums accumulate in 16 bits
    where the window cannot overflow them (twice the lanes per vector of 32-bit sums), and
    read the input through a zero-padding stage the schedule inlines; ``docs/int8.md`` has
    the timings (TVM's float pool stays for floats).

    Parameters
    ----------
    x : te.Tensor
        The input, ``uint8`` or ``int8``.
    layout : str
        Its layout; ``H`` and ``W`` name the pooled axes.
    pool_size, strides : pair of int
        Window and step along (H, W); no dilation, no ceil mode (``out_shape`` is the
        floor-mode shape).
    padding : four ints
        ``(top, left, bottom, right)``.
    count_include_pad : bool
        Divide by the window size (True) or by its input elements (False).
    out_shape : sequence of int
        Output shape.

    Returns
    -------
    te.Tensor

    Raises
    ------
    ValueError
        If ``x`` is not ``uint8`` / ``int8``, ``out_shape`` is not the floor-mode shape
        or the layout has no ``H`` / ``W`` axis.

    Examples
    --------
    >>> import numpy as np, tvm
    >>> from tvm import te
    >>> x = te.placeholder((1, 1, 3, 3, 4), name="x", dtype="uint8")
    >>> y = avg_pool2d(x, "NCHW4c", (2, 2), (1, 1), (0, 0, 0, 0), True, (1, 1, 2, 2, 4))
    >>> f = tvm.compile(te.create_prim_func([x, y]), target={"kind": "llvm"})
    >>> a = np.array([1, 2, 3, 4, 5, 6, 7, 8, 10], "uint8").reshape(1, 1, 3, 3, 1).repeat(4, -1)
    >>> out = tvm.runtime.tensor(np.zeros((1, 1, 2, 2, 4), "uint8"))
    >>> f(tvm.runtime.tensor(a), out)
    >>> out.numpy()[0, 0, :, :, 0].tolist()  # 3.0, 4.0, 6.0, 7.25
    [[3, 4], [6, 7]]
    """
    if x.dtype not in ("uint8", "int8"):
        raise ValueError(f"avg_pool2d: {x.dtype} input; it pools uint8 / int8 (TVM's pool floats)")
    if "H" not in layout or "W" not in layout:
        raise ValueError(f"avg_pool2d: layout {layout!r} has no H or W axis")
    axes = (layout.index("H"), layout.index("W"))
    window = [int(k) for k in pool_size]
    steps = [int(s) for s in strides]
    before = [int(padding[0]), int(padding[1])]
    after = [int(padding[2]), int(padding[3])]
    sizes = [int(x.shape[axis]) for axis in axes]
    for a, name in enumerate("HW"):
        floor_out = (sizes[a] + before[a] + after[a] - window[a]) // steps[a] + 1
        if int(out_shape[axes[a]]) != floor_out:
            raise ValueError(f"avg_pool2d: output {name} {int(out_shape[axes[a]])} is not the "
                             f"floor-mode size {floor_out}")
    pad_before, pad_after = [0] * len(x.shape), [0] * len(x.shape)
    for a, axis in enumerate(axes):
        pad_before[axis], pad_after[axis] = before[a], after[a]
    padded = topi.nn.pad(x, pad_before, pad_after, name="pad_temp")
    largest = window[0] * window[1] * (255 if x.dtype == "uint8" else 128)
    acc = ("uint16" if x.dtype == "uint8" else "int16") if largest < 2 ** 15 else "int32"
    kh = te.reduce_axis((0, window[0]), name="kh")
    kw = te.reduce_axis((0, window[1]), name="kw")

    def total(*i):
        index = list(i)
        index[axes[0]] = i[axes[0]] * steps[0] + kh
        index[axes[1]] = i[axes[1]] * steps[1] + kw
        return te.sum(padded(*index).astype(acc), axis=[kh, kw])

    sums = te.compute([int(d) for d in out_shape], total, name="pool_sum")

    def count(i: Sequence) -> tirx.PrimExpr:
        if count_include_pad:
            return tirx.const(window[0] * window[1], acc)
        extents = []
        for a, axis in enumerate(axes):
            start = i[axis] * steps[a] - before[a]
            extents.append(tirx.min(start + window[a], sizes[a]) - tirx.max(start, 0))
        return tirx.max(extents[0] * extents[1], 1).astype(acc)

    def average(*i):
        n = count(i)
        quotient, remainder = tirx.floordiv(sums(*i), n), tirx.floormod(sums(*i), n)
        up = tirx.any(remainder * 2 > n, tirx.all(remainder * 2 == n, tirx.floormod(quotient, 2) == 1))
        return (quotient + up.astype(acc)).astype(x.dtype)

    return te.compute([int(d) for d in out_shape], average, name="pool_avg", tag="pool_avg")
