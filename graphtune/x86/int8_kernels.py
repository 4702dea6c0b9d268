"""The int8 conv2d as a standalone scheduled kernel: what a conv2d_int8 candidate *is*.

``main(data, kernel, bias, scale, out)``: uint8 ``NCHW{ic_bn}c`` data, the packed kernel
(:func:`graphtune.x86.int8_packing.pack_int8_kernel`), the epilogue's per-channel int32 bias and
float32 scale (:func:`~graphtune.x86.int8_packing.pack_int8_params`), and the ``out_dtype``
output ``NCHW{oc_bn}c`` — the accumulation and its requantization in one function, scheduled
by :func:`graphtune.x86.schedule_fused` (the same path a Relax-fused call of the computes of
:mod:`graphtune.x86.conv2d_int8` takes).

Examples
--------
>>> from graphtune.ops import conv2d_int8_workload
>>> wl = conv2d_int8_workload([1, 8, 6, 6], [8, 8, 1, 1], out_dtype="float32")
>>> f = conv2d_int8_func(wl, {"ic_bn": 8, "oc_bn": 8, "reg_n": 6, "unroll_kw": False, "isa": "avx2"},
...                      {"kind": "llvm", "mcpu": "haswell"})
>>> from graphtune.measure.build import arg_specs
>>> arg_specs(f)  # doctest: +NORMALIZE_WHITESPACE
[[[1, 1, 6, 6, 8], 'uint8'], [[1, 1, 1, 1, 4, 8, 2], 'int16'], [[1, 8], 'int32'],
 [[1, 8], 'float32'], [[1, 1, 6, 6, 8], 'float32']]
"""

from tvm import te, tirx

from ..errors import ModelError
from ..ops import Op
from .conv2d_int8 import param_shape, requantize
from .fused import schedule_fused
from .int8_isa import check_isa
from .specs import spec_for
from .target import TargetLike

__all__ = ["conv2d_int8_func"]


def conv2d_int8_func(workload: dict, knobs: dict, target: TargetLike = None, x_zero_point: int = 0,
                     y_zero_point: int = 0, relu: bool = False) -> tirx.PrimFunc:
    """Scheduled PrimFunc ``main(data, kernel, bias, scale, out)`` of one conv2d_int8 or
    depthwise_conv2d_int8 candidate.

    Parameters
    ----------
    workload, knobs : dict
        An int8 conv workload and its knobs (validated).
    target : Target or dict, optional
        Must have the knob ``isa``'s instruction (default: the host).
    x_zero_point, y_zero_point : int
        The activation's and the output's zero points (compile-time constants: the padding
        value and the requantization offset).
    relu : bool
        Clip the output at ``y_zero_point`` (a fused ReLU).

    Raises
    ------
    KnobError
        Invalid knobs, or a target without the instruction.
    ModelError
        A workload of no int8 op.

    Examples
    --------
    >>> from graphtune.ops import conv2d_int8_workload
    >>> wl = conv2d_int8_workload([1, 8, 6, 6], [16, 8, 3, 3])
    >>> conv2d_int8_func(wl, {"ic_bn": 8, "oc_bn": 16, "reg_n": 4, "unroll_kw": True,
    ...                       "isa": "avx512vnni"}, {"kind": "llvm", "mcpu": "haswell"})
    Traceback (most recent call last):
    ...
    graphtune.errors.KnobError: conv2d_int8 knob 'isa' = 'avx512vnni' needs ['avx512vnni', \
'avx512bw'], which the target lacks; it has: avx2
    """
    spec = spec_for(workload)
    if spec.op not in (Op.CONV2D_INT8, Op.DEPTHWISE_CONV2D_INT8):
        raise ModelError(f"conv2d_int8_func builds int8 convs, not {spec.op} workloads")
    data_shape, kernel_shape, out_shape = spec.shapes(workload, knobs)
    weight_dtype = "int8"
    if spec.op is Op.CONV2D_INT8:
        weight_dtype = check_isa(knobs["isa"], target).weight_dtype
    data = te.placeholder(data_shape, "uint8", name="data")
    kernel = te.placeholder(kernel_shape, weight_dtype, name="kernel")
    bias = te.placeholder(param_shape(out_shape), "int32", name="bias")
    scale = te.placeholder(param_shape(out_shape), "float32", name="scale")
    acc = spec.compute(data, kernel, workload, knobs, x_zero_point)
    out = requantize(acc, bias, scale, workload["out_dtype"], y_zero_point, relu)
    func = te.create_prim_func([data, kernel, bias, scale, out]).with_attr("global_symbol", "main")
    return schedule_fused(func, workload, knobs, target, spec.op)
