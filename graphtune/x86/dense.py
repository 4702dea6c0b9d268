"""TE compute of dense (``y = x @ W.T``) with a packed weight.

The data may have rank 2 to 4 (``[..., K]``: token MLPs on ``[1, H, W, C]``);
its leading dims are rows. The weight ``[M, K]`` is packed as ``[M / oc_bn, K, oc_bn]`` so that the
``oc_bn`` outputs computed together read contiguous weights (vectorised). The
reduction block is ``dense_packed`` with spatial axes ``(..., m)`` and reduction
axis ``k``.

Examples
--------
>>> from tvm import te
>>> from graphtune.ops import dense_workload
>>> wl = dense_workload([1, 64], [10, 64])
>>> d, w, o = dense_packed_shapes(wl, {"oc_bn": 5, "k_bn": 8})
>>> w
[2, 64, 5]
>>> dense_packed(te.placeholder(d), te.placeholder(w), wl, {"oc_bn": 5, "k_bn": 8}).op.name
'dense_packed'
"""

from tvm import te

from ..ops import Op
from .conv2d import check_tensor_shape
from .knobs import DENSE_KNOBS

__all__ = ["dense_packed", "dense_packed_shapes"]


def dense_packed_shapes(workload: dict, knobs: dict) -> tuple:
    """``(data, packed weight, output)`` shapes: ``[..., K]``, ``[M/oc_bn, K, oc_bn]``, ``[..., M]``.

    Examples
    --------
    >>> from graphtune.ops import dense_workload
    >>> dense_packed_shapes(dense_workload([2, 8], [16, 8]), {"oc_bn": 16, "k_bn": 4})
    ([2, 8], [1, 8, 16], [2, 16])
    """
    DENSE_KNOBS.check(Op.DENSE, workload, knobs)
    data = list(workload["data"])
    m, k = workload["weight"]
    return data, [m // knobs["oc_bn"], k, knobs["oc_bn"]], data[:-1] + [m]


def dense_packed(data: te.Tensor, weight: te.Tensor, workload: dict, knobs: dict) -> te.Tensor:
    """Dense layer ``out[n, m] = sum_k data[n, k] * weight[m // oc_bn, k, m % oc_bn]``.

    Parameters
    ----------
    data : te.Tensor
        ``[..., K]`` (rank 2 to 4).
    weight : te.Tensor
        The packed weight ``[M / oc_bn, K, oc_bn]``.
    workload, knobs : dict

    Returns
    -------
    te.Tensor
        ``[..., M]``, computed by the block ``dense_packed``.

    Examples
    --------
    >>> from graphtune.ops import dense_workload
    >>> wl = dense_workload([1, 16], [8, 16])
    >>> d, w, o = dense_packed_shapes(wl, {"oc_bn": 8, "k_bn": 4})
    >>> out = dense_packed(te.placeholder(d), te.placeholder(w), wl, {"oc_bn": 8, "k_bn": 4})
    >>> [int(x) for x in out.shape]
    [1, 8]
    """
    data_shape, weight_shape, out_shape = dense_packed_shapes(workload, knobs)
    check_tensor_shape(data, data_shape, "dense data")
    check_tensor_shape(weight, weight_shape, "dense packed weight")
    bn = knobs["oc_bn"]
    k = te.reduce_axis((0, data_shape[-1]), name="k")
    return te.compute(
        out_shape,
        lambda *i: te.sum(data[i[:-1] + (k,)] * weight[i[-1] // bn, k, i[-1] % bn], axis=k),
        name="dense_packed",
        tag="dense_packed",
    )
