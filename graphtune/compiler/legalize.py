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
and every other one :func:`graphtune.x86.generic.schedule_generic`, so no
unscheduled PrimFunc reaches the build. Each function is tagged with the
schedule it got (``graphtune.schedule``), its op kind (:data:`OP_ATTR`) and
what was fused into it (:data:`MEMBERS_ATTR`, :data:`TRANSFORMS_ATTR`: read
with :func:`members_of`, :func:`transforms_of`, :func:`label_of`, never from
the names Relax generates); :func:`schedule_counts` tallies them. Identical
scheduled PrimFuncs (same workload, knobs and epilogue) are merged.

Examples
--------
>>> from graphtune import Config, models, x86
>>> from graphtune.compiler.driver import rewrite_model
>>> from graphtune.frontend import import_model
>>> mod = import_model(models.get("resnet18", image_size=32))
>>> target = x86.host_target()
>>> new_mod, anchors, _ = rewrite_model(mod, Config.uniform(mod), target)
>>> lowered = legalize(new_mod, anchors, target)
>>> sorted(lowered[name].attrs[NODE_ATTR] for name in ("fused_gt_conv1_add_relu",))
['conv1']
"""

from __future__ import annotations

import re
from typing import Mapping

import tvm
import tvm_ffi
from tvm import relax, tirx
from tvm.ir.expr import Constant

from .. import x86
from ..errors import LayoutError
from ..layouts import block_of
from ..ops import LAYOUT_TRANSFORM
from ..x86.fastmath import COMPUTES
from ..x86.generic import SCHEDULE_ATTR, SCHEDULES, schedule_generic
from ..x86.pools import avg_pool2d, max_pool2d
from ..x86.resize import bilinear_resize2d, supported
from ..x86.roi_align import roi_align_nchw
from ..x86.roi_align import supported as roi_align_supported
from ..x86.target import vector_lanes
from .lut import ELEMENTWISE_ATTR
from .rewrite import NODE_ATTR, TRANSFORM_ATTR, NodePlan
from .sites import call_sites, with_sites

__all__ = ["NODE_ATTR", "OP_ATTR", "MEMBERS_ATTR", "TRANSFORMS_ATTR", "legalize", "node_of",
           "schedule_counts", "op_kind", "members_of", "transforms_of", "label_of"]

OP_ATTR = "graphtune.op"
"""PrimFunc attribute naming the op kind the function computes (its heaviest op when fused)."""

MEMBERS_ATTR = "graphtune.members"
"""PrimFunc attribute: the names of the functions Relax fused into it (its own name when it is
one), in call order, but the layout transforms (those are :data:`TRANSFORMS_ATTR`)."""

TRANSFORMS_ATTR = "graphtune.transforms"
"""PrimFunc attribute: the layout transforms in it (``src->dst``, as
:data:`~graphtune.compiler.rewrite.TRANSFORM_ATTR` tags the rewrite's), in call order."""


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


def _legalize_map(anchors: Mapping[Constant, NodePlan], target: tvm.target.Target,
                  packed_anchors: dict[Constant, NodePlan]) -> dict:
    """customize_legalize_map for LegalizeOps: planned conv2d / conv2d_transpose / matmul -> x86 computes.

    The compute and (for dense, conv2d_transpose and Winograd conv2d, whose weights
    the rewrite leaves as they are) the weight packing are the node's
    :class:`~graphtune.x86.OpSpec` ones; each weight packed here is added to
    ``packed_anchors`` with its node's plan.
    """
    stock_conv = tvm.ir.Op.get("relax.nn.conv2d").get_attr("FLegalize")
    stock_matmul = tvm.ir.Op.get("relax.matmul").get_attr("FLegalize")

    def conv2d(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        plan = anchors.get(call.args[1])
        if plan is None:  # plain (checked by _check_covered): TVM's own lowering
            return stock_conv(bb, call)
        if "winograd" in plan.knobs:  # the rewrite left the weight OIHW
            return packed(bb, call, call.args[1].value.numpy(), plan)
        return _te_call(bb, x86.spec_of(plan.op).compute, list(call.args), plan, target)

    def packed(bb: relax.BlockBuilder, call: relax.Call, weight, plan: NodePlan) -> relax.Expr:
        """``call`` with ``weight`` packed by the node's spec, lowered with the spec's compute."""
        spec = x86.spec_of(plan.op)
        array, _ = spec.pack(weight, plan.workload, plan.knobs)
        constant = relax.const(array)
        packed_anchors[constant] = plan
        return _te_call(bb, spec.compute, [call.args[0], constant], plan, target)

    def matmul(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        plan = anchors.get(call.args[1])
        if plan is None:
            return stock_matmul(bb, call)
        return packed(bb, call, call.args[1].value.numpy().T, plan)  # matmul weight [K, M] -> dense [M, K]

    def conv2d_transpose(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        plan = anchors.get(call.args[1])
        if plan is None:
            return stock_transpose(bb, call)
        return packed(bb, call, call.args[1].value.numpy(), plan)

    stock_transpose = tvm.ir.Op.get("relax.nn.conv2d_transpose").get_attr("FLegalize")
    return {"relax.nn.conv2d": conv2d, "relax.matmul": matmul, "relax.nn.conv2d_transpose": conv2d_transpose}


def _fast_math_map() -> dict:
    """customize_legalize_map entries: float32 ``exp``, ``sigmoid``, ``tanh``, ``silu``, ``erf``
    and ``gelu`` from :mod:`graphtune.x86.fastmath`.

    TVM lowers these to one scalar libm call per element, which no schedule
    can vectorise (GELU in a ConvNeXt block: 22 ms of 30; the SiLU after a
    conv of EfficientNet-B0: 20x the conv); the fastmath computes compile to
    vector instructions. The function names keep TVM's (``tir_sigmoid``...).
    """

    def lower(op_name: str):
        stock = tvm.ir.Op.get(op_name).get_attr("FLegalize")
        short = op_name.split(".")[-1]
        name = short if op_name.startswith("relax.nn.") else f"tir_{short}"

        def legalize_op(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
            if str(call.args[0].ty.dtype) != "float32":
                return stock(bb, call)
            return bb.call_te(COMPUTES[op_name], call.args[0], primfunc_name_hint=name)
        return legalize_op

    return {op_name: lower(op_name) for op_name in COMPUTES}


def _pool_map() -> dict:
    """customize_legalize_map entries: max pools read their input in place, integer average
    pools (a quantized model's, see :mod:`graphtune.frontend.qdq`) sum in 16 or 32 bits
    (:mod:`graphtune.x86.pools`; TVM's would sum in eight).

    Max pools fall back to TVM's pool (a padded copy) when a window lies wholly in the
    padding, the output layout differs or a dimension is symbolic; float average pools are
    TVM's. An integer average pool graphtune cannot run is an error naming the fix.
    """
    stock_max = tvm.ir.Op.get("relax.nn.max_pool2d").get_attr("FLegalize")
    stock_avg = tvm.ir.Op.get("relax.nn.avg_pool2d").get_attr("FLegalize")

    def legalize_max(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        attrs = call.attrs
        layout = str(attrs.layout)
        out_shape = _static_dims(call.ty)
        if str(attrs.out_layout) != layout or out_shape is None:
            return stock_max(bb, call)
        try:
            args = (layout, list(attrs.pool_size), list(attrs.strides), list(attrs.dilation),
                    list(attrs.padding), out_shape)
            return bb.call_te(max_pool2d, call.args[0], *args, primfunc_name_hint="max_pool2d")
        except (TypeError, ValueError):  # a symbolic input dimension, a window in the padding
            return stock_max(bb, call)

    def legalize_avg(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        attrs = call.attrs
        if str(call.args[0].ty.dtype) not in ("uint8", "int8"):
            return stock_avg(bb, call)
        out_shape = _static_dims(call.ty)
        try:
            if str(attrs.out_layout) != str(attrs.layout) or out_shape is None \
                    or bool(attrs.ceil_mode) or any(int(d) != 1 for d in attrs.dilation):
                raise ValueError("a symbolic shape, a layout change, ceil mode or dilation")
            args = (str(attrs.layout), list(attrs.pool_size), list(attrs.strides),
                    list(attrs.padding), bool(attrs.count_include_pad), out_shape)
            return bb.call_te(avg_pool2d, call.args[0], *args, primfunc_name_hint="avg_pool2d")
        except (TypeError, ValueError) as error:
            raise LayoutError(f"integer average pool to {call.ty}: {error}; graphtune averages "
                              "integers in floor mode without dilation: dequantize its input "
                              "instead") from error

    return {"relax.nn.max_pool2d": legalize_max, "relax.nn.avg_pool2d": legalize_avg}


def _resize_map(target: tvm.target.Target) -> dict:
    """customize_legalize_map entry: bilinear resizes whose channel block does not fill a vector
    as a row pass and a column pass (:mod:`graphtune.x86.resize`); any other resize, a symbolic
    shape or a dtype change goes to TVM's own."""

    stock = tvm.ir.Op.get("relax.image.resize2d").get_attr("FLegalize")

    def legalize_op(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        attrs = call.attrs
        layout, mode = str(attrs.layout), str(attrs.coordinate_transformation_mode)
        out_dtype = str(attrs.out_dtype) if attrs.out_dtype is not None else ""
        out_shape = _static_dims(call.ty)
        if not supported(layout, str(attrs.method), mode, vector_lanes(target)) \
                or out_dtype not in ("", str(call.args[0].ty.dtype)) \
                or out_shape is None or _static_dims(call.args[0].ty) is None:
            return stock(bb, call)
        return bb.call_te(bilinear_resize2d, call.args[0], layout, out_shape[2:4], mode,
                          primfunc_name_hint="resize2d")

    return {"relax.image.resize2d": legalize_op}


def _roi_align_map() -> dict:
    """customize_legalize_map entry: ROI align in average mode with a fixed sampling ratio,
    vectorised along channels (:mod:`graphtune.x86.roi_align`); max mode, adaptive sampling,
    ``NHWC`` or a symbolic feature map go to TVM's own."""
    stock = tvm.ir.Op.get("relax.vision.roi_align").get_attr("FLegalize")

    def legalize_op(bb: relax.BlockBuilder, call: relax.Call) -> relax.Expr:
        attrs = call.attrs
        if not roi_align_supported(str(attrs.layout), str(attrs.mode), int(attrs.sample_ratio)) \
                or _static_dims(call.args[0].ty) is None:
            return stock(bb, call)
        return bb.call_te(roi_align_nchw, call.args[0], call.args[1],
                          [int(d) for d in attrs.pooled_size], float(attrs.spatial_scale),
                          int(attrs.sample_ratio), bool(attrs.aligned), primfunc_name_hint="roi_align")

    return {"relax.vision.roi_align": legalize_op}


def _static_dims(tensor_type) -> list[int] | None:
    """The dimensions of a Relax tensor type, or None where one is symbolic or the shape unknown."""
    try:
        return [int(d) for d in tensor_type.shape.values]
    except (TypeError, AttributeError):
        return None


def node_of(mod: tvm.IRModule, func: relax.Function) -> str | None:
    """Node name tagged on the (first) PrimFunc a fused Relax function calls, if any.

    Examples
    --------
    >>> from graphtune import Config, models, x86
    >>> from graphtune.compiler.driver import rewrite_model
    >>> from graphtune.frontend import import_model
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> target = x86.host_target()
    >>> new_mod, anchors, _ = rewrite_model(mod, Config.uniform(mod), target)
    >>> lowered = legalize(new_mod, anchors, target)
    >>> node_of(lowered, lowered["main"])  # main's first call of a node's kernel
    'conv1'
    """
    return next((str(callee.attrs[NODE_ATTR]) for _, callee in _tir_calls(mod, func)
                 if callee.attrs is not None and NODE_ATTR in callee.attrs), None)


def op_kind(name: str) -> str:
    """The op kind of a function named ``name``: the name without the numbering Relax adds.

    Examples
    --------
    >>> op_kind("concatenate12"), op_kind("max_pool2d")
    ('concatenate', 'max_pool2d')
    """
    return re.sub(r"\d+$", "", name) or name


def _op_kind(name: str, func: tirx.PrimFunc) -> str:
    """Op kind of an unfused PrimFunc: :data:`~graphtune.ops.LAYOUT_TRANSFORM` for a transform."""
    if _transform(func) is not None:
        return LAYOUT_TRANSFORM
    return op_kind(name)


def _transform(func: tirx.PrimFunc) -> str | None:
    """``src->dst`` of a layout transform the rewrite inserted, else None."""
    return str(func.attrs[TRANSFORM_ATTR]) if func.attrs is not None and TRANSFORM_ATTR in func.attrs \
        else None


def _tir_calls(mod: tvm.IRModule, func: relax.Function) -> list[tuple[str, tirx.PrimFunc]]:
    """The PrimFuncs (name, function) ``func`` calls, in call order."""
    calls: list[tuple[str, tirx.PrimFunc]] = []

    def visit(expr: relax.Expr) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) \
                and expr.op.name == "relax.call_tir":
            calls.append((expr.args[0].name_hint, mod[expr.args[0]]))

    relax.analysis.post_order_visit(func.body, visit)
    return calls


def _fused_members(mod: tvm.IRModule) -> dict[str, list[tuple[str, tirx.PrimFunc]]]:
    """The PrimFuncs (name, function) every fused Relax function of ``mod`` calls, in call order."""
    fused = {gvar.name_hint: _tir_calls(mod, func) for gvar, func in mod.functions.items()
             if isinstance(func, relax.Function) and func.attrs is not None
             and "Primitive" in func.attrs}
    return {name: calls for name, calls in fused.items() if calls}


def _heaviest(members: list[tuple[str, tirx.PrimFunc]]) -> str:
    """Op kind of a fused function: that of its member with the highest op pattern.

    Relax's op patterns rank elementwise < broadcast < injective < reduction <
    out-elementwise-fusable (matmul, conv) < opaque; among equals the first
    member that is not a layout transform wins.
    """
    ranked = []
    for name, callee in members:
        kind = _op_kind(name, callee)
        pattern = int(callee.attrs["op_pattern"]) if callee.attrs is not None \
            and "op_pattern" in callee.attrs else 0
        ranked.append((pattern, kind != LAYOUT_TRANSFORM, kind))
    best = max(m[:2] for m in ranked)
    return next(m[2] for m in ranked if m[:2] == best)


def _with_members(func: tirx.PrimFunc, members: list[tuple[str, tirx.PrimFunc]]) -> tirx.PrimFunc:
    """``func`` tagged with its members' names (:data:`MEMBERS_ATTR`) and transforms
    (:data:`TRANSFORMS_ATTR`)."""
    transforms = [_transform(callee) for _, callee in members]
    names = [name for (name, _), moved in zip(members, transforms) if moved is None]
    return func.with_attr(MEMBERS_ATTR, names).with_attr(
        TRANSFORMS_ATTR, [moved for moved in transforms if moved is not None])


def _strings(func: tirx.PrimFunc, key: str) -> list[str]:
    """The list of strings a PrimFunc attribute holds (empty when absent)."""
    return [str(v) for v in func.attrs[key]] if func.attrs is not None and key in func.attrs else []


def members_of(func: tirx.PrimFunc) -> list[str]:
    """Names of the functions fused into a legalized PrimFunc, but its layout transforms.

    Examples
    --------
    >>> from tvm import te
    >>> x = te.placeholder((4,), name="x")
    >>> f = te.create_prim_func([x, te.compute((4,), lambda i: x[i] + 1.0)])
    >>> members_of(f.with_attr(MEMBERS_ATTR, ["concatenate1", "reshape"])), members_of(f)
    (['concatenate1', 'reshape'], [])
    """
    return _strings(func, MEMBERS_ATTR)


def transforms_of(func: tirx.PrimFunc) -> list[str]:
    """The layout transforms (``src->dst``) in a legalized PrimFunc, fused or alone.

    Examples
    --------
    >>> from tvm import te
    >>> x = te.placeholder((4,), name="x")
    >>> f = te.create_prim_func([x, te.compute((4,), lambda i: x[i] + 1.0)])
    >>> transforms_of(f.with_attr(TRANSFORMS_ATTR, ["NCHW16c->NCHW"]))
    ['NCHW16c->NCHW']
    """
    return _strings(func, TRANSFORMS_ATTR)


def label_of(func: tirx.PrimFunc) -> str:
    """What a legalized PrimFunc computes besides layout transforms, by its members' names:
    the same in every compile whatever transforms fuse into it (its neighbours' layouts
    decide that). Empty for transforms alone.

    Examples
    --------
    >>> from graphtune import Config, models, x86
    >>> from graphtune.compiler.driver import rewrite_model
    >>> from graphtune.frontend import import_model
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> target = x86.host_target()
    >>> lowered = legalize(*rewrite_model(mod, Config.uniform(mod), target)[:2], target)
    >>> flatten = lowered["fused_layout_transform_NCHW16c_NCHW_reshape"]
    >>> label_of(flatten), transforms_of(flatten), label_of(lowered["fused_gt_conv1_add_relu"])
    ('reshape', ['NCHW16c->NCHW'], 'gt_conv1_add_relu')
    """
    return "_".join(members_of(func))


def _schedule_rest(func: tirx.PrimFunc, target: tvm.target.Target) -> tirx.PrimFunc:
    """Schedule a PrimFunc holding no layout node; its ``graphtune.schedule`` attribute says how.

    Layout transforms get :func:`graphtune.x86.schedule_transform`; everything
    else :func:`graphtune.x86.generic.schedule_generic` (injective, matmul,
    reduction or the generic fallback) — no function reaches the build
    unscheduled.
    """
    if _transform(func) is not None:
        return x86.schedule_transform(func, target).with_attr(SCHEDULE_ATTR, "transform")
    return schedule_generic(func, target)[0]


def schedule_counts(mod: tvm.IRModule) -> dict[str, dict[str, int]]:
    """How many PrimFuncs of a legalized module got which schedule, per op kind.

    Returns
    -------
    dict
        ``{op kind: {schedule kind: count}}``, op kinds sorted, schedule kinds
        as in :data:`graphtune.x86.generic.SCHEDULES`; a function without a
        schedule attribute counts as ``"none"``.

    Examples
    --------
    >>> from graphtune import Config, models, x86
    >>> from graphtune.compiler.driver import rewrite_model
    >>> from graphtune.frontend import import_model
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> target = x86.host_target()
    >>> new_mod, anchors, _ = rewrite_model(mod, Config.uniform(mod), target)
    >>> schedule_counts(legalize(new_mod, anchors, target))
    {'conv2d': {'kernel': 15}, 'dense': {'kernel': 1}, 'layout_transform': {'transform': 1},
     'max_pool2d': {'reduction': 1}, 'mean': {'reduction': 1}, 'reshape': {'injective': 1}}
    """
    counts: dict[str, dict[str, int]] = {}
    for gvar, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            attrs = func.attrs if func.attrs is not None else {}
            op = str(attrs[OP_ATTR]) if OP_ATTR in attrs else _op_kind(gvar.name_hint, func)
            kind = str(attrs[SCHEDULE_ATTR]) if SCHEDULE_ATTR in attrs else "none"
            per_op = counts.setdefault(op, {})
            per_op[kind] = per_op.get(kind, 0) + 1
    order = {kind: rank for rank, kind in enumerate(SCHEDULES)}
    return {op: dict(sorted(counts[op].items(), key=lambda kv: order.get(kv[0], len(order))))
            for op in sorted(counts)}


@relax.expr_functor.mutator
class _Redirect(relax.PyExprMutator):
    """Point ``call_tir``s at another PrimFunc (by callee name)."""

    def __init__(self, targets: dict) -> None:
        super().__init__()
        self.targets = targets

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        if isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.call_tir" \
                and call.args[0].name_hint in self.targets:
            args = [self.targets[call.args[0].name_hint]] + list(call.args[1:])
            return relax.Call(call.op, args, call.attrs, call.ty_args)
        return super().visit_call_(call)


def _without(func: tirx.PrimFunc, *keys: str) -> tirx.PrimFunc:
    """``func`` without the attributes ``keys`` it has."""
    for key in keys:
        if func.attrs is not None and key in func.attrs:
            func = func.without_attr(key)
    return func


def _dedupe(mod: tvm.IRModule) -> tvm.IRModule:
    """Make calls of structurally identical PrimFuncs share one (less code to build).

    Nodes with the same workload, knobs and fused epilogue compile to the same
    kernel; the node tag and the members' names are ignored in the comparison.
    """
    kept: dict[int, list] = {}
    targets: dict[str, tvm.ir.GlobalVar] = {}
    for gvar, func in mod.functions.items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        bare = _without(func, NODE_ATTR, MEMBERS_ATTR)
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


def _elementwise_lookups(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with the table lookups (:data:`~graphtune.compiler.lut.ELEMENTWISE_ATTR`) given
    the elementwise op pattern (0, which ``AnnotateTIROpPattern`` would re-analyse if set before)."""
    for gvar, func in list(mod.functions.items()):
        if isinstance(func, tirx.PrimFunc) and func.attrs is not None and ELEMENTWISE_ATTR in func.attrs:
            mod[gvar] = func.with_attr("op_pattern", 0)
    return mod


def _dequantize_in_readers(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every ``dequantize`` PrimFunc given the broadcast op pattern: the QDQ rewrite
    leaves a DequantizeLinear on purpose only for the second uint8 branch of a residual add
    (``frontend.qdq._Rewriter._second_branch``; others only where it cannot rewrite one). With
    that pattern ``FuseOps`` ends their producer's function at the uint8 tensor (it fuses a
    conv's epilogue only through elementwise ops) and fuses the dequantization into the
    function that reads it (a broadcast op joins its reader's, the conv writing the add's
    other branch)."""
    for gvar, func in list(mod.functions.items()):
        if isinstance(func, tirx.PrimFunc) and gvar.name_hint.startswith("dequantize"):
            mod[gvar] = func.with_attr("op_pattern", 1)
    return mod


def legalize(mod: tvm.IRModule, anchors: Mapping[Constant, NodePlan],
             target: tvm.target.Target, packed_anchors: dict[Constant, NodePlan] | None = None
             ) -> tvm.IRModule:
    """Legalize, fuse and schedule a rewritten module.

    Parameters
    ----------
    mod : tvm.IRModule
        Output of :func:`graphtune.compiler.rewrite.rewrite`.
    anchors : mapping of Constant to NodePlan
        The layout nodes, keyed by their weight constants.
    target : tvm.target.Target
        The x86 target (:func:`graphtune.x86.host_target`).
    packed_anchors : dict, optional
        If given, receives the weight constants packed here (Winograd conv2d,
        dense, conv2d_transpose: the rewrite leaves their weights as they are)
        with their node's plan: with ``anchors`` they name every node by its
        weight in the lowered ``main``, which identical nodes' shared PrimFunc
        cannot (its :data:`NODE_ATTR` names one of them).

    Returns
    -------
    tvm.IRModule
        Relax ``main`` calling fused, scheduled PrimFuncs; a node's PrimFunc
        carries the :data:`NODE_ATTR` attribute (naming one of the nodes when
        several identical ones share it); every PrimFunc carries :data:`OP_ATTR`,
        :data:`MEMBERS_ATTR` and :data:`TRANSFORMS_ATTR`; the bindings behind each
        call are recorded for :func:`graphtune.compiler.sites.sites_of`.

    Raises
    ------
    LayoutError
        If a blocked conv2d is not a planned node.

    Examples
    --------
    >>> from graphtune import Config, models, x86
    >>> from graphtune.compiler.driver import rewrite_model
    >>> from graphtune.frontend import import_model
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> target = x86.host_target()
    >>> new_mod, anchors, _ = rewrite_model(mod, Config.uniform(mod), target)
    >>> lowered = legalize(new_mod, anchors, target)
    >>> all(isinstance(f, (relax.Function, tvm.tirx.PrimFunc)) for f in lowered.functions.values())
    True
    """
    _check_covered(mod, anchors)
    plans = {plan.name: plan for plan in anchors.values()}
    with target:
        packed = {} if packed_anchors is None else packed_anchors
        custom = {**_fast_math_map(), **_pool_map(), **_resize_map(target), **_roi_align_map(),
                  **_legalize_map(anchors, target, packed)}
        mod = relax.transform.LegalizeOps(customize_legalize_map=custom)(mod)
        mod = _dequantize_in_readers(_elementwise_lookups(relax.transform.AnnotateTIROpPattern()(mod)))
        unfused = mod["main"]
        mod = relax.transform.FuseOps()(mod)
        sites = call_sites(unfused, mod)
        fused = {gvar.name_hint: node_of(mod, func) for gvar, func in mod.functions.items()
                 if isinstance(func, relax.Function) and func.attrs is not None
                 and "Primitive" in func.attrs}
        members = _fused_members(mod)
        mod = relax.transform.FuseTIR()(mod)
        mod = relax.transform.DeadCodeElimination()(mod)
    for gvar, func in list(mod.functions.items()):
        if not isinstance(func, tirx.PrimFunc):
            continue
        parts = members.get(gvar.name_hint, [(gvar.name_hint, func)])
        name = fused.get(gvar.name_hint)
        if name is None and func.attrs is not None and NODE_ATTR in func.attrs:
            name = str(func.attrs[NODE_ATTR])
        if name is not None:
            plan = plans[name]
            scheduled = x86.schedule_fused(func, plan.workload, plan.knobs, target, op=plan.op)
            scheduled = scheduled.with_attr(NODE_ATTR, name).with_attr(SCHEDULE_ATTR, "kernel")
            op = str(plan.op)
        else:
            scheduled = _schedule_rest(func, target)
            op = _heaviest(parts)
        mod[gvar] = _with_members(scheduled.with_attr(OP_ATTR, op), parts)
    return with_sites(_dedupe(mod), sites)
