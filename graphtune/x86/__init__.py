"""graphtune's x86 kernels: targets, workloads, knob spaces, TE computes and schedules.

TVM 0.27 has no x86 schedules; graphtune owns them. A *workload* dict
describes an op instance (:mod:`graphtune.ops`), a *knobs* dict one schedule
for it (and so its layouts); one :class:`OpSpec` per op kind
(:data:`SPECS`, :mod:`graphtune.x86.specs`) holds the op's compute, knob
space, layouts, candidates, weight packing and schedule. :func:`kernel_func` is a candidate
ready to build and time, :func:`schedule_fused` the same schedule applied inside a Relax-fused
PrimFunc, :func:`transform_func` / :func:`schedule_transform` the layout
transforms between blocked layouts.

Examples
--------
>>> import graphtune.x86 as x86
>>> wl = x86.conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
>>> x86.op_of(wl)
'conv2d'
>>> knobs = x86.default_knobs(wl, block=16, target={"kind": "llvm", "mcpu": "znver5"})
>>> x86.layouts_of(wl, knobs)
('NCHW16c', 'NCHW16c')
"""

from ..ops import (
    check_workload,
    conv2d_int8_workload,
    conv2d_transpose_workload,
    conv2d_workload,
    dense_int8_workload,
    dense_workload,
    flops,
    op_of,
    output_shape,
)
from . import amx, bf16, lowering
from .candidates import MAX_BLOCK, candidates, default_knobs, tile_variants
from .conv2d import conv2d_nchwc, conv2d_nchwc_shapes
from .conv2d_int8 import conv2d_bf16, conv2d_int8_nchwc, conv2d_int8_shapes, param_shape, quantize, requantize
from .conv2d_transpose import (
    conv2d_transpose_nchwc,
    conv2d_transpose_nchwc_shapes,
    pack_conv2d_transpose_kernel,
)
from .dense import dense_packed, dense_packed_shapes
from .dense_int8 import as_conv2d_int8, dense_int8_nc, dense_int8_shapes
from .depthwise import depthwise_conv2d_bf16, depthwise_conv2d_nchwc, depthwise_nchwc_shapes
from .depthwise_int8 import depthwise_conv2d_int8_nchwc, depthwise_int8_shapes
from .fused import anchor_domain, schedule_fused
from .group_conv import group_conv2d_nchwc, group_conv_nchwc_shapes, pack_group_kernel
from .int8_isa import ISAS, isa_of, isas_of
from .int8_kernels import conv2d_int8_func, int8_compute
from .int8_packing import conv2d_int8_reference, pack_int8_kernel, pack_int8_params
from .kernels import kernel_func, kernel_shapes
from .packing import pack_conv_kernel, pack_data, pack_dense_weight, pack_depthwise_kernel, unpack_data
from .schedule import schedule_elementwise
from .specs import KNOBS, SPECS, OpSpec, check_knobs, layouts_of, pack_weight, spec_of
from .target import host_target, num_threads, target_key, vector_lanes
from .transform import layout_transform, schedule_transform, transform_func, transform_shape

__all__ = [
    "ISAS",
    "amx",
    "bf16",
    "lowering",
    "conv2d_bf16",
    "KNOBS",
    "MAX_BLOCK",
    "OpSpec",
    "SPECS",
    "anchor_domain",
    "as_conv2d_int8",
    "candidates",
    "check_knobs",
    "check_workload",
    "conv2d_int8_func",
    "conv2d_int8_nchwc",
    "conv2d_int8_reference",
    "conv2d_int8_shapes",
    "conv2d_int8_workload",
    "conv2d_nchwc",
    "conv2d_nchwc_shapes",
    "conv2d_transpose_nchwc",
    "conv2d_transpose_nchwc_shapes",
    "conv2d_transpose_workload",
    "conv2d_workload",
    "default_knobs",
    "dense_int8_nc",
    "dense_int8_shapes",
    "dense_int8_workload",
    "dense_packed",
    "dense_packed_shapes",
    "dense_workload",
    "depthwise_conv2d_bf16",
    "depthwise_conv2d_int8_nchwc",
    "depthwise_conv2d_nchwc",
    "depthwise_int8_shapes",
    "depthwise_nchwc_shapes",
    "flops",
    "group_conv2d_nchwc",
    "group_conv_nchwc_shapes",
    "host_target",
    "int8_compute",
    "isa_of",
    "isas_of",
    "kernel_func",
    "kernel_shapes",
    "layout_transform",
    "layouts_of",
    "num_threads",
    "op_of",
    "output_shape",
    "pack_conv2d_transpose_kernel",
    "pack_conv_kernel",
    "pack_data",
    "pack_dense_weight",
    "pack_depthwise_kernel",
    "pack_group_kernel",
    "pack_int8_kernel",
    "pack_int8_params",
    "pack_weight",
    "param_shape",
    "quantize",
    "requantize",
    "schedule_elementwise",
    "schedule_fused",
    "schedule_transform",
    "spec_of",
    "target_key",
    "tile_variants",
    "transform_func",
    "transform_shape",
    "unpack_data",
    "vector_lanes",
]
