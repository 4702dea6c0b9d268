"""Winograd conv2d F(m x m, 3 x 3) in blocked layouts (knob ``winograd`` = m, 2 or 4).

A 3x3 conv of stride 1 computes each ``m x m`` output tile from an
``a x a`` input tile (``a = m + 2``) with ``a * a`` multiplies per input and
output channel pair instead of ``9 * m * m`` (2.25x fewer for m = 2, 4x for
m = 4), following Lavin and Gray (2016):

- input transform ``V = B^T d B`` per tile (block ``winograd_input``,
  ``[a, a, C/ic_bn, tiles, ic_bn]``, the tiles of every image of the batch),
  a spatial block reading the padded data;
- ``a * a`` matrix products over the input channels (block ``winograd_gemm``,
  ``[a, a, O/oc_bn, tiles, oc_bn]`` reduced over ``(C/ic_bn, ic_bn)``), the
  op's anchor, scheduled like a 1x1 conv over the tiles;
- output transform ``Y = A^T M A`` (block ``winograd_output``, the output
  ``[N, O/oc_bn, OH, OW, oc_bn]``), into which the elementwise epilogue folds
  (:func:`graphtune.x86.schedule.fold_conv2d`, ``schedule._schedule_conv2d_winograd``).

The kernel is transformed ahead of time (``U = G g G^T``, packed
``[a, a, O/oc_bn, C/ic_bn, ic_bn, oc_bn]``, :func:`pack_winograd_kernel`);
activations keep the direct conv's layouts ``NCHW{ic_bn}c -> NCHW{oc_bn}c``.
The transforms are written as sums over the whole tile whose coefficients
are selects of the matrices' constants: unrolling the tile positions leaves
each position only its non-zero terms (the simplifier folds products by 0
and 1). fp32 error against a float64 reference: about 1e-6 of the output's
scale for m = 2 and 1e-5 for m = 4.

Examples
--------
>>> from tvm import te
>>> from graphtune.ops import conv2d_workload
>>> wl = conv2d_workload([1, 16, 8, 8], [32, 16, 3, 3], padding=[1, 1, 1, 1])
>>> knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 4, "unroll_kw": False, "winograd": 4}
>>> winograd_shapes(wl, knobs)
([1, 1, 8, 8, 16], [6, 6, 2, 1, 16, 16], [1, 2, 8, 8, 16])
>>> d, k, _ = winograd_shapes(wl, knobs)
>>> winograd_nchwc(te.placeholder(d), te.placeholder(k), wl, knobs).shape[1]
2
"""

import functools
import math
import operator

import numpy as np
from tvm import ir, te, tirx

from ..ops import Op, output_shape
from .packing import _split

__all__ = ["WINOGRAD_TILES", "winograd_fits", "winograd_matrices", "winograd_tiles", "winograd_shapes",
           "winograd_nchwc", "pack_winograd_kernel"]

WINOGRAD_TILES = (2, 4)
"""Output tile sizes m of the Winograd transforms graphtune runs (F(2x2, 3x3), F(4x4, 3x3))."""

_MATRICES = {  # (A^T, B^T, G) of F(m, 3), Lavin & Gray (2016)
    2: ([[1, 1, 1, 0], [0, 1, -1, -1]],
        [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]]),
    4: ([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
        [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
         [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]],
        [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
         [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]),
}


def winograd_matrices(m: int) -> tuple:
    """``(A^T, B^T, G)`` of F(m x m, 3 x 3) as float64 arrays (``m x a``, ``a x a``, ``a x 3``).

    Examples
    --------
    >>> at, bt, g = winograd_matrices(2)
    >>> at.shape, bt.shape, g.shape
    ((2, 4), (4, 4), (4, 3))
    """
    return tuple(np.array(mat, dtype="float64") for mat in _MATRICES[m])


def winograd_fits(workload: dict) -> bool:
    """Whether a conv2d workload can run as Winograd F(m x m, 3 x 3): a 3x3 kernel of stride and
    dilation 1, one group.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> winograd_fits(conv2d_workload([1, 8, 8, 8], [8, 8, 3, 3], padding=[1, 1, 1, 1]))
    True
    >>> winograd_fits(conv2d_workload([1, 8, 8, 8], [8, 8, 3, 3], [2, 2], [1, 1, 1, 1]))
    False
    """
    return (list(workload["kernel"][2:]), list(workload["strides"]), list(workload["dilation"]),
            workload.get("groups", 1)) == ([3, 3], [1, 1], [1, 1], 1)


def winograd_tiles(workload: dict, m: int) -> int:
    """Output tiles of ``m x m`` over the batch (the last row and column of tiles may overhang).

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> winograd_tiles(conv2d_workload([2, 8, 14, 14], [8, 8, 3, 3], padding=[1, 1, 1, 1]), 4)
    32
    """
    n, _, oh, ow = output_shape(workload, Op.CONV2D)
    return n * math.ceil(oh / m) * math.ceil(ow / m)


def winograd_shapes(workload: dict, knobs: dict) -> tuple:
    """``(data, kernel, output)`` shapes: kernel ``[a, a, O/oc_bn, C/ic_bn, ic_bn, oc_bn]``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 8, 6, 6], [8, 8, 3, 3], padding=[1, 1, 1, 1])
    >>> winograd_shapes(wl, {"ic_bn": 8, "oc_bn": 8, "reg_n": 9, "unroll_kw": False, "winograd": 2})[1]
    [4, 4, 1, 1, 8, 8]
    """
    ib, ob, a = knobs["ic_bn"], knobs["oc_bn"], knobs["winograd"] + 2
    n, c, h, w = workload["data"]
    _, o, oh, ow = output_shape(workload, Op.CONV2D)
    return [n, c // ib, h, w, ib], [a, a, o // ob, c // ib, ib, ob], [n, o // ob, oh, ow, ob]


def _entry(matrix: np.ndarray, row, col: int, dtype: str) -> ir.Expr:
    """``matrix[row, col]`` for an index expression ``row``: a chain of selects of constants,
    which unrolling ``row`` resolves to one constant."""
    column = matrix[:, col]
    expr = tirx.const(column[-1], dtype)
    for i in range(len(column) - 2, -1, -1):
        expr = tirx.Select(row == i, tirx.const(column[i], dtype), expr)
    return expr


def _transform(left: np.ndarray, right: np.ndarray, row, col, tile) -> ir.Expr:
    """``(left X right^T)[row, col]`` of the tile ``X[r, s] = tile(r, s)``.

    A sum over ``(r, s)`` of ``left[row, r] * right[col, s] * X[r, s]`` whose
    coefficients are selects of constants: once ``row`` and ``col`` are unrolled
    the simplifier folds them, and the products by 0 and 1 with them, so each
    position keeps only its non-zero terms. (One select chain over the
    positions, each a sum, made every unrolled copy carry every position's
    sum: F(4x4, 3x3) took 5.5 s to build, mostly in TIR's common
    subexpression elimination.)
    """
    def term(r: int, s: int):
        value = tile(r, s)
        return _entry(left, row, r, value.dtype) * _entry(right, col, s, value.dtype) * value

    return functools.reduce(operator.add, (term(r, s) for r in range(left.shape[1])
                                           for s in range(right.shape[1])))


def winograd_nchwc(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict) -> te.Tensor:
    """Winograd conv2d ``NCHW{ic_bn}c`` x transformed kernel -> ``NCHW{oc_bn}c`` (see the module).

    Parameters
    ----------
    data : te.Tensor
        ``[N, C/ic_bn, H, W, ic_bn]``.
    kernel : te.Tensor
        ``[a, a, O/oc_bn, C/ic_bn, ic_bn, oc_bn]`` from :func:`pack_winograd_kernel`.
    workload, knobs : dict
        A 3x3 conv2d of stride 1 and its knobs, ``winograd`` = m (validated by the caller).

    Returns
    -------
    te.Tensor
        ``[N, O/oc_bn, OH, OW, oc_bn]``, computed by the block ``winograd_output``.

    Examples
    --------
    >>> from graphtune.ops import conv2d_workload
    >>> wl = conv2d_workload([1, 8, 4, 4], [8, 8, 3, 3], padding=[1, 1, 1, 1])
    >>> knobs = {"ic_bn": 8, "oc_bn": 8, "reg_n": 4, "unroll_kw": False, "winograd": 2}
    >>> d, k, _ = winograd_shapes(wl, knobs)
    >>> winograd_nchwc(te.placeholder(d), te.placeholder(k), wl, knobs).op.name
    'winograd_output'
    """
    m = knobs["winograd"]
    a = m + 2
    at, bt, _ = winograd_matrices(m)
    data_shape, _, out_shape = winograd_shapes(workload, knobs)
    n, chunks, h, w, ib = data_shape
    _, oc_chunks, oh, ow, ob = out_shape
    top, left = workload["padding"][:2]
    rows, cols = math.ceil(oh / m), math.ceil(ow / m)

    def pixel(i, chunk, y, x, k):  # the zero-padded input, read past its edge as zeros
        inside = tirx.all(y >= top, y < h + top, x >= left, x < w + left)
        return tirx.if_then_else(inside, data[i, chunk, y - top, x - left, k], tirx.const(0.0, data.dtype))

    padded = te.compute((n, chunks, rows * m + 2, cols * m + 2, ib), pixel, name="data_pad")

    def transform_input(eps, nu, chunk, tile, k):
        i, y, x = tile // (rows * cols), tile % (rows * cols) // cols * m, tile % cols * m
        return _transform(bt, bt, eps, nu, lambda r, s: padded[i, chunk, y + r, x + s, k])

    tiles = n * rows * cols
    inputs = te.compute((a, a, chunks, tiles, ib), transform_input, name="winograd_input")
    ic_chunk = te.reduce_axis((0, chunks), name="ic_chunk")
    ic_block = te.reduce_axis((0, ib), name="ic_block")
    products = te.compute(
        (a, a, oc_chunks, tiles, ob),
        lambda eps, nu, oc, tile, k: te.sum(inputs[eps, nu, ic_chunk, tile, ic_block]
                                            * kernel[eps, nu, oc, ic_chunk, ic_block, k],
                                            axis=[ic_chunk, ic_block]),
        name="winograd_gemm")

    def transform_output(i, oc, y, x, k):
        tile = (i * rows + y // m) * cols + x // m
        return _transform(at, at, y % m, x % m, lambda e, u: products[e, u, oc, tile, k])

    return te.compute(out_shape, transform_output, name="winograd_output")


def pack_winograd_kernel(weight: np.ndarray, m: int, ic_bn: int, oc_bn: int) -> np.ndarray:
    """``OIHW`` 3x3 weight -> ``U = G g G^T`` packed ``[a, a, O/oc_bn, C/ic_bn, ic_bn, oc_bn]``.

    Computed in float64, returned in the weight's dtype.

    Examples
    --------
    >>> pack_winograd_kernel(np.zeros((32, 16, 3, 3), "float32"), 4, 8, 16).shape
    (6, 6, 2, 2, 8, 16)
    """
    o, c, _, _ = weight.shape
    oc, ic = _split(o, oc_bn, "output channels"), _split(c, ic_bn, "input channels")
    _, _, g = winograd_matrices(m)
    a = m + 2
    u = np.einsum("er,ocrs,us->euoc", g, weight.astype("float64"), g)
    return np.ascontiguousarray(u.reshape(a, a, oc, oc_bn, ic, ic_bn).transpose(0, 1, 2, 4, 5, 3)
                                .astype(weight.dtype))
