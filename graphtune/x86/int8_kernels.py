"""The int8 kernels as standalone scheduled functions: what an int8 candidate *is*.

``main(data, kernel, bias, scale, out)``: uint8 data in the node's input layout (``NCHW{ic_bn}c``,
a dense's ``NC``), the packed kernel (:func:`graphtune.x86.int8_packing.pack_int8_kernel`), the
epilogue's per-channel int32 bias and float32 scale
(:func:`~graphtune.x86.int8_packing.pack_int8_params`), and the ``out_dtype`` output in the
node's output layout — :func:`int8_compute`, the accumulation and its requantization in one
function, scheduled by :func:`graphtune.x86.schedule_fused` (the same compute and path a compiled
model's int8 node takes).

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

from tvm import te, tirx, topi

from ..errors import ModelError
from ..ops import INT8_OPS, Op
from .conv2d_int8 import param_shape, requantize
from .fused import schedule_fused
from .int8_isa import check_isa
from .specs import spec_for
from .target import TargetLike

__all__ = ["conv2d_int8_func", "int8_compute"]


def int8_compute(data: te.Tensor, kernel: te.Tensor, bias: te.Tensor, scale: te.Tensor, workload: dict,
                 knobs: dict, op: Op | str | None = None, x_zero_point: int = 0, y_zero_point: int = 0,
                 relu: bool = False) -> te.Tensor:
    """An int8 node's TE compute: the op's exact int32 accumulation and the epilogue
    :func:`graphtune.x86.requantize` (``out_dtype`` of the workload), written in the op's output
    shape (a dense's ``[1, M]``: the bytes of its 1x1 map's ``NCHW{oc_bn}c`` accumulator, reshaped;
    a conv's real width where the accumulation computed whole tiles past it).

    Examples
    --------
    >>> from graphtune.ops import dense_int8_workload
    >>> wl = dense_int8_workload([1, 16], [8, 16], out_dtype="float32")
    >>> knobs = {"ic_bn": 16, "oc_bn": 8, "isa": "avx2"}
    >>> out = int8_compute(te.placeholder([1, 16], "uint8"), te.placeholder([1, 1, 1, 1, 8, 8, 2], "int16"),
    ...                    te.placeholder([1, 8], "int32"), te.placeholder([1, 8]), wl, knobs)
    >>> [int(d) for d in out.shape], str(out.dtype)
    ([1, 8], 'float32')
    """
    spec = spec_for(workload, op)
    acc = spec.compute(data, kernel, workload, knobs, x_zero_point)
    shape = spec.shapes(workload, knobs)[2]
    blocked = shape if len(shape) == len(acc.shape) else None  # a padded width is cut here
    out = requantize(acc, bias, scale, workload["out_dtype"], y_zero_point, relu, blocked)
    return out if [int(d) for d in out.shape] == shape else topi.reshape(out, shape)


def conv2d_int8_func(workload: dict, knobs: dict, target: TargetLike = None, x_zero_point: int = 0,
                     y_zero_point: int = 0, relu: bool = False) -> tirx.PrimFunc:
    """Scheduled PrimFunc ``main(data, kernel, bias, scale, out)`` of one conv2d_int8,
    depthwise_conv2d_int8 or dense_int8 candidate.

    Parameters
    ----------
    workload, knobs : dict
        An int8 workload and its knobs (validated).
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
'avx512bw'], which the target lacks; it has: avx2ubs, avx2
    """
    spec = spec_for(workload)
    if spec.op not in INT8_OPS:
        raise ModelError(f"conv2d_int8_func builds int8 ops ({', '.join(INT8_OPS)}), not {spec.op} workloads")
    spec.knobs.check(spec.op, workload, knobs)
    data_shape, kernel_shape, _ = spec.shapes(workload, knobs)
    weight_dtype = check_isa(knobs["isa"], target).weight_dtype if "isa" in knobs else "int8"
    data = te.placeholder(data_shape, "uint8", name="data")
    kernel = te.placeholder(kernel_shape, weight_dtype, name="kernel")
    bias = te.placeholder(param_shape(workload, knobs, spec.op), "int32", name="bias")
    scale = te.placeholder(param_shape(workload, knobs, spec.op), "float32", name="scale")
    out = int8_compute(data, kernel, bias, scale, workload, knobs, spec.op, x_zero_point, y_zero_point, relu)
    func = te.create_prim_func([data, kernel, bias, scale, out]).with_attr("global_symbol", "main")
    return schedule_fused(func, workload, knobs, target, spec.op)
