"""NumPy side of the int8 conv2d: weight packing, epilogue constants, and the reference.

- :func:`pack_int8_kernel`: symmetric int8 ``OIHW`` weights as the ``isa`` reads them;
- :func:`pack_int8_params`: the epilogue's per-channel ``bias`` (the quantized bias minus
  ``x_zero_point * sum(w)``, exact in int32) and ``scale`` (float32, computed as ONNX Runtime
  does: ``x_scale * w_scale[oc] / y_scale``, or ``x_scale * w_scale[oc]`` for a float output);
- :func:`conv2d_int8_reference`: the integer math of ONNX ``QLinearConv`` in int64, the
  definition the kernels are bit-exact against.

Examples
--------
>>> import numpy as np
>>> w = np.arange(-8, 8, dtype="int8").reshape(4, 4, 1, 1)
>>> pack_int8_kernel(w, 4, 4, "avx2").shape
(1, 1, 1, 1, 2, 4, 2)
>>> bias, scale = pack_int8_params(w, None, 10, 0.5, 0.25, 0.125, 4)
>>> bias.tolist(), scale.tolist()
([[260, 100, -60, -220]], [[1.0, 1.0, 1.0, 1.0]])
"""

from __future__ import annotations

import numpy as np

from ..errors import LayoutError
from . import bf16
from .int8_isa import ISAS

__all__ = ["pack_int8_kernel", "pack_int8_params", "conv2d_int8_reference"]


def _blocks(channels: int, block: int, what: str) -> int:
    if block < 1 or channels % block:
        raise LayoutError(f"block {block} does not divide the {channels} {what}")
    return channels // block


def pack_int8_kernel(w: np.ndarray, ic_bn: int, oc_bn: int, isa: str) -> np.ndarray:
    """int8 ``OIHW`` -> ``[O/oc_bn, C/ic_bn, KH, KW, ic_bn/dot, oc_bn, dot]`` in the ``isa``'s type
    (a bfloat16 ``isa``: float32 ``OIHW`` rounded to bfloat16, :mod:`graphtune.x86.bf16`).

    Examples
    --------
    >>> k = pack_int8_kernel(np.ones((16, 8, 3, 3), "int8"), 8, 16, "avx512vnni")
    >>> k.shape, k.dtype.name
    ((1, 1, 3, 3, 2, 16, 4), 'int8')
    >>> k = pack_int8_kernel(np.ones((16, 8, 3, 3), "float32"), 8, 16, "avx512bf16")
    >>> k.shape, k.dtype.name, hex(k.flat[0])
    ((1, 1, 3, 3, 4, 16, 2), 'uint16', '0x3f80')
    """
    spec = ISAS[isa]
    o, c, kh, kw = w.shape
    oc, ic = _blocks(o, oc_bn, "output channels"), _blocks(c, ic_bn, "input channels")
    if ic_bn % spec.dot:
        raise LayoutError(f"input channel block {ic_bn} is no multiple of {spec.dot} (isa {isa})")
    values = bf16.np_from_float32(w) if spec.element == "bfloat16" else w.astype(spec.weight_dtype)
    blocked = values.reshape(oc, oc_bn, ic, ic_bn // spec.dot, spec.dot, kh, kw)
    return np.ascontiguousarray(blocked.transpose(0, 2, 5, 6, 3, 1, 4))


def pack_int8_params(w: np.ndarray, bias: np.ndarray | None, x_zero_point: int, x_scale: float,
                     w_scale: float | np.ndarray, y_scale: float | None, oc_bn: int) -> tuple:
    """The epilogue's int32 ``bias`` and float32 ``scale``, both ``[O/oc_bn, oc_bn]``.

    Parameters
    ----------
    w : np.ndarray
        The int8 ``OIHW`` weights (their sums carry the activation zero point).
    bias : np.ndarray or None
        The int32 quantized bias (scale ``x_scale * w_scale``), or None.
    x_zero_point, x_scale : int, float
        The activation's quantization.
    w_scale : float or np.ndarray
        Per-tensor or per-output-channel weight scales (symmetric weights: zero points 0).
    y_scale : float or None
        The output scale (uint8 output), or None for a float32 (dequantized) output.
    oc_bn : int

    Examples
    --------
    >>> w = np.ones((2, 3, 1, 1), "int8")
    >>> b, s = pack_int8_params(w, np.array([7, -7], "int32"), 1, 0.5, np.array([1.0, 2.0]), None, 2)
    >>> b.tolist(), s.tolist()
    ([[4, -10]], [[0.5, 1.0]])
    """
    o = w.shape[0]
    sums = w.astype(np.int64).reshape(o, -1).sum(axis=1)
    total = (np.zeros(o, np.int64) if bias is None else bias.astype(np.int64)) - int(x_zero_point) * sums
    if np.abs(total).max(initial=0) >= 2**31:
        raise LayoutError("bias - x_zero_point * sum(w) overflows int32")
    scale = np.float32(x_scale) * np.broadcast_to(np.asarray(w_scale, np.float32), (o,))
    if y_scale is not None:
        scale = scale / np.float32(y_scale)
    chunks = _blocks(o, oc_bn, "output channels")
    return total.astype(np.int32).reshape(chunks, oc_bn), scale.astype(np.float32).reshape(chunks, oc_bn)


def conv2d_int8_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, x_zero_point: int,
                          scale: np.ndarray, workload: dict, y_zero_point: int = 0,
                          relu: bool = False) -> np.ndarray:
    """ONNX ``QLinearConv`` of uint8 ``x`` (NCHW) and int8 ``w`` (OIHW; ``[O, C/groups, KH, KW]``
    for a grouped or depthwise workload), in integers (NumPy).

    ``acc = sum((x - x_zero_point) * w) + bias`` exactly (int64, padding = ``x_zero_point``),
    then ``float32(acc) * scale`` per output channel (``scale``: ``[O]`` float32), dequantized
    when ``workload["out_dtype"]`` is float32, else rounded half to even, ``+ y_zero_point``,
    clipped to ``[y_zero_point if relu else 0, 255]`` as uint8.

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> wl = conv2d_int8_workload([1, 1, 2, 2], [1, 1, 1, 1])
    >>> x = np.array([[[[0, 1], [2, 255]]]], "uint8")
    >>> conv2d_int8_reference(x, np.full((1, 1, 1, 1), -3, "int8"), None, 1, np.float32([0.5]), wl,
    ...                       y_zero_point=128).ravel().tolist()
    [130, 128, 126, 0]
    """
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    (sh, sw), (dh, dw) = workload["strides"], workload["dilation"]
    top, left, bottom, right = workload["padding"]
    shifted = x.astype(np.int64) - int(x_zero_point)
    padded = np.zeros((n, c, h + top + bottom, wd + left + right), np.int64)
    padded[:, :, top:top + h, left:left + wd] = shifted
    oh = (h + top + bottom - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + left + right - (kw - 1) * dw - 1) // sw + 1
    groups = workload["groups"]
    cg, og = c // groups, o // groups
    acc = np.zeros((n, groups, og, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            window = padded[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
            taps = w[:, :, i, j].astype(np.int64).reshape(groups, og, cg)
            acc += np.einsum("ngchw,goc->ngohw", window.reshape(n, groups, cg, oh, ow), taps)
    acc = acc.reshape(n, o, oh, ow)
    if bias is not None:
        acc += bias.astype(np.int64)[None, :, None, None]
    value = acc.astype(np.int32).astype(np.float32) * scale.astype(np.float32)[None, :, None, None]
    if workload["out_dtype"] == "float32":
        return value
    low = y_zero_point if relu else 0
    return np.clip(np.rint(value) + np.float32(y_zero_point), low, 255).astype(np.uint8)
