"""Standalone scheduled kernels: what a candidate *is*, ready to build and time.

Examples
--------
>>> import graphtune.x86 as x86
>>> wl = x86.conv2d_workload([1, 8, 6, 6], [8, 8, 1, 1])
>>> f = x86.kernel_func(wl, {"ic_bn": 8, "oc_bn": 8, "reg_n": 6, "unroll_kw": False})
>>> f.attrs["global_symbol"]
'main'
"""

from tvm import te, tirx

from .conv2d import conv2d_nchwc, conv2d_nchwc_shapes
from .conv2d_transpose import conv2d_transpose_nchwc, conv2d_transpose_nchwc_shapes
from .dense import dense_packed, dense_packed_shapes
from .depthwise import depthwise_conv2d_nchwc, depthwise_nchwc_shapes
from .group_conv import group_conv2d_nchwc, group_conv_nchwc_shapes
from .schedule import schedule_fused
from .target import TargetLike
from .workload import op_of

__all__ = ["kernel_func", "kernel_shapes"]

_OPS = {
    "conv2d": (conv2d_nchwc_shapes, conv2d_nchwc, ("data", "kernel")),
    "conv2d_transpose": (conv2d_transpose_nchwc_shapes, conv2d_transpose_nchwc, ("data", "kernel")),
    "depthwise_conv2d": (depthwise_nchwc_shapes, depthwise_conv2d_nchwc, ("data", "kernel")),
    "group_conv2d": (group_conv_nchwc_shapes, group_conv2d_nchwc, ("data", "kernel")),
    "dense": (dense_packed_shapes, dense_packed, ("data", "weight")),
}


def kernel_shapes(workload: dict, knobs: dict) -> tuple:
    """``(input shapes..., output shape)`` of the kernel, in parameter order.

    Examples
    --------
    >>> from graphtune.x86.workload import dense_workload
    >>> kernel_shapes(dense_workload([1, 8], [4, 8]), {"oc_bn": 4, "k_bn": 8})
    ([1, 8], [1, 8, 4], [1, 4])
    """
    return _OPS[op_of(workload)][0](workload, knobs)


def kernel_func(workload: dict, knobs: dict, target: TargetLike = None) -> tirx.PrimFunc:
    """Scheduled PrimFunc ``main(data, kernel|weight, output)`` of one candidate.

    Blocked layouts as in :func:`kernel_shapes`; the schedule is
    :func:`~graphtune.x86.schedule_fused` on the bare compute (one code path
    with the fused kernels of a compiled model).

    Raises
    ------
    KnobError
        Invalid knobs (nothing is built).
    ModelError
        Invalid or unsupported workload.

    Examples
    --------
    >>> import graphtune.x86 as x86
    >>> wl = x86.conv2d_workload([1, 32, 8, 8], [32, 1, 3, 3], padding=[1, 1, 1, 1], groups=32)
    >>> [p.name for p in x86.kernel_func(wl, {"bn": 16, "reg_n": 8}).params]
    ['data', 'kernel', 'depthwise_conv2d_NCHWc']
    """
    shapes, compute, names = _OPS[op_of(workload)]
    data_shape, weight_shape, _ = shapes(workload, knobs)
    dtype = workload["dtype"]
    data = te.placeholder(data_shape, dtype, name=names[0])
    weight = te.placeholder(weight_shape, dtype, name=names[1])
    out = compute(data, weight, workload, knobs)
    func = te.create_prim_func([data, weight, out]).with_attr("global_symbol", "main")
    return schedule_fused(func, workload, knobs, target)
