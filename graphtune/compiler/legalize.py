"""Lower a rewritten Relax module to TIR with graphtune's x86 kernels.

Every layout node's conv2d / conv2d_transpose / matmul (found by its weight constant, see
:func:`graphtune.compiler.rewrite.rewrite`) is legalized with the matching
:mod:`graphtune.x86` TE compute and tagged with the ``graphtune.node``
attribute; everything else goes through TVM's stock ``LegalizeOps``. A blocked
conv2d that is not a planned node is an error, never silently left unlowered.
``FuseOps``/``FuseTIR`` then fuse each conv with its bias add, relu and
residual add, and each fused PrimFunc holding a node's conv (or dense) is
scheduled with :func:`graphtune.x86.schedule_fused` and the node's knobs;
``layout_transform`` PrimFuncs get :func:`graphtune.x86.schedule_transform`
and the remaining ones (pools, lone elementwise ops) a parallel schedule.
Identical scheduled PrimFuncs (same workload, knobs and epilogue) are merged.

Examples
--------
>>> lowered = legalize(new_mod, anchors, target)   # doctest: +SKIP
"""

from __future__ import annotations

import re
from typing import Mapping

import tvm
import tvm_ffi
from tvm import relax, s_tir, tirx
from tvm.ir.expr import Constant

from ..errors import LayoutError
from ..layouts import block_of
from .rewrite import TRANSFORM_ATTR, NodePlan

__all__ = ["NODE_ATTR", "legalize", "node_of"]

NODE_ATTR = "graphtune.node"
"""PrimFunc attribute naming the layout node whose kernel the function computes."""


def _check_covered(mod: tvm.IRModule, anchors: Mapping[Constant, NodePlan]) -> None:
    """Raise LayoutError for a blocked conv2d that is not a planned node.

    TVM's stock legalization silently leaves blocked convs unlowered, so every
    one of them must be graphtune's.
    """
    stray: list[str] = []

    def visit(expr: relax.Expr) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) \
                and expr.op.name == "relax.nn.conv2d" and expr.args[1] not in anchors:
            layouts = (str(expr.attrs.data_layout), str(expr.attrs.out_layout))
            if any(block_of(layout) for layout in layouts):
                stray.append(" -> ".join(layouts))

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func.body, visit)
    if stray:
        raise LayoutError(f"{len(stray)} conv2d in blocked layouts ({stray[0]}, ...) are not "
                          "configured nodes; graphtune only lowers blocked convs it planned "
                          "itself — rewrite the module with graphtune.compiler.rewrite")


def _safe(name: str) -> str:
    """A function-name-friendly version of a node name."""
    return re.sub(r"[^0-9A-Za-z_]", "_", name)


def _te_call(bb: relax.BlockBuilder, compute, args: list[relax.Expr], plan: NodePlan,
             target: tvm.target.Target) -> relax.Expr:
    """``call_tir`` of a graphtune x86 compute, tagged with the node's name."""
    with target:
        return bb.call_te(compute, *args, plan.workload, plan.knobs,
                          primfunc_name_hint=f"gt_{_safe(plan.name)}",
                          primfunc_attrs={NODE_ATTR: plan.name})


def _legalize_map(anchors: Mapping[Constant, NodePlan], target: tvm.target.Target) -> dict:
    """customize_legalize_map for LegalizeOps: planned conv2d / conv2d_transpose / matmul -> x86 computes."""
    from .. import x86

    stock_conv = tvm.ir.Op.get("relax.nn.conv2d").get_attr("FLegalize")
    stock_matmul = tvm.ir.Op.get("relax.matmul").get_attr("FLegalize")
    computes = {"conv2d": x86.conv2d_nchwc, "depthwise_conv2d": x86.depthwise_conv2d_nchwc}

    def conv2d(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        plan = anchors.get(call.args[1])
        if plan is None:  # plain (checked by _check_covered): TVM's own lowering
            return stock_conv(bb, call)
        return _te_call(bb, computes[plan.op], list(call.args), plan, target)

    def matmul(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        plan = anchors.get(call.args[1])
        if plan is None:
            return stock_matmul(bb, call)
        weight = call.args[1].value.numpy().T  # matmul weight [K, M] -> dense [M, K]
        packed = relax.const(x86.pack_dense_weight(weight, plan.knobs["oc_bn"]))
        return _te_call(bb, x86.dense_packed, [call.args[0], packed], plan, target)

    def conv2d_transpose(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        plan = anchors.get(call.args[1])
        if plan is None:
            return stock_transpose(bb, call)
        packed = x86.pack_conv2d_transpose_kernel(call.args[1].value.numpy(), plan.knobs["ic_bn"],
                                                  plan.knobs["oc_bn"], plan.workload["strides"])
        return _te_call(bb, x86.conv2d_transpose_nchwc, [call.args[0], relax.const(packed)], plan, target)

    stock_transpose = tvm.ir.Op.get("relax.nn.conv2d_transpose").get_attr("FLegalize")
    return {"relax.nn.conv2d": conv2d, "relax.matmul": matmul, "relax.nn.conv2d_transpose": conv2d_transpose}


def node_of(mod: tvm.IRModule, func: relax.Function) -> str | None:
    """Node name tagged on the (first) PrimFunc a fused Relax function calls, if any.

    Examples
    --------
    >>> node_of(mod, mod["fused_gt_conv1_add_relu"])   # doctest: +SKIP
    'conv1'
    """
    found: list[str] = []

    def visit(expr: relax.Expr) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) \
                and expr.op.name == "relax.call_tir":
            callee = mod[expr.args[0]]
            if callee.attrs is not None and NODE_ATTR in callee.attrs:
                found.append(str(callee.attrs[NODE_ATTR]))

    relax.analysis.post_order_visit(func.body, visit)
    return found[0] if found else None


def _schedule_rest(func: tirx.PrimFunc, target: tvm.target.Target) -> tirx.PrimFunc:
    """Parallel (+ vectorised) schedule for a PrimFunc holding no layout node.

    Layout transforms and other spatial blocks get
    :func:`graphtune.x86.schedule.schedule_elementwise`; reduction blocks
    (pools, means) get their outer spatial loops fused and parallelised.
    """
    from .. import x86
    from ..x86.schedule import schedule_elementwise

    if func.attrs is not None and TRANSFORM_ATTR in func.attrs:
        return x86.schedule_transform(func, target)
    sch = s_tir.Schedule(func)
    lanes = x86.vector_lanes(target)
    try:
        for block in list(sch.get_child_blocks(sch.get_sblock("root"))):
            iters = sch.get(block).iter_vars
            if all(iv.iter_type == tirx.IterVar.DataPar for iv in iters):
                schedule_elementwise(sch, block, lanes)
                continue
            loops = sch.get_loops(block)
            spatial = [iv for iv in iters if iv.iter_type == tirx.IterVar.DataPar]
            outer = loops[:max(1, len(spatial) - 1)] if len(loops) > len(spatial) else []
            if outer:
                sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])
    except s_tir.ScheduleError:
        return func  # an unusual loop nest: correct, just serial
    return sch.mod["main"]


@relax.expr_functor.mutator
class _Redirect(relax.PyExprMutator):
    """Point ``call_tir``s at another PrimFunc (by callee name)."""

    def __init__(self, targets: dict) -> None:
        super().__init__()
        self.targets = targets

    def visit_call_(self, call: relax.Call) -> relax.Expr:  # noqa: D102 (TVM visitor hook)
        if isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.call_tir" \
                and call.args[0].name_hint in self.targets:
            args = [self.targets[call.args[0].name_hint]] + list(call.args[1:])
            return relax.Call(call.op, args, call.attrs, call.ty_args)
        return super().visit_call_(call)


def _dedupe(mod: tvm.IRModule) -> tvm.IRModule:
    """Make calls of structurally identical PrimFuncs share one (less code to build).

    Nodes with the same workload, knobs and fused epilogue compile to the same
    kernel; the node tag is ignored in the comparison.
    """
    kept: dict[int, list] = {}
    targets: dict[str, tvm.ir.GlobalVar] = {}
    for gvar, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        bare = func.without_attr(NODE_ATTR) if func.attrs is not None \
            and NODE_ATTR in func.attrs else func
        same = kept.setdefault(tvm_ffi.structural_hash(bare), [])
        twin = next((g for g, f in same if tvm_ffi.structural_equal(bare, f)), None)
        if twin is None:
            same.append((gvar, bare))
        else:
            targets[gvar.name_hint] = twin
    if not targets:
        return mod
    mod["main"] = _Redirect(targets).visit_expr(mod["main"])
    return relax.transform.DeadCodeElimination(["main"])(mod)


def legalize(mod: tvm.IRModule, anchors: Mapping[Constant, NodePlan],
             target: tvm.target.Target) -> tvm.IRModule:
    """Legalize, fuse and schedule a rewritten module.

    Parameters
    ----------
    mod : tvm.IRModule
        Output of :func:`graphtune.compiler.rewrite.rewrite`.
    anchors : mapping of Constant to NodePlan
        The layout nodes, keyed by their weight constants.
    target : tvm.target.Target
        The x86 target (:func:`graphtune.x86.host_target`).

    Returns
    -------
    tvm.IRModule
        Relax ``main`` calling fused, scheduled PrimFuncs; a node's PrimFunc
        carries the :data:`NODE_ATTR` attribute (naming one of the nodes when
        several identical ones share it).

    Raises
    ------
    LayoutError
        If a blocked conv2d is not a planned node.

    Examples
    --------
    >>> lowered = legalize(new_mod, anchors, target)   # doctest: +SKIP
    """
    from .. import x86

    _check_covered(mod, anchors)
    plans = {plan.name: plan for plan in anchors.values()}
    with target:
        mod = relax.transform.LegalizeOps(customize_legalize_map=_legalize_map(anchors, target))(mod)
        mod = relax.transform.AnnotateTIROpPattern()(mod)
        mod = relax.transform.FuseOps()(mod)
        fused = {gvar.name_hint: node_of(mod, func) for gvar, func in mod.functions.items()
                 if isinstance(func, relax.Function) and func.attrs is not None
                 and "Primitive" in func.attrs}
        mod = relax.transform.FuseTIR()(mod)
        mod = relax.transform.DeadCodeElimination()(mod)
    for gvar, func in list(mod.functions.items()):
        if not isinstance(func, tirx.PrimFunc):
            continue
        name = fused.get(gvar.name_hint)
        if name is None and func.attrs is not None and NODE_ATTR in func.attrs:
            name = str(func.attrs[NODE_ATTR])
        if name is not None:
            plan = plans[name]
            scheduled = x86.schedule_fused(func, plan.workload, plan.knobs, target)
            mod[gvar] = scheduled.with_attr(NODE_ATTR, name)
        else:
            mod[gvar] = _schedule_rest(func, target)
    return _dedupe(mod)
