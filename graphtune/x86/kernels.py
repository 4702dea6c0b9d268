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

from ..ops import BF16_OPS, INT8_OPS, Op
from . import bf16
from .fused import schedule_fused
from .int8_kernels import conv2d_int8_func
from .specs import spec_for
from .target import TargetLike

__all__ = ["kernel_func", "kernel_shapes"]


def kernel_shapes(workload: dict, knobs: dict, op: Op | str | None = None) -> tuple:
    """``(input shapes..., output shape)`` of the kernel, in parameter order.

    Examples
    --------
    >>> from graphtune.ops import dense_workload
    >>> kernel_shapes(dense_workload([1, 8], [4, 8]), {"oc_bn": 4, "k_bn": 8})
    ([1, 8], [1, 8, 4], [1, 4])
    """
    return spec_for(workload, op).shapes(workload, knobs)


def kernel_func(workload: dict, knobs: dict, target: TargetLike = None,
                op: Op | str | None = None) -> tirx.PrimFunc:
    """Scheduled PrimFunc ``main(data, kernel|weight, output)`` of one candidate.

    Blocked layouts as in :func:`kernel_shapes`; the compute and schedule are
    the op's :class:`~graphtune.x86.specs.OpSpec` ones, applied by
    :func:`~graphtune.x86.schedule_fused` on the bare compute (one code path
    with the fused kernels of a compiled model). An int8 op's is
    :func:`~graphtune.x86.conv2d_int8_func` (``main(data, kernel, bias, scale, out)``).

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
    spec = spec_for(workload, op)
    if spec.op in INT8_OPS:
        return conv2d_int8_func(workload, knobs, target)
    data_shape, weight_shape, _ = spec.shapes(workload, knobs)
    dtype = bf16.STORAGE if spec.op in BF16_OPS else workload["dtype"]
    data = te.placeholder(data_shape, dtype, name=spec.params[0])
    weight = te.placeholder(weight_shape, dtype, name=spec.params[1])
    out = spec.compute(data, weight, workload, knobs)
    func = te.create_prim_func([data, weight, out]).with_attr("global_symbol", "main")
    return schedule_fused(func, workload, knobs, target, spec.op)
