"""Per-node NCHW{x}c rewrite of a Relax module.

Each configured conv2d becomes an ``NCHW{ic_bn}c -> NCHW{oc_bn}c`` conv with
its weight pre-transformed (in numpy) to ``OIHW{ic_bn}i{oc_bn}o``; a
conv2d_transpose likewise, its IOHW weight packed at legalization. Every
tensor's current layout is tracked while the bindings are re-emitted; a
``layout_transform`` is inserted only where a consumer needs another layout
than its producer wrote, and one transform serves every consumer needing the
same layout (the :func:`graphtune.x86.layout_transform` compute, so compiled
transforms are the kernels graphtune measured). Layout-agnostic ops (relu,
clip, bias add and other elementwise ops with per-channel constants, pools,
spatial means) run in the blocked layout they receive; joins (add of two activations, channel concat) bring their inputs
to one common layout; every other op (reshape, flatten, transpose, softmax,
matmul...) and the function's outputs get plain ``NCHW``.

Examples
--------
>>> from graphtune.compiler.rewrite import NodePlan, rewrite
>>> new_mod, anchors = rewrite(mod, {op.var: plan})   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant

from ..errors import CompileError, ConfigError, GraphtuneError, LayoutError
from ..frontend.walk import _DEFAULT_NAME, op_name
from ..frontend.walk import static_shape as _shape
from ..layouts import block_of, data_layout, kernel_layout
from .consts import eval_const

__all__ = ["NodePlan", "TRANSFORM_ATTR", "rewrite"]


TRANSFORM_ATTR = "graphtune.transform"
"""PrimFunc attribute (``"src->dst"``) marking the layout transforms the rewrite inserts."""


@dataclass(frozen=True)
class NodePlan:
    """What to do with one layout node: its name, workload, knobs and layouts.

    Examples
    --------
    >>> NodePlan("conv1", "conv2d", {}, {"ic_bn": 3, "oc_bn": 16}, "NCHW3c", "NCHW16c").out_layout
    'NCHW16c'
    """

    name: str
    op: str
    workload: dict
    knobs: dict
    in_layout: str
    out_layout: str


_UNARY = {
    "relax." + name for name in (
        "nn.relu", "clip", "sigmoid", "tanh", "nn.silu", "nn.gelu", "nn.gelu_tanh",
        "nn.leakyrelu", "exp", "sqrt", "rsqrt", "negative", "abs", "square", "erf")
}
_BINARY = {
    "relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.maximum",
    "relax.minimum",
}
_POOLS = {"relax.nn.max_pool2d", "relax.nn.avg_pool2d", "relax.nn.adaptive_avg_pool2d"}


def _kernel_array(weight: np.ndarray, plan: NodePlan) -> tuple[np.ndarray, str]:
    """Weight OIHW packed for the node's x86 kernel, and the kernel layout name."""
    from .. import x86

    if plan.op == "depthwise_conv2d":
        bn = block_of(plan.out_layout)
        return x86.pack_depthwise_kernel(weight, bn), kernel_layout(1, bn)
    in_blk, out_blk = block_of(plan.in_layout), block_of(plan.out_layout)
    if plan.op == "group_conv2d":
        packed = x86.pack_group_kernel(weight, plan.workload["groups"], in_blk, out_blk)
        return packed, kernel_layout(in_blk, out_blk)
    return x86.pack_conv_kernel(weight, in_blk, out_blk), kernel_layout(in_blk, out_blk)


def _out_dtype(attrs) -> str | None:
    """Explicit out_dtype of a conv2d's attrs, None when it follows the input."""
    dtype = str(attrs.out_dtype) if attrs.out_dtype is not None else ""
    return None if dtype in ("", "void") else dtype


class _Rewriter:
    """State of one rewrite: emitted tensors, their blocks and the transform cache."""

    def __init__(self, bb: relax.BlockBuilder, plans: Mapping[relax.Var, NodePlan],
                 joins: Mapping[frozenset, tuple[str, str]]):
        self.bb = bb
        self.plans = plans
        self.joins = joins
        self.value: dict[relax.Var, relax.Expr] = {}   # old var -> new expr (current layout)
        self.block: dict[relax.Var, int] = {}          # old var -> its channel block
        self.cache: dict[tuple[relax.Var, int], relax.Expr] = {}
        self.anchors: dict[Constant, NodePlan] = {}
        self.consts: dict[relax.Var, np.ndarray] = {}  # constant-only bindings, evaluated
        self.errors: list[Exception] = []  # config errors found while rewriting
        self.source: dict[relax.Var, str | None] = {}  # layout node / join a tensor comes from

    # ------------------------------------------------------------ tensors
    def get(self, expr: relax.Expr, block: int) -> relax.Expr:
        """``expr`` (an old expression) in channel block ``block``, transforming once if needed."""
        if isinstance(expr, relax.Tuple):
            return relax.Tuple([self.get(field, 0) for field in expr.fields])
        if isinstance(expr, relax.Var) and expr in self.consts:
            return relax.const(self.consts[expr])
        if not isinstance(expr, relax.Var) or expr not in self.value:
            return expr
        have = self.block[expr]
        if have == block:
            return self.value[expr]
        key = (expr, block)
        if key not in self.cache:
            if block and _shape(expr)[1] % block:
                raise LayoutError(f"tensor {expr.name} with {_shape(expr)[1]} channels cannot be "
                                  f"put in layout {data_layout(block)}; pick a block dividing it")
            from .. import x86

            src, dst = data_layout(have), data_layout(block)
            moved = self.bb.call_te(x86.layout_transform, self.value[expr], src, dst,
                                    primfunc_name_hint=f"layout_transform_{src}_{dst}",
                                    primfunc_attrs={TRANSFORM_ATTR: f"{src}->{dst}"})
            self.cache[key] = self.bb.emit(moved, name_hint=f"{expr.name}_{dst}")
        return self.cache[key]

    def array(self, expr: relax.Expr) -> np.ndarray | None:
        """Numpy value of a constant or an evaluated constant-only binding, else None."""
        if isinstance(expr, Constant):
            return expr.value.numpy()
        if isinstance(expr, relax.Var):
            return self.consts.get(expr)
        return None

    def blocked(self, expr: relax.Expr) -> int:
        """Current block of an old expression (0 for constants and plain tensors)."""
        return self.block.get(expr, 0) if isinstance(expr, relax.Var) else 0

    def bind(self, var: relax.Var, expr: relax.Expr, block: int) -> None:
        """Emit ``expr`` as the new value of old ``var`` in channel block ``block``."""
        self.value[var] = self.bb.emit(expr, name_hint=var.name)
        self.block[var] = block

    # ---------------------------------------------------------------- ops
    def visit(self, var: relax.Var, value: relax.Expr) -> None:
        """Re-emit one binding ``var = value`` and record which node its tensor comes from."""
        self.emit(var, value)
        if var not in self.source:
            self.source[var] = self.source_of(var, value)

    def source_of(self, var: relax.Var, value: relax.Expr) -> str | None:
        """Layout node a tensor carries the layout of (through pass-through ops), else None."""
        if var in self.plans:
            return self.plans[var].name
        if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
            return None
        data = [arg for arg in value.args if isinstance(arg, relax.Var) and arg in self.value]
        if value.op.name in _UNARY | _POOLS or (value.op.name in _BINARY and len(data) == 1):
            return self.source.get(data[0]) if data else None
        return None

    def emit(self, var: relax.Var, value: relax.Expr) -> None:
        """Re-emit one binding in the layouts the plans ask for."""
        if var in self.plans:
            self.layout_node(var, value, self.plans[var])
            return
        if isinstance(value, relax.Call) and all(
                self.array(arg) is not None or not isinstance(arg, (relax.Var, Constant))
                for arg in value.args):
            folded = eval_const(value, [self.array(arg) for arg in value.args])
            if folded is not None:
                self.consts[var] = folded
                return
        if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
            self.bind(var, self.plain_args(value), 0)
            return
        name = value.op.name
        shape = _shape(var)
        four_d = shape is not None and len(shape) == 4
        if name in _UNARY and four_d and self.blocked(value.args[0]):
            blk = self.blocked(value.args[0])
            args = [self.get(value.args[0], blk)] + list(value.args[1:])  # clip's bounds
            self.bind(var, self.with_args(value, args), blk)
        elif name in _POOLS and four_d and self.blocked(value.args[0]):
            self.pool(var, value)
        elif name == "relax.mean" and self.blocked(value.args[0]) and self.spatial_mean(value):
            blk = self.blocked(value.args[0])
            self.bind(var, self.with_args(value, [self.get(value.args[0], blk)]), blk)
        elif name in _BINARY and four_d:
            self.binary(var, value)
        elif name == "relax.concat" and four_d and int(value.attrs.axis) in (1, -3):
            self.concat(var, value)
        else:
            self.bind(var, self.plain_args(value), 0)

    def plain_args(self, value: relax.Expr) -> relax.Expr:
        """``value`` with every argument in plain layout."""
        if isinstance(value, relax.Call):
            return self.with_args(value, [self.get(arg, 0) for arg in value.args])
        if isinstance(value, relax.Tuple):
            return self.get(value, 0)
        if isinstance(value, relax.TupleGetItem):
            return relax.TupleGetItem(self.get(value.tuple_value, 0), value.index)
        if isinstance(value, relax.Var):
            return self.get(value, 0)
        return value

    @staticmethod
    def with_args(call: relax.Call, args: list[relax.Expr]) -> relax.Call:
        """Copy of ``call`` with new arguments (struct info re-derived on emit)."""
        return relax.Call(call.op, args, call.attrs, call.ty_args)

    def layout_node(self, var: relax.Var, call: relax.Call, plan: NodePlan) -> None:
        """Rewrite a configured conv2d (blocked) or dense (plain, anchored for legalization)."""
        weight = self.array(call.args[1])
        if weight is None:
            raise LayoutError(f"node {plan.name}: its weight is not a constant; import the model "
                              "with weights as constants (graphtune.frontend.import_model)")
        if plan.op == "dense":
            fresh = relax.const(weight)
            self.anchors[fresh] = plan
            self.bind(var, self.with_args(call, [self.get(call.args[0], 0), fresh]), 0)
            return
        in_blk, out_blk = block_of(plan.in_layout), block_of(plan.out_layout)
        if plan.op == "conv2d_transpose":  # IOHW weight kept: legalize packs it per phase
            self.transposed(var, call, plan, relax.const(weight), in_blk, out_blk)
            return
        array, klayout = _kernel_array(weight, plan)
        kernel = relax.const(array)
        self.anchors[kernel] = plan
        attrs = call.attrs
        # Relax types the call with the packed kernel: its input channels per group are
        # those each output block reads (a group conv's block-diagonal span).
        groups = plan.workload["data"][1] // (array.shape[1] * array.shape[4])
        conv = relax.op.nn.conv2d(
            self.get(call.args[0], in_blk), kernel,
            strides=[int(v) for v in attrs.strides], padding=[int(v) for v in attrs.padding],
            dilation=[int(v) for v in attrs.dilation], groups=groups,
            data_layout=data_layout(in_blk), kernel_layout=klayout,
            out_layout=data_layout(out_blk), out_dtype=_out_dtype(attrs),
        )
        self.bind(var, conv, out_blk)

    def transposed(self, var: relax.Var, call: relax.Call, plan: NodePlan, weight: Constant,
                   in_blk: int, out_blk: int) -> None:
        """A configured conv2d_transpose in blocked data layouts (anchored by its weight)."""
        self.anchors[weight] = plan
        attrs = call.attrs
        conv = relax.op.nn.conv2d_transpose(
            self.get(call.args[0], in_blk), weight,
            strides=[int(v) for v in attrs.strides], padding=[int(v) for v in attrs.padding],
            output_padding=[int(v) for v in attrs.output_padding],
            dilation=[int(v) for v in attrs.dilation], groups=int(attrs.groups),
            data_layout=data_layout(in_blk), kernel_layout="IOHW",
            out_layout=data_layout(out_blk), out_dtype=_out_dtype(attrs),
        )
        self.bind(var, conv, out_blk)

    def pool(self, var: relax.Var, call: relax.Call) -> None:
        """A 2-D pool in the blocked layout of its input."""
        blk = self.blocked(call.args[0])
        attrs = call.attrs
        layout = data_layout(blk)
        if call.op.name == "relax.nn.adaptive_avg_pool2d":
            size = None if attrs.output_size is None else [int(v) for v in attrs.output_size]
            self.bind(var, relax.op.nn.adaptive_avg_pool2d(
                self.get(call.args[0], blk), size, layout=layout, out_layout=layout), blk)
            return
        make = relax.op.nn.max_pool2d if call.op.name == "relax.nn.max_pool2d" \
            else relax.op.nn.avg_pool2d
        pooled = make(self.get(call.args[0], blk),
                      pool_size=[int(v) for v in attrs.pool_size],
                      strides=[int(v) for v in attrs.strides],
                      padding=[int(v) for v in attrs.padding],
                      dilation=[int(v) for v in attrs.dilation],
                      ceil_mode=bool(attrs.ceil_mode),
                      count_include_pad=bool(attrs.count_include_pad),
                      layout=layout, out_layout=layout)
        self.bind(var, pooled, blk)

    @staticmethod
    def spatial_mean(call: relax.Call) -> bool:
        """True for a keepdims mean over H and W only (global average pool)."""
        axes = sorted(int(a) % 4 for a in call.attrs.axis) if call.attrs.axis is not None else []
        return axes == [2, 3] and bool(call.attrs.keepdims)

    def binary(self, var: relax.Var, call: relax.Call) -> None:
        """Elementwise op: with a per-channel constant, or a join of two activations."""
        lhs, rhs = call.args
        shape = _shape(var)
        tensors = [arg for arg in (lhs, rhs) if isinstance(arg, relax.Var) and arg in self.value]
        if not tensors:
            self.bind(var, self.plain_args(call), 0)
            return
        if len(tensors) == 1:
            const = rhs if tensors[0].same_as(lhs) else lhs
            blk = self.blocked(tensors[0])
            moved = self.channel_const(const, blk, shape[1]) if blk else None
            if moved is None:
                self.bind(var, self.plain_args(call), 0)
                return
            args = [self.get(lhs, blk), moved] if tensors[0].same_as(lhs) \
                else [moved, self.get(rhs, blk)]
            self.bind(var, self.with_args(call, args), blk)
            return
        shapes = [_shape(arg) for arg in tensors]
        if len(tensors) == 2 and all(s is not None and len(s) == 4 and s[:2] == shape[:2]
                                     for s in shapes):
            blk = self.join_block(var, tensors, shape[1])
            self.bind(var, self.with_args(call, [self.get(arg, blk) for arg in (lhs, rhs)]), blk)
            return
        self.bind(var, self.plain_args(call), 0)

    def channel_const(self, const: relax.Expr, blk: int, channels: int) -> relax.Expr | None:
        """A broadcast constant moved to block ``blk``, or None if it cannot be."""
        array = self.array(const)
        if array is None:
            return None
        if array.size == 1 and array.ndim <= 4:
            return relax.const(array.reshape(()), str(array.dtype))
        if array.ndim == 3:
            array = array[None]
        if array.ndim != 4 or array.shape[0] != 1 or array.shape[2:] != (1, 1) \
                or array.shape[1] != channels:
            return None
        from .. import x86

        return relax.const(x86.pack_data(array, blk))

    def join_block(self, var: relax.Var, inputs: list[relax.Var], channels: int) -> int:
        """Common block of a join: configured, else its first blocked input's block.

        A configured join is recognised by the nodes its inputs come from.
        """
        key = frozenset(self.source.get(arg) for arg in inputs)
        if key in self.joins:
            name, layout = self.joins[key]
            self.source[var] = name
            blk = block_of(layout)
            channels_in = [_shape(arg)[1] for arg in inputs]
            if blk and any(c % blk for c in channels_in):
                # raised once the function is closed (raising inside leaves TVM printing a warning)
                self.errors.append(ConfigError(
                    f"nodes.{name}.out_layout: {layout} does not divide the channels "
                    f"{channels_in} of the join's inputs; give it a block that divides them, "
                    "or NCHW"))
                return 0
            return blk
        for arg in inputs:
            blk = self.blocked(arg)
            if blk and channels % blk == 0 and all(_shape(a)[1] % blk == 0 for a in inputs):
                return blk
        return 0

    def concat(self, var: relax.Var, call: relax.Call) -> None:
        """Channel concat, blocked when one block divides every input's channels."""
        fields = list(call.args[0].fields)
        tensors = [f for f in fields if isinstance(f, relax.Var) and f in self.value]
        if len(tensors) != len(fields):
            self.bind(var, self.plain_args(call), 0)
            return
        blk = self.join_block(var, tensors, _shape(var)[1])
        moved = relax.Tuple([self.get(f, blk) for f in fields])
        self.bind(var, relax.op.concat(moved, axis=1), blk)


def _failed_at(binding: relax.VarBinding, last: str | None, err: Exception) -> str:
    """Message for a TVM error raised while re-emitting ``binding``, naming its ONNX node."""
    name = binding.var.name
    what = op_name(binding.value) or type(binding.value).__name__
    if _DEFAULT_NAME.match(name):
        where = f"the {what} after ONNX node {last!r}" if last else f"the {what} ({name})"
    else:
        where = f"ONNX node {name!r} ({what})"
    detail = str(err).strip().splitlines()
    return (f"compile: TVM rejected {where} while rewriting layouts ({type(err).__name__}: "
            f"{detail[0] if detail else ''}); check the model with onnxruntime and report it")


def rewrite(mod: tvm.IRModule, plans: Mapping[relax.Var, NodePlan],
            joins: Mapping[frozenset, tuple[str, str]] | None = None,
            func_name: str = "main") -> tuple[tvm.IRModule, dict]:
    """Rewrite ``mod[func_name]`` so that each planned node runs in its configured layouts.

    Parameters
    ----------
    mod : tvm.IRModule
        Imported model: one Relax function whose body is a dataflow block, weights
        as constants (:func:`graphtune.frontend.import_model`).
    plans : mapping of relax.Var to NodePlan
        The binding variable of each layout node (``LayoutOp.var``) and its plan.
    joins : mapping of frozenset to (str, str), optional
        Configured joins (residual add, channel concat): the names of the nodes
        feeding a join (layout nodes, other joins, or the graph input) map to the
        join's name and common layout. Joins not found here take their first
        blocked input's layout.
    func_name : str, default "main"
        The function to rewrite.

    Returns
    -------
    tvm.IRModule
        The rewritten module (weights already in blocked layouts).
    dict of Constant to NodePlan
        The anchors: each layout node's (new) weight constant and its plan; the
        legalization finds nodes by these.

    Raises
    ------
    LayoutError
        If a layout does not divide a tensor's channels.

    Examples
    --------
    >>> new_mod, anchors = rewrite(mod, {op.var: plan})   # doctest: +SKIP
    """
    func = mod[func_name]
    body = func.body
    if not isinstance(body, relax.SeqExpr):
        raise LayoutError(f"function {func_name}: expected a body of binding blocks")
    bb = relax.BlockBuilder()
    state = _Rewriter(bb, plans, joins or {})
    attrs = {str(k): v for k, v in func.attrs.items()} if func.attrs is not None else {}
    with bb.function(func_name, list(func.params), attrs=attrs):
        with bb.dataflow():
            for param in func.params:
                state.value[param], state.block[param] = param, 0
                state.source[param] = param.name
            last = None  # the last binding named after an ONNX node
            for block in body.blocks:
                for binding in block.bindings:
                    if not isinstance(binding, relax.VarBinding):
                        raise LayoutError(f"binding {binding.var.name}: match_cast is not "
                                          "supported; import with static shapes")
                    try:
                        state.visit(binding.var, binding.value)
                    except GraphtuneError:
                        raise
                    except Exception as err:  # TVM raises TypeError/TVMError from deep inside
                        raise CompileError(_failed_at(binding, last, err)) from None
                    if not _DEFAULT_NAME.match(binding.var.name):
                        last = binding.var.name
            output = bb.emit_output(state.plain_args(body.body))
        bb.emit_func_output(output)
    if state.errors:
        raise state.errors[0]
    new_mod = bb.get()
    for gvar, other in mod.functions.items():
        if gvar.name_hint != func_name:
            new_mod[gvar] = other
    return new_mod, state.anchors
