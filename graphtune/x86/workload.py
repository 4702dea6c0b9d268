"""Workload dicts of graphtune's x86 kernels: the TVM-free schema of :mod:`graphtune.ops`.

Nothing about a workload needs TVM; this module re-exports the builders and
checks so that ``graphtune.x86`` offers them next to the kernels.

Examples
--------
>>> wl = conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
>>> str(op_of(wl)), output_shape(wl)
('conv2d', [1, 64, 56, 56])
"""

from ..ops import (
    check_workload,
    conv2d_transpose_workload,
    conv2d_workload,
    dense_workload,
    flops,
    op_of,
    output_shape,
)

__all__ = [
    "op_of", "check_workload", "output_shape", "conv2d_workload", "conv2d_transpose_workload",
    "dense_workload", "flops",
]
