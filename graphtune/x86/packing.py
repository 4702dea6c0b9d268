"""NumPy packing of activations and weights into the blocked layouts of the kernels.

Used to feed kernels real data (tests, checks) and to pre-pack constant
weights. Shapes follow :mod:`graphtune.x86.conv2d`, :mod:`~.depthwise`, :mod:`~.dense`.

Examples
--------
>>> import numpy as np
>>> x = np.arange(2 * 8 * 3 * 3, dtype="float32").reshape(2, 8, 3, 3)
>>> pack_data(x, 4).shape
(2, 2, 3, 3, 4)
>>> bool((unpack_data(pack_data(x, 4)) == x).all())
True
"""

import numpy as np

from ..errors import LayoutError

__all__ = ["pack_data", "unpack_data", "pack_conv_kernel", "pack_depthwise_kernel", "pack_dense_weight"]


def _split(channels: int, block: int, what: str) -> int:
    if block < 1 or channels % block:
        raise LayoutError(f"block {block} does not divide the {channels} {what}")
    return channels // block


def pack_data(x: np.ndarray, block: int) -> np.ndarray:
    """``NCHW`` -> ``NCHW{block}c``: ``[N, C, H, W] -> [N, C/block, H, W, block]``.

    Examples
    --------
    >>> pack_data(np.zeros((1, 6, 2, 2)), 3).shape
    (1, 2, 2, 2, 3)
    """
    n, c, h, w = x.shape
    chunks = _split(c, block, "channels")
    return np.ascontiguousarray(x.reshape(n, chunks, block, h, w).transpose(0, 1, 3, 4, 2))


def unpack_data(x: np.ndarray) -> np.ndarray:
    """``NCHW{b}c`` -> ``NCHW``: ``[N, C/b, H, W, b] -> [N, C, H, W]``.

    Examples
    --------
    >>> unpack_data(np.zeros((1, 2, 2, 2, 3))).shape
    (1, 6, 2, 2)
    """
    n, chunks, h, w, block = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, chunks * block, h, w))


def pack_conv_kernel(w: np.ndarray, ic_bn: int, oc_bn: int) -> np.ndarray:
    """``OIHW`` -> ``OIHW{ic_bn}i{oc_bn}o``: ``[O/oc_bn, C/ic_bn, KH, KW, ic_bn, oc_bn]``.

    Examples
    --------
    >>> pack_conv_kernel(np.zeros((16, 3, 7, 7)), 3, 8).shape
    (2, 1, 7, 7, 3, 8)
    """
    o, c, kh, kw = w.shape
    oc, ic = _split(o, oc_bn, "output channels"), _split(c, ic_bn, "input channels")
    return np.ascontiguousarray(w.reshape(oc, oc_bn, ic, ic_bn, kh, kw).transpose(0, 2, 4, 5, 3, 1))


def pack_depthwise_kernel(w: np.ndarray, bn: int) -> np.ndarray:
    """Depthwise ``[C, 1, KH, KW]`` -> ``OIHW1i{bn}o``: ``[C/bn, 1, KH, KW, 1, bn]``.

    Examples
    --------
    >>> pack_depthwise_kernel(np.zeros((32, 1, 3, 3)), 16).shape
    (2, 1, 3, 3, 1, 16)
    """
    c, _, kh, kw = w.shape
    chunks = _split(c, bn, "channels")
    blocked = w.reshape(chunks, bn, 1, kh, kw).transpose(0, 2, 3, 4, 1)
    return np.ascontiguousarray(blocked[:, :, :, :, None, :])


def pack_dense_weight(w: np.ndarray, oc_bn: int) -> np.ndarray:
    """Dense ``[M, K]`` -> ``[M/oc_bn, K, oc_bn]``.

    Examples
    --------
    >>> pack_dense_weight(np.zeros((10, 4)), 5).shape
    (2, 4, 5)
    """
    m, k = w.shape
    chunks = _split(m, oc_bn, "output features")
    return np.ascontiguousarray(w.reshape(chunks, oc_bn, k).transpose(0, 2, 1))
