"""The int8 and bfloat16 dense: the conv2d_int8 (conv2d_bf16) kernel on a 1x1 map.

A batch-1 dense ``[1, K] x [M, K]`` is a conv2d_int8 of a ``[1, K, 1, 1]`` map by ``[M, K, 1, 1]``
weights. Its ``NC`` data are that map's ``NCHW{ic_bn}c`` bytes (``[1, K/ic_bn, 1, 1, ic_bn]``),
its ``NC`` output those of ``NCHW{oc_bn}c``: the layout never changes, whatever the blocks.
:func:`as_conv2d_int8` is the one place that says so; the dense_int8 spec
(:mod:`graphtune.x86.specs`) runs the conv2d_int8 compute, packing, candidates and schedule
through it, with one register tile (``reg_n`` 1).

Examples
--------
>>> from tvm import te, topi
>>> from graphtune.ops import dense_int8_workload
>>> wl = dense_int8_workload([1, 64], [24, 64], out_dtype="float32")
>>> knobs = {"ic_bn": 32, "oc_bn": 8, "isa": "avx2"}
>>> as_conv2d_int8(wl, knobs)[0]["kernel"], dense_int8_shapes(wl, knobs)
([24, 64, 1, 1], ([1, 64], [3, 2, 1, 1, 16, 8, 2], [1, 24]))
>>> acc = dense_int8_nc(te.placeholder([1, 64], "uint8"), te.placeholder([3, 2, 1, 1, 16, 8, 2], "int16"),
...                     wl, knobs)
>>> acc.op.name, [int(d) for d in acc.shape]
('conv2d_int8_NCHWc', [1, 3, 1, 1, 8])
"""

from tvm import te, topi

from ..ops import BF16_DTYPES, WEIGHT_PAIR_MAX, conv2d_int8_workload, conv2d_workload, op_of, output_shape
from .conv2d import check_tensor_shape
from .conv2d_int8 import conv2d_int8_nchwc, conv2d_int8_shapes

__all__ = ["as_conv2d_int8", "conv_knobs", "dense_int8_shapes", "dense_int8_nc", "dense_bf16"]


def conv_knobs(knobs: dict) -> dict:
    """The conv2d_int8 knobs of a dense_int8 candidate's: its blocks, instruction and ``widen`` on
    the one pixel of a 1x1 map (``reg_n`` 1, nothing to unroll).

    Examples
    --------
    >>> conv_knobs({"ic_bn": 16, "oc_bn": 8, "isa": "avx2"})
    {'ic_bn': 16, 'oc_bn': 8, 'isa': 'avx2', 'reg_n': 1, 'unroll_kw': False}
    """
    return {**knobs, "reg_n": 1, "unroll_kw": False}


def as_conv2d_int8(workload: dict, knobs: dict | None = None) -> tuple[dict, dict]:
    """``(workload, knobs)`` of the conv2d_int8 a dense_int8 workload (and candidate) runs as:
    ``[1, K, 1, 1]`` data, ``[M, K, 1, 1]`` weights, the same ``out_dtype`` and ``weight_pair_max``;
    of a dense_bf16 workload, the conv2d_bf16 of those shapes.

    Examples
    --------
    >>> from graphtune.ops import dense_int8_workload
    >>> conv, _ = as_conv2d_int8(dense_int8_workload([1, 8], [4, 8]))
    >>> conv["data"], conv["kernel"], conv["out_dtype"]
    ([1, 8, 1, 1], [4, 8, 1, 1], 'uint8')
    >>> as_conv2d_int8({"data": [1, 8], "weight": [4, 8], "dtype": "bfloat16"})[0]["dtype"]
    'bfloat16'
    """
    (n, k), (m, _) = workload["data"], workload["weight"]
    if workload["dtype"] in BF16_DTYPES:
        low = {**conv2d_workload([n, k, 1, 1], [m, k, 1, 1]), "dtype": workload["dtype"]}
        return low, conv_knobs(knobs or {})
    conv = conv2d_int8_workload([n, k, 1, 1], [m, k, 1, 1], out_dtype=workload["out_dtype"],
                                weight_pair_max=workload.get(WEIGHT_PAIR_MAX))
    return conv, conv_knobs(knobs or {})


def dense_int8_shapes(workload: dict, knobs: dict) -> tuple:
    """``(data, kernel, output)`` shapes of the int8 dense: ``[1, K]``, the conv2d_int8 kernel's
    packing of ``[M, K, 1, 1]`` (:func:`graphtune.x86.conv2d_int8_shapes`), ``[1, M]``."""
    _, kernel, _ = conv2d_int8_shapes(*as_conv2d_int8(workload, knobs))
    return list(workload["data"]), kernel, output_shape(workload, op_of(workload))


def dense_int8_nc(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict,
                  x_zero_point: int = 0) -> te.Tensor:
    """The int32 accumulator ``[1, M/oc_bn, 1, 1, oc_bn]`` of the int8 dense of uint8 ``[1, K]``
    ``data``: :func:`graphtune.x86.conv2d_int8_nchwc` on its ``NCHW{ic_bn}c`` view (a reshape
    the schedule inlines into the loads)."""
    check_tensor_shape(data, list(workload["data"]), "dense_int8 data")
    conv, knobs = as_conv2d_int8(workload, knobs)
    n, chunks, _, _, block = conv2d_int8_shapes(conv, knobs)[0]
    blocked = te.compute((n, chunks, 1, 1, block), lambda i, c, y, x, b: data[i, c * block + b],
                         name="data_nc")
    return conv2d_int8_nchwc(blocked, kernel, conv, knobs, x_zero_point)


def dense_bf16(data: te.Tensor, kernel: te.Tensor, workload: dict, knobs: dict) -> te.Tensor:
    """The float32 ``[1, M]`` output of the bfloat16 dense of ``[1, K]`` bfloat16 bits: the
    conv2d_bf16 accumulation on its ``NCHW{ic_bn}c`` view, written through an elementwise copy
    (the epilogue the schedule folds, as a dense_int8's requantization) and viewed as ``NC``.

    Examples
    --------
    >>> wl = {"data": [1, 64], "weight": [24, 64], "dtype": "bfloat16"}
    >>> knobs = {"ic_bn": 32, "oc_bn": 8, "isa": "avx512bf16"}
    >>> out = dense_bf16(te.placeholder([1, 64], "uint16"), te.placeholder([3, 2, 1, 1, 16, 8, 2], "uint16"),
    ...                  wl, knobs)
    >>> [int(d) for d in out.shape], str(out.dtype)
    ([1, 24], 'float32')
    """
    acc = dense_int8_nc(data, kernel, workload, knobs)
    out = te.compute(acc.shape, lambda *index: acc(*index), name="dense_bf16_out")
    return topi.reshape(out, output_shape(workload, op_of(workload)))
