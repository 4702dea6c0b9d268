"""Emit a conv2d (depthwise, group) or dense whose candidate runs in bfloat16 as graphtune's bfloat16 kernel.

A conv2d (depthwise, group) or batch-1 dense node tuned with bfloat16 allowed may run in it (knob
``"precision": "bfloat16"``, :func:`graphtune.ops.runs_as`): its plan's op is ``conv2d_bf16``
(``depthwise_conv2d_bf16``, ``group_conv2d_bf16``, ``dense_bf16``). The node then runs as

1. ``bfloat16_rounding``: its float32 input, in the node's input layout, rounded to bfloat16
   (:func:`graphtune.x86.bf16.convert`; an elementwise function, which FuseOps may fuse into
   the producer or into the conv's padding pass); an RGB stem's plain ``NCHW`` input gets a
   zero fourth channel on the way into its blocked layout (``model_channels``);
2. the bfloat16 conv, one ``call_tir`` tagged with the node
   (:data:`~graphtune.compiler.plan.NODE_ATTR`): float32 sums of the bfloat16 products, float32
   out in the node's output layout, the weights rounded to bfloat16 and packed as its ``isa``
   reads them.

What follows the conv in the model (bias, ReLU, residual add) stays float32 and fuses into the
kernel's epilogue as for a float32 node. A tensor a bfloat16 node has rounded is read by its
elementwise readers as those bits widened (:func:`graphtune.x86.bf16.widen`; the rewrite's rule),
so its producer writes it once, in bfloat16.

Examples
--------
>>> import numpy as np
>>> from tvm import relax
>>> from graphtune.compiler.plan import NodePlan
>>> from graphtune.ops import conv2d_workload, runs_as
>>> wl = runs_as("conv2d", conv2d_workload([1, 16, 4, 4], [16, 16, 1, 1]), {"precision": "bfloat16"})[1]
>>> knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 4, "unroll_kw": False, "isa": "avx512bf16"}
>>> plan = NodePlan("c", "conv2d_bf16", wl, knobs, "NCHW16c", "NCHW16c", None)
>>> bb = relax.BlockBuilder()
>>> x = relax.Var("x", relax.TensorType([1, 1, 4, 4, 16], "float32"))
>>> with bb.function("main", [x]):
...     out, kernel = emit_bf16(bb, rounding(bb, x, plan), np.ones((16, 16, 1, 1), "float32"), plan)
...     _ = bb.emit_func_output(out)
>>> kernel.value.numpy().dtype, sorted(gv.name_hint for gv in bb.get().get_global_vars())
(dtype('uint16'), ['bfloat16_rounding', 'gt_c', 'main'])
"""

from __future__ import annotations

import re

import numpy as np
from tvm import relax
from tvm.ir.expr import Constant

from .. import x86
from ..ops import MODEL_CHANNELS
from .plan import NODE_ATTR, NodePlan

__all__ = ["rounding", "rounding_key", "emit_bf16"]


def rounding(bb: relax.BlockBuilder, data: relax.Expr, plan: NodePlan) -> relax.Expr:
    """Emit the conversion of a bfloat16 node's float32 input ``data`` (in the node's input
    layout) to what its kernel reads; the rewrite emits it once per tensor and layout, whatever
    the number of bfloat16 nodes reading it (an inception block's branches).

    Returns
    -------
    relax.Expr
        The emitted bfloat16 bits (``uint16``).
    """
    blocked = list(rounding_key(plan)) or None  # an RGB stem's padded blocked shape
    return bb.emit(bb.call_te(x86.bf16.convert, data, blocked, primfunc_name_hint="bfloat16_rounding"),
                   name_hint=f"{plan.name}_input_bf16")


def rounding_key(plan: NodePlan) -> tuple:
    """What makes two nodes' conversions of one tensor in one layout differ: the padded shape of an
    RGB stem's (:func:`rounding`), else nothing."""
    if MODEL_CHANNELS not in plan.workload:
        return ()
    return tuple(x86.spec_of(plan.op).shapes(plan.workload, plan.knobs)[0])


def emit_bf16(bb: relax.BlockBuilder, converted: relax.Expr, weight: np.ndarray,
              plan: NodePlan) -> tuple[relax.Expr, Constant]:
    """The node's bfloat16 kernel call (see the module docstring).

    Parameters
    ----------
    bb : relax.BlockBuilder
        Inside the function being rewritten.
    converted : relax.Expr
        The node's input as its kernel reads it (:func:`rounding`).
    weight : np.ndarray
        The node's float32 weights: a conv's ``OIHW``, a dense's ``[M, K]``.
    plan : NodePlan
        A plan of a bfloat16 op (:data:`graphtune.ops.BF16_OPS`).

    Returns
    -------
    relax.Expr
        The kernel's call (float32, the node's output layout), not yet emitted.
    Constant
        The packed kernel, the node's anchor.
    """
    op, knobs, workload = plan.op, plan.knobs, plan.workload
    kernel = relax.const(x86.pack_weight(weight.astype(np.float32), workload, knobs, op))
    call = bb.call_te(x86.spec_of(op).compute, converted, kernel, workload, knobs,
                      primfunc_name_hint=f"gt_{re.sub(r'[^0-9A-Za-z_]', '_', plan.name)}",
                      primfunc_attrs={NODE_ATTR: plan.name})
    return call, kernel
