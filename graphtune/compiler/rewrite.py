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
spatial means, resize) run in the blocked layout they receive; joins (add of
two activations, channel concat) bring their inputs to one common layout;
every other op (reshape, flatten, transpose, softmax,
matmul...) and the function's outputs get plain ``NCHW``. A tensor a bfloat16 node
has rounded is read by elementwise ops as those bits widened, so its producer writes
it once, in bfloat16 (``docs/bf16.md``).

Every binding is re-emitted as its :func:`graphtune.frontend.walk` step
says: the role and form decided there (the op tables live in
:mod:`graphtune.frontend.roles`), configured joins found by their step name.

Examples
--------
>>> from graphtune import models
>>> from graphtune.config import Config
>>> from graphtune.frontend import import_model
>>> mod = import_model(models.get("resnet18", image_size=32))
>>> new_mod, _ = rewrite(mod, {})  # no layout node planned: nothing is blocked
>>> "layout_transform" in new_mod.script()
False
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant

from .. import x86
from ..errors import CompileError, ConfigError, GraphtuneError, LayoutError
from ..frontend.roles import Form, Role
from ..frontend.walk import _DEFAULT_NAME, Step, bindings, op_name, walk
from ..frontend.walk import static_shape as _shape
from ..layouts import block_of, data_layout
from ..ops import BF16_OPS
from ..x86.resize import phased
from .bf16 import emit_bf16, rounding, rounding_key
from .consts import eval_const
from .int8 import emit_int8, stored_uint8
from .plan import NODE_ATTR, NodePlan

__all__ = ["NodePlan", "NODE_ATTR", "TRANSFORM_ATTR", "rewrite"]


TRANSFORM_ATTR = "graphtune.transform"
"""PrimFunc attribute (``"src->dst"``) marking the layout transforms the rewrite inserts."""


def _channels(expr) -> int:
    """Channels (axis 1) of a tensor; TypeError if its shape is not static."""
    shape = _shape(expr)
    if shape is None:
        raise TypeError(f"{expr} has no static shape")
    return shape[1]


def _out_dtype(attrs) -> str | None:
    """Explicit out_dtype of a conv2d's attrs, None when it follows the input."""
    dtype = str(attrs.out_dtype) if attrs.out_dtype is not None else ""
    return None if dtype in ("", "void") else dtype


class _Rewriter:
    """State of one rewrite: emitted tensors, their blocks and the transform cache."""

    def __init__(self, bb: relax.BlockBuilder, plans: Mapping[relax.Var, NodePlan],
                 joins: Mapping[str, str], plain_readers: frozenset = frozenset()):
        self.bb = bb
        self.plain_readers = plain_readers  # old vars every reader of which takes plain layouts
        self.plans = plans
        self.joins = joins
        self.value: dict[relax.Var, relax.Expr] = {}   # old var -> new expr (current layout)
        self.block: dict[relax.Var, int] = {}          # old var -> its channel block
        self.cache: dict[tuple[relax.Var, int], relax.Expr] = {}
        self.rounded: dict[tuple, relax.Expr] = {}  # (old var, block, padding) -> its bfloat16 bits
        self.anchors: dict[Constant, NodePlan] = {}
        self.consts: dict[relax.Var, np.ndarray] = {}  # constant-only bindings, evaluated
        self.tuples: dict[relax.Var, relax.Tuple] = {}  # tuple bindings, emitted where read
        self.bound: dict[relax.Var, relax.Expr] = {}   # old var -> its old value
        self.errors: list[Exception] = []  # config errors found while rewriting
        self.roles = {Role.CONST: self.constant, Role.LAYOUT: self.layout, Role.PASS: self.passed,
                      Role.JOIN: self.join, Role.FIXED: self.fixed, Role.TUPLE: self.tuple_binding}
        self.forms = {Form.ALIAS: self.alias, Form.UNARY: self.unary, Form.POOL: self.pool,
                      Form.ADAPTIVE_POOL: self.adaptive_pool, Form.MEAN: self.spatial_mean,
                      Form.CHANNEL_CONST: self.channel_binary, Form.RESIZE: self.resize,
                      Form.SPATIAL_SLICE: self.unary}

    # ------------------------------------------------------------ tensors
    def get(self, expr: relax.Expr, block: int) -> relax.Expr:
        """``expr`` (an old expression) in channel block ``block``, transforming once if needed."""
        if isinstance(expr, relax.Var) and expr in self.tuples:
            expr = self.tuples[expr]
        if isinstance(expr, relax.Tuple):
            return relax.Tuple([self.get(field, block) for field in expr.fields])
        if isinstance(expr, relax.Var) and expr in self.consts:
            return relax.const(self.consts[expr])
        if not isinstance(expr, relax.Var) or expr not in self.value:
            return expr
        have = self.block[expr]
        if have == block:
            return self.value[expr]
        key = (expr, block)
        if key not in self.cache:
            if block and _channels(expr) % block:
                raise LayoutError(f"tensor {expr.name} with {_channels(expr)} channels cannot be "
                                  f"put in layout {data_layout(block)}; pick a block dividing it")
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

    # ---------------------------------------------------------------- roles
    def visit(self, step: Step) -> None:
        """Re-emit one binding in the layouts the plans ask for, as its role and form say."""
        self.bound[step.var] = step.value
        self.roles[step.role](step)

    def constant(self, step: Step) -> None:
        """A constant-only binding: evaluated in numpy when it can be, else emitted as is."""
        value = step.value
        if isinstance(value, relax.Call):
            folded = eval_const(value, [self.array(arg) for arg in value.args])
            if folded is not None:
                self.consts[step.var] = folded
                return
        self.fixed(step)

    def fixed(self, step: Step) -> None:
        """An op that needs plain layouts: every argument in NCHW (NC)."""
        self.bind(step.var, self.plain_args(step.value), 0)

    def tuple_binding(self, step: Step) -> None:
        """A tuple: its readers take its fields in the layout they need."""
        value = step.value
        self.tuples[step.var] = self.tuples.get(value, value)

    def layout(self, step: Step) -> None:
        """A layout node: in its planned layouts, or plain if the x86 kernels cannot run it."""
        if step.var in self.plans:
            self.layout_node(step.var, step.value, self.plans[step.var])
        else:
            self.fixed(step)

    def passed(self, step: Step) -> None:
        """A layout-agnostic op: in the block of its data input."""
        blk = self.blocked(step.inputs[0])
        if not blk:
            self.fixed(step)
            return
        assert step.form is not None  # every pass step has a form
        self.forms[step.form](step, blk)

    def join(self, step: Step) -> None:
        """Add / concat of activations: every input brought to the join's block."""
        blk = self.join_block(step)
        value = step.value
        if step.form is Form.CONCAT_JOIN:  # axes 1, 2, 3 of NCHW are the same in NCHW{x}c
            axis = int(value.attrs.axis) % 4
            self.bind(step.var, relax.op.concat(self.get(value.args[0], blk), axis=axis), blk)
        else:
            self.bind(step.var, self.with_args(value, [self.stored(a, blk) for a in value.args]), blk)

    def stored(self, expr: relax.Expr, block: int) -> relax.Expr:
        """``expr`` in ``block`` as an elementwise op (a join, a unary or per-channel op) reads it:
        widened from its bfloat16 bits where a bfloat16 node has rounded it in that block already,
        so that the tensor is stored once, in bfloat16 (its producer writes the bits), else
        :meth:`get`. Each reader gets a widening of its own, which FuseOps fuses into it."""
        bits = self.rounded.get((expr, block, ()))
        if bits is None:
            return self.get(expr, block)
        return self.bb.emit(self.bb.call_te(x86.bf16.widen, bits, primfunc_name_hint="bfloat16_widening"),
                            name_hint=f"{expr.name}_widened")

    # ---------------------------------------------------------------- forms
    def alias(self, step: Step, blk: int) -> None:
        """``y = x``: the same tensor, in its block."""
        self.bind(step.var, self.get(step.value, blk), blk)

    def unary(self, step: Step, blk: int) -> None:
        """Elementwise op of the data input; other arguments (clip's bounds) kept."""
        x = step.inputs[0]
        args = [self.stored(a, blk) if a.same_as(x) else a for a in step.value.args]
        self.bind(step.var, self.with_args(step.value, args), blk)

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
        """Rewrite a configured conv2d (blocked) or dense (plain, anchored for legalization); a quantized
        one (``plan.quant``) on the int8 kernels (:func:`~graphtune.compiler.int8.emit_int8`)."""
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
        if plan.op in BF16_OPS:  # a conv2d (depthwise, group) or dense candidate running in bfloat16
            if op_name(call) == "relax.matmul":  # its weight [K, M]: the dense's [M, K]
                weight = weight.T
            key = (call.args[0], in_blk, rounding_key(plan))
            if key not in self.rounded:  # one conversion per tensor and layout, whatever its readers
                self.rounded[key] = rounding(self.bb, self.get(call.args[0], in_blk), plan)
            out, kernel = emit_bf16(self.bb, self.rounded[key], weight, plan)
            self.anchors[kernel] = plan
            self.bind(var, out, out_blk)
            return
        if plan.quant is not None:  # a quantized conv or dense on the int8 kernels
            if op_name(call) == "relax.matmul":  # its weight [K, M]: the dense's [M, K]
                weight = weight.T
            data = call.args[0]
            stored = stored_uint8(data, plan, self.bound.get, self.array)  # as the model stores it
            data = data if stored is None else stored
            out, kernel = emit_int8(self.bb, self.get(data, in_blk), weight, plan)
            self.anchors[kernel] = plan
            self.bind(var, out, out_blk)
            return
        if plan.op == "conv2d_transpose":  # IOHW weight kept: legalize packs it per phase
            self.transposed(var, call, plan, relax.const(weight), in_blk, out_blk)
            return
        if "winograd" in plan.knobs:  # OIHW weight kept: legalize packs it transformed
            array, klayout, groups = weight, "OIHW", 1
        else:
            array, klayout = x86.spec_of(plan.op).pack(weight, plan.workload, plan.knobs)
            # Relax types the call with the packed kernel: its input channels per group are
            # those each output block reads (a group conv's block-diagonal span).
            groups = plan.workload["data"][1] // (array.shape[1] * array.shape[4])
        kernel = relax.const(array)
        self.anchors[kernel] = plan
        attrs = call.attrs
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

    def pool(self, step: Step, blk: int) -> None:
        """A 2-D max / avg pool in the blocked layout of its input."""
        attrs, layout = step.value.attrs, data_layout(blk)
        assert step.op_name is not None  # a pool step is a call of a pool op
        make = getattr(relax.op.nn, step.op_name.rsplit(".", 1)[-1])  # max_pool2d / avg_pool2d
        pooled = make(self.get(step.inputs[0], blk),
                      pool_size=[int(v) for v in attrs.pool_size],
                      strides=[int(v) for v in attrs.strides],
                      padding=[int(v) for v in attrs.padding],
                      dilation=[int(v) for v in attrs.dilation],
                      ceil_mode=bool(attrs.ceil_mode),
                      count_include_pad=bool(attrs.count_include_pad),
                      layout=layout, out_layout=layout)
        self.bind(step.var, pooled, blk)

    def spatial_mean(self, step: Step, blk: int) -> None:
        """A keepdims mean over H and W in the blocked layout of its input (axes 2 and 3 of
        ``NCHW{x}c`` whatever their spelling in NCHW: the exporters' ``[-1, -2]`` are W and c there)."""
        self.bind(step.var, relax.op.mean(self.get(step.inputs[0], blk), axis=[2, 3], keepdims=True), blk)

    def adaptive_pool(self, step: Step, blk: int) -> None:
        """An adaptive average pool in the blocked layout of its input."""
        attrs, layout = step.value.attrs, data_layout(blk)
        size = None if attrs.output_size is None else [int(v) for v in attrs.output_size]
        self.bind(step.var, relax.op.nn.adaptive_avg_pool2d(
            self.get(step.inputs[0], blk), size, layout=layout, out_layout=layout), blk)

    def resize(self, step: Step, blk: int) -> None:
        """A resize2d in the blocked layout of its input, every other attr of the call kept; in
        ``NCHW`` instead when its readers all want ``NCHW`` and it upsamples the width by an
        integer factor :func:`graphtune.x86.resize.phased` runs per phase: the layout transform
        then moves the small input, not the large output."""
        call, attrs = step.value, step.value.attrs
        out_dtype = None if attrs.out_dtype is None else str(attrs.out_dtype)
        before, after = _shape(step.inputs[0]), _shape(step.var)  # the import's NCHW shapes
        if step.var in self.plain_readers and before and after and len(before) == len(after) == 4 \
                and phased(str(attrs.method), str(attrs.coordinate_transformation_mode), before[3], after[3]):
            blk = 0
        resized = relax.op.image.resize2d(
            self.get(step.inputs[0], blk), call.args[1], roi=[float(v) for v in attrs.roi],
            layout=data_layout(blk), method=str(attrs.method),
            coordinate_transformation_mode=str(attrs.coordinate_transformation_mode),
            rounding_method=str(attrs.rounding_method), cubic_alpha=float(attrs.cubic_alpha),
            cubic_exclude=int(attrs.cubic_exclude),
            extrapolation_value=float(attrs.extrapolation_value), out_dtype=out_dtype)
        self.bind(step.var, resized, blk)

    def channel_binary(self, step: Step, blk: int) -> None:
        """Binary op of the data input and a scalar / per-channel constant packed to the block."""
        x, call = step.inputs[0], step.value
        const = next(a for a in call.args if not a.same_as(x))
        moved = self.channel_const(const, blk, _channels(step.var))
        if moved is None:  # a constant the rewrite could not evaluate: run it plain
            self.fixed(step)
            return
        args = [self.stored(a, blk) if a.same_as(x) else moved for a in call.args]
        self.bind(step.var, self.with_args(call, args), blk)

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
        return relax.const(x86.pack_data(array, blk))

    def join_block(self, step: Step) -> int:
        """Common block of a join: configured (by the join's name), else its first blocked
        input's block when it divides every input's channels, else plain."""
        inputs = step.inputs
        channels_in = [_channels(arg) for arg in inputs]
        if step.name is not None and step.name in self.joins:
            layout = self.joins[step.name]
            blk = block_of(layout)
            if blk and any(c % blk for c in channels_in):
                # raised once the function is closed (raising inside leaves TVM printing a warning)
                self.errors.append(ConfigError(
                    f"nodes.{step.name}.out_layout: {layout} does not divide the channels "
                    f"{channels_in} of the join's inputs; give it a block that divides them, "
                    "or NCHW"))
                return 0
            return blk
        for arg in inputs:
            blk = self.blocked(arg)
            if blk and all(c % blk == 0 for c in channels_in):
                return blk
        return 0


def _where(binding: relax.VarBinding, last: str | None) -> str:
    """``binding`` as the ONNX node it comes from (or the one before it, ``last``)."""
    name = binding.var.name
    what = op_name(binding.value) or type(binding.value).__name__
    if _DEFAULT_NAME.match(name):
        return f"the {what} after ONNX node {last!r}" if last else f"the {what} ({name})"
    return f"ONNX node {name!r} ({what})"


def _failed_at(binding: relax.VarBinding, last: str | None, err: Exception) -> str:
    """Message for a TVM error raised while re-emitting ``binding``, naming its ONNX node."""
    detail = str(err).strip().splitlines()
    return (f"compile: TVM rejected {_where(binding, last)} while rewriting layouts "
            f"({type(err).__name__}: {detail[0] if detail else ''}); check the model with "
            "onnxruntime and report it")


def _plain_readers(steps: Sequence[Step], output: relax.Expr) -> frozenset:
    """Old variables read only by ``fixed`` steps (plain layouts) or as the function's output."""
    outputs = list(output.fields) if isinstance(output, relax.Tuple) else [output]
    readers: dict[relax.Var, list[Role]] = {}
    for step in steps:
        for var in step.inputs:
            readers.setdefault(var, []).append(step.role)
    for var in outputs:
        readers.setdefault(var, []).append(Role.FIXED)
    return frozenset(var for var, roles in readers.items() if all(role == Role.FIXED for role in roles))


def rewrite(mod: tvm.IRModule, plans: Mapping[relax.Var, NodePlan],
            joins: Mapping[str, str] | None = None,
            steps: Sequence[Step] | None = None) -> tuple[tvm.IRModule, dict]:
    """Rewrite ``mod["main"]`` so that each planned node runs in its configured layouts.

    Every binding is re-emitted as its :func:`~graphtune.frontend.walk` step
    says (role and form): the rewrite owns no op tables.

    Parameters
    ----------
    mod : tvm.IRModule
        Imported model: one Relax function whose body is a dataflow block, weights
        as constants (:func:`graphtune.frontend.import_model`).
    plans : mapping of relax.Var to NodePlan
        The binding variable of each layout node (``LayoutOp.var``) and its plan.
    joins : mapping of str to str, optional
        Configured joins (residual add, channel concat): the join's name (its
        walk ``Step.name``, the config's node name) to its common layout. Joins
        not listed take their first blocked input's block when it divides every
        input's channels, else ``NCHW``.
    steps : sequence of Step, optional
        ``walk(mod)``, if the caller has it already.

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
    >>> from graphtune import models, x86
    >>> from graphtune.config import Config
    >>> from graphtune.frontend import import_model, layout_ops
    >>> from graphtune.compiler.driver import plan_nodes
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> plans = plan_nodes(layout_ops(mod), Config.uniform(mod), x86.host_target())
    >>> new_mod, anchors = rewrite(mod, plans)
    >>> len(anchors), new_mod["main"].params[0].name
    (21, 'input')
    """
    func = mod["main"]
    body = func.body
    if not isinstance(body, relax.SeqExpr):
        raise LayoutError("function main: expected a body of binding blocks")
    steps = walk(mod) if steps is None else steps
    bb = relax.BlockBuilder()
    state = _Rewriter(bb, plans, joins or {}, _plain_readers(steps, body.body))
    attrs = {str(k): v for k, v in func.attrs.items()} if func.attrs is not None else {}
    with bb.function("main", list(func.params), attrs=attrs):
        with bb.dataflow():
            for param in func.params:
                state.value[param], state.block[param] = param, 0
            last = None  # the last binding named after an ONNX node
            for binding, step in zip(bindings(func), steps, strict=True):
                if not isinstance(binding, relax.VarBinding):
                    raise LayoutError(f"binding {binding.var.name}: match_cast is not "
                                      "supported; import with static shapes")
                try:
                    state.visit(step)
                except LayoutError as err:  # a tensor in a layout it cannot take: say where
                    raise LayoutError(f"{_where(binding, last)}: {err}") from None
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
    # bindings no reader needs any more (the fp32 value of a stored uint8 tensor int8 nodes read)
    new_mod = relax.transform.DeadCodeElimination(["main"])(bb.get())
    for gvar, other in mod.functions.items():
        if gvar.name_hint != "main":
            new_mod[gvar] = other
    return new_mod, state.anchors
