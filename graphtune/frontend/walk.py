"""Walk a Relax ``main`` and tell what every binding means for layouts.

One walk serves both ends of graphtune: :func:`graphtune.extract` builds the
layout graph from it and :mod:`graphtune.compiler` rewrites the same bindings,
so node names and op roles agree by construction.

Every binding of ``main`` gets a *role* (:class:`~graphtune.frontend.roles.Role`),
and ``pass`` / ``join`` bindings a *form*
(:class:`~graphtune.frontend.roles.Form`): how the compiler re-emits them in
a blocked ``NCHW{x}c`` layout. The op tables live in
:mod:`graphtune.frontend.roles`; nothing else in graphtune classifies ops.

``layout``
    A conv2d (``NCHW``/``OIHW``, static shapes, constant weight), a
    conv2d_transpose (``NCHW``/``IOHW``, likewise) or a dense (``matmul`` of a
    static rank-2 to rank-4 tensor by a constant 2-D weight): a
    :class:`LayoutOp` whose layout graphtune chooses.
``pass``
    Layout-agnostic: unary elementwise ops (relu, clip (relu6), sigmoid, erf,
    rsqrt, square, log...; ``x * x``), max/avg pools and adaptive average pools in
    ``NCHW``, spatial keepdims means (global average pool), ``NCHW`` resize2d to a
    static size (upsampling: any method and coordinate mode), binary elementwise
    ops (add, multiply, power...) with a scalar or per-channel (``[C,1,1]``,
    ``[1,C,1,1]``) constant operand (bias add, folded BN scale), and aliases
    ``y = x``. The output carries the layout of its data input.
``join``
    Binary elementwise ops (add, multiply...) of two non-constant rank-4
    tensors with the output's batch and channels (residual add, SE scaling by
    a ``[N,C,1,1]`` tensor), and ``concat`` of rank-4 tensors on axis 1: all
    inputs must share one layout.
``fixed``
    Anything that needs plain ``NCHW`` (reshape, flatten, transpose, softmax,
    other reductions, convs graphtune cannot tune...). Ops missing from graphtune's
    tables are fixed too, with one warning per op kind from :func:`walk`.
``tuple``
    Packs tensors into a tuple (multiple outputs); carries no layout itself:
    consumers of the tuple read its fields.
``const``
    Computes from constants only (bias reshapes, weight transposes).

Examples
--------
>>> from graphtune import models
>>> from graphtune.frontend import import_model
>>> mod = import_model(models.get("resnet18", image_size=32))
>>> [(s.var.name, s.role.value) for s in walk(mod)][:4]
[('conv1', 'layout'), ('lv1', 'const'), ('lv2', 'pass'), ('lv3', 'pass')]
>>> sorted({(s.role.value, s.form.value) for s in walk(mod) if s.form})
[('join', 'binary_join'), ('pass', 'channel_const'), ('pass', 'mean'), ('pass', 'pool'), ('pass', 'unary')]
"""

from __future__ import annotations

import math
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np
import tvm
from tvm import relax
from tvm.ir.expr import Constant

from ..ops import WEIGHT_PAIR_MAX, Op, conv_op, op_of
from .qdq import INT8_CHANNELS, int8_nodes
from .roles import BINARY, KNOWN_FIXED, Form, Role

__all__ = [
    "LayoutOp", "Step", "Role", "Form", "ROLES", "layout_ops", "walk", "bindings", "op_name",
    "static_shape", "dtype_of", "const_value", "scalar_value", "vars_read",
]

ROLES = tuple(Role)
"""Roles a binding of ``main`` can have (see the module docstring and :class:`Role`)."""

_UNTUNED_CONVS = {
    "relax.nn.conv1d": "conv1d (graphtune tunes 2-D convolutions only; compiled by TVM as is)",
    "relax.nn.conv3d": "conv3d (graphtune tunes 2-D convolutions only; compiled by TVM as is)",
}
"""Convolutions compiled correctly but not tuned: each gets a warning, not silence."""
_DEFAULT_NAME = re.compile(r"^(lv|gv|tmp)\d*$")


@dataclass(frozen=True)
class LayoutOp:
    """A conv2d or dense binding of ``main`` whose layout graphtune chooses.

    Parameters
    ----------
    name : str
        Stable readable name: the ONNX node name kept by
        :func:`~graphtune.frontend.import_model` (``layer1.0.conv1``), another
        non-default variable name, or ``{op}_{k}`` (k-th op of that kind).
    op : str
        ``"conv2d"``, ``"depthwise_conv2d"`` (``groups == C == O``),
        ``"group_conv2d"`` (other grouped convs), ``"conv2d_transpose"`` or ``"dense"``; a
        quantized one ``"conv2d_int8"``, ``"depthwise_conv2d_int8"``, ``"group_conv2d_int8"`` or
        ``"dense_int8"``.
    workload : dict
        The op's workload in graphtune's JSON form.
    var : tvm.relax.Var
        The variable bound to the call in ``main``.
    quant : dict or None
        For the int8 ops (:data:`graphtune.ops.INT8_OPS`): the quantization of the node's fp32
        operands (:func:`graphtune.frontend.qdq.int8_nodes`), from which the compiler recovers
        the integers.

    Examples
    --------
    >>> from graphtune import models
    >>> from graphtune.frontend import import_model
    >>> first = layout_ops(import_model(models.get("resnet18", image_size=32)))[0]
    >>> first.name, first.op, first.workload["kernel"]
    ('conv1', 'conv2d', [64, 3, 7, 7])
    """

    name: str
    op: str
    workload: dict = field(hash=False)
    var: Any
    quant: dict | None = field(default=None, hash=False, compare=False)


@dataclass(frozen=True)
class Step:
    """One binding of ``main`` and its role.

    Parameters
    ----------
    var : tvm.relax.Var
        The bound variable.
    value : tvm.relax.Expr
        The bound expression.
    role : Role
        The binding's role (str-valued: ``step.role == "pass"`` works).
    inputs : tuple of tvm.relax.Var
        Non-constant variables the value reads, in argument order, each once
        (for a ``layout`` step: the data input only).
    layout_op : LayoutOp or None
        Set for ``layout`` steps.
    op_name : str or None
        Relax op of the value (``"relax.nn.relu"``), None for non-calls.
    name : str or None
        Stable node name of ``layout`` and ``join`` steps: the variable's name
        if it is not a default one (``lv3``), else ``{op}_{k}`` (``add_4``,
        ``concat_0``; ``k`` counts that kind); None for other roles. The
        compiler finds a configured join by this name.
    form : Form or None
        For ``pass`` and ``join`` steps: how the op is re-emitted in a blocked
        layout (:class:`~graphtune.frontend.roles.Form`); None for other roles.

    Examples
    --------
    >>> from graphtune import models
    >>> from graphtune.frontend import import_model
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> sorted(Counter(s.role.value for s in walk(mod)).items())
    [('const', 21), ('fixed', 1), ('join', 8), ('layout', 21), ('pass', 40)]
    """

    var: Any
    value: Any
    role: Role
    inputs: tuple
    layout_op: LayoutOp | None = None
    op_name: str | None = None
    name: str | None = None
    form: Form | None = None


def layout_ops(mod: tvm.IRModule) -> list[LayoutOp]:
    """The conv2d / dense ops of ``mod["main"]`` whose layout graphtune chooses, in binding order.

    Names are identical across imports of the same model. Convs and matmuls
    graphtune cannot take (dynamic shape, non-constant weight, non-NCHW
    layout...) are left out with one warning per reason; they keep their
    layout.

    Parameters
    ----------
    mod : tvm.IRModule
        A module from :func:`~graphtune.frontend.import_model`.

    Returns
    -------
    list of LayoutOp

    Examples
    --------
    >>> from graphtune import models
    >>> from graphtune.frontend import import_model
    >>> ops = layout_ops(import_model(models.get("resnet50", image_size=32)))
    >>> len(ops), ops[-1].name, ops[-1].op, ops[-1].workload["weight"]
    (54, 'fc', 'dense', [1000, 2048])
    """
    return [s.layout_op for s in walk(mod) if s.role is Role.LAYOUT and s.layout_op is not None]


def walk(mod: tvm.IRModule) -> list[Step]:
    """Every binding of ``mod["main"]`` with its role, in binding order.

    Warns once per kind of op left out of the layout choice (see
    :func:`layout_ops`) and once per op unknown to graphtune (treated as
    ``fixed``).

    Examples
    --------
    >>> from graphtune import models
    >>> from graphtune.frontend import import_model
    >>> steps = walk(import_model(models.get("resnet18", image_size=32)))
    >>> [(s.name, s.op_name) for s in steps if s.role in ("join", "fixed")][-2:]
    [('layer4.1.add', 'relax.add'), (None, 'relax.reshape')]
    """
    walker = _Walker(int8_nodes(mod.attrs or {}))
    steps = _named([walker.step(b) for b in bindings(mod["main"])])
    walker.warn()
    return steps


def _named(steps: list[Step]) -> list[Step]:
    """Name layout and join steps: their variable's name unless it is a default one."""
    taken = {s.var.name for s in steps if not _DEFAULT_NAME.match(s.var.name)}
    counts: Counter = Counter()
    used: set = set()
    named = []
    for s in steps:
        if s.role in (Role.LAYOUT, Role.JOIN):
            kind = s.layout_op.op if s.layout_op is not None else (s.op_name or "").rsplit(".", 1)[-1]
            name = s.var.name
            if _DEFAULT_NAME.match(name) or name in used:
                name, k = f"{kind}_{counts[kind]}", 1
                while name in taken or name in used:
                    name, k = f"{kind}_{counts[kind]}_{k}", k + 1
            counts[kind] += 1
            used.add(name)
            layout_op = replace(s.layout_op, name=name) if s.layout_op is not None else None
            s = replace(s, layout_op=layout_op, name=name)
        named.append(s)
    return named


def bindings(func: relax.Function) -> list:
    """All bindings of ``func``'s body, block after block.

    Examples
    --------
    >>> from graphtune import models
    >>> from graphtune.frontend import import_model
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> bindings(mod["main"])[0].var.name
    'conv1'
    """
    body = func.body
    return [b for block in body.blocks for b in block.bindings] if isinstance(body, relax.SeqExpr) else []


def op_name(expr) -> str | None:
    """``"relax.nn.conv2d"`` for a call of that op, else None.

    Examples
    --------
    >>> from tvm import relax
    >>> x = relax.Var("x", relax.TensorType([1, 8], "float32"))
    >>> op_name(relax.op.nn.relu(x)), op_name(x)
    ('relax.nn.relu', None)
    """
    return getattr(expr.op, "name", None) if isinstance(expr, relax.Call) else None


def static_shape(expr) -> list[int] | None:
    """The static shape of a tensor-typed expression, None if unknown or symbolic.

    Examples
    --------
    >>> from tvm import relax
    >>> static_shape(relax.Var("x", relax.TensorType([1, 8, 4, 4], "float32")))
    [1, 8, 4, 4]
    """
    ty = getattr(expr, "ty", None)
    shape = getattr(ty, "shape", None) if isinstance(ty, relax.TensorType) else None
    values = getattr(shape, "values", None)
    if values is None or not all(isinstance(v, tvm.ir.prim.IntImm) for v in values):
        return None
    return [int(v) for v in values]


def _skipped_for(why: str) -> Callable[[Any], str]:
    """A layout-op reader that leaves every call it reads to its own layout, for ``why``."""
    return lambda call: why


def _spatial_mean(call) -> bool:
    """A keepdims mean over H and W only: a global average pool."""
    axes = sorted(int(a) % 4 for a in call.attrs.axis) if call.attrs.axis is not None else []
    return axes == [2, 3] and bool(call.attrs.keepdims)


def _spatial_resize(call, x) -> bool:
    """An ``NCHW`` resize2d of ``x`` to a static size that keeps N and C: it runs in ``x``'s block."""
    return (call.args[0].same_as(x) and isinstance(call.args[1], relax.ShapeExpr)
            and str(call.attrs.layout) == "NCHW"
            and (static_shape(call) or [])[:2] == (static_shape(x) or [])[:2])


def _spatial_slice(call, x) -> bool:
    """A ``strided_slice`` of ``x``'s H and W only: it runs in ``x``'s block."""
    axes = call.args[1] if len(call.args) > 1 else None
    if not call.args[0].same_as(x) or not isinstance(axes, relax.Tuple):
        return False
    try:
        return bool(axes.fields) and all(int(a.value) % 4 in (2, 3) for a in axes.fields)
    except (AttributeError, TypeError):  # a symbolic axis
        return False


def dtype_of(expr) -> str | None:
    """The element type of a tensor-typed Relax expression, else None."""
    ty = getattr(expr, "ty", None)
    return str(ty.dtype) if isinstance(ty, relax.TensorType) else None


def const_value(expr: relax.Expr) -> np.ndarray | None:
    """The value of a constant argument (a tensor, or a number such as clip's bounds), else None.

    Examples
    --------
    >>> const_value(relax.const(np.ones(2, "float32"))).tolist(), const_value(tvm.tirx.IntImm("int64", 6))
    ([1.0, 1.0], array(6))
    """
    if not isinstance(expr, Constant):
        return None
    value = expr.value
    return value.numpy() if hasattr(value, "numpy") else np.array(value)


def scalar_value(expr: relax.Expr) -> np.ndarray | None:
    """The value of a constant holding one value (a per-tensor scale or zero point, a clip
    bound) as a 0-d array, else None.

    Examples
    --------
    >>> scalar_value(relax.const(np.full((1, 1), 2.5, "float32"))).shape
    ()
    >>> scalar_value(relax.const(np.ones(2))) is None
    True
    """
    value = const_value(expr)
    return value.reshape(()) if value is not None and value.size == 1 else None


def _ints(values) -> list[int]:
    return [int(v) for v in values]


def _padding(attrs) -> list[int]:
    """A conv's padding as ``[top, left, bottom, right]`` (Relax may give 1 or 2 values)."""
    pad = _ints(attrs.padding)
    return {1: pad * 4, 2: pad * 2}.get(len(pad), pad)


def _int8_capable(op: str, workload: dict) -> bool:
    """Whether the int8 kernels run this quantized node: a depthwise conv, a conv2d or a batch-1
    2-D dense whose input channels are a multiple of :data:`INT8_CHANNELS`, a group conv whose
    output blocks of whole groups read such a multiple (a block of 16 outputs spans 16 / og
    groups: ``cg * 16 / og`` input channels); other dense layers and group convs stay fp32."""
    data = workload["data"]
    if op == Op.DENSE:
        return len(data) == 2 and data[0] == 1 and data[1] % INT8_CHANNELS == 0
    if op == Op.GROUP_CONV2D:
        groups, out = workload["groups"], workload["kernel"][0]
        cg, og = data[1] // groups, out // groups
        return any(out % block == 0 and block % og == 0 and cg * block // og % INT8_CHANNELS == 0
                   for block in range(og, out + 1, og))
    return op == Op.DEPTHWISE_CONV2D or (op == Op.CONV2D and data[1] % INT8_CHANNELS == 0)


def _int8_workload(op: str, workload: dict, quant: dict) -> dict:
    """The int8 workload of a quantized fp32 node's: uint8 data, dequantized float32 output, and
    (a conv2d's or dense's: a dot product over input channels) the recorded
    :data:`~graphtune.ops.WEIGHT_PAIR_MAX` of its weights, where known."""
    pairs = op in (Op.CONV2D, Op.DENSE) and WEIGHT_PAIR_MAX in quant
    return {**workload, "dtype": "uint8", "out_dtype": "float32",
            **({WEIGHT_PAIR_MAX: quant[WEIGHT_PAIR_MAX]} if pairs else {})}


class _Walker:
    """Classifies bindings one by one, remembering constants and tuples."""

    def __init__(self, quantized: dict[str, dict]) -> None:
        self.quantized = quantized
        self.consts: set = set()
        self.tuples: dict = {}
        self.skipped: dict[str, list[str]] = {}
        self.unknown: Counter = Counter()

    # -------------------------------------------------------------- operands
    def _is_const(self, expr) -> bool:
        if isinstance(expr, relax.Var):
            return expr in self.consts
        if isinstance(expr, relax.Tuple):
            return all(self._is_const(f) for f in expr.fields)
        return True  # Constant, ShapeExpr, PrimValue, StringImm

    def _data(self, expr) -> list:
        """Non-constant variables read by ``expr`` (tuples, bound or inline, flattened)."""
        if isinstance(expr, relax.Var):
            if expr in self.tuples:
                return self._data(self.tuples[expr])
            return [] if expr in self.consts else [expr]
        if isinstance(expr, relax.Tuple):
            return [v for f in expr.fields for v in self._data(f)]
        if isinstance(expr, relax.Call):
            return [v for a in expr.args for v in self._data(a)]
        if isinstance(expr, relax.TupleGetItem):
            return self._data(expr.tuple_value)
        return []

    # ----------------------------------------------------------------- steps
    def step(self, binding) -> Step:
        var, value = binding.var, binding.value
        if isinstance(value, relax.Var) and value in self.tuples:
            self.tuples[var] = self.tuples[value]  # an alias of a tuple is that tuple
        elif isinstance(value, relax.Tuple):
            self.tuples[var] = value
        data = list(dict.fromkeys(self._data(value)))
        name = op_name(value)
        form = None
        if not data:
            self.consts.add(var)
            role, layout = Role.CONST, None
        else:
            layout = self._layout_op(var, value, name)
            if layout is not None:
                role, data = Role.LAYOUT, [value.args[0]]
            else:
                role, form = self._role(var, value, name, data)
        return Step(var, value, role, tuple(data), layout, name, form=form)

    def _role(self, var, value, name, data) -> tuple[Role, Form | None]:
        if isinstance(value, relax.Var):
            return (Role.TUPLE, None) if var in self.tuples else (Role.PASS, Form.ALIAS)
        if isinstance(value, relax.Tuple):
            return Role.TUPLE, None
        if not isinstance(value, relax.Call):
            return Role.FIXED, None
        form = Form.of(name)
        if name == "relax.dequantize" and len(data) == 1 and value.args[0].same_as(data[0]) \
                and all(scalar_value(arg) is not None for arg in value.args[1:]):
            return Role.PASS, Form.UNARY  # one scale and zero point: any layout
        if name in BINARY:
            return self._binary_role(value, data)
        if form is not None and len(data) == 1 and self._blockable(value, form, data[0]):
            return Role.PASS, form
        if name == "relax.concat":
            return self._concat_role(value, data)
        if form is None and name not in KNOWN_FIXED:
            self.unknown[name or type(value).__name__] += 1
        return Role.FIXED, None

    @staticmethod
    def _blockable(call, form: Form, x) -> bool:
        """Whether a one-tensor op of ``form`` on ``x`` runs in ``x``'s blocked layout."""
        if form is Form.UNARY:
            return call.args[0].same_as(x)
        if len(static_shape(call) or []) != 4 or len(static_shape(x) or []) != 4:
            return False
        if form is Form.MEAN:
            return _spatial_mean(call)
        if form is Form.RESIZE:
            return _spatial_resize(call, x)
        if form is Form.SPATIAL_SLICE:
            return _spatial_slice(call, x)
        # pools and adaptive pools: Relax re-makes them with NCHW{x}c layout attrs
        return str(call.attrs.layout) == "NCHW" and str(call.attrs.out_layout) == "NCHW"

    def _binary_role(self, call, data) -> tuple[Role, Form | None]:
        out = static_shape(call)
        fixed = (Role.FIXED, None)
        if len(data) == 2:
            shapes = [static_shape(v) for v in data]
            if out and len(out) == 4 and all(s and len(s) == 4 and s[:2] == out[:2] for s in shapes):
                return Role.JOIN, Form.BINARY_JOIN
            return fixed
        x = data[0]
        shape = static_shape(x)
        if all(arg.same_as(x) for arg in call.args):  # x * x: elementwise on one tensor
            return (Role.PASS, Form.UNARY) if shape is not None and out == shape else fixed
        other = call.args[1] if call.args[0].same_as(x) else call.args[0]
        cshape = static_shape(other)
        if shape is None or out != shape or cshape is None or not isinstance(other, (relax.Var, Constant)):
            return fixed
        if len(shape) != 4 or math.prod(cshape) == 1:
            # 2-D tensors have one layout; scalars broadcast in any layout
            return Role.PASS, Form.CHANNEL_CONST
        per_channel = cshape in ([shape[1], 1, 1], [1, shape[1], 1, 1])
        return (Role.PASS, Form.CHANNEL_CONST) if per_channel else fixed

    def _concat_role(self, call, data) -> tuple[Role, Form | None]:
        fields = call.args[0]
        if isinstance(fields, relax.Var):
            fields = self.tuples.get(fields)
        fixed = (Role.FIXED, None)
        if not isinstance(fields, relax.Tuple) or call.attrs.axis is None:
            return fixed
        shapes = [static_shape(f) for f in fields.fields]
        if any(self._is_const(f) for f in fields.fields) or not all(s and len(s) == 4 for s in shapes):
            return fixed
        return (Role.JOIN, Form.CONCAT_JOIN) if int(call.attrs.axis) % 4 in (1, 2, 3) else fixed

    # ------------------------------------------------------------ layout ops
    def _layout_op(self, var, call, name) -> LayoutOp | None:
        readers: dict[str, Callable[[Any], Any]] = {
            "relax.nn.conv2d": self._conv2d,
            "relax.nn.conv2d_transpose": self._conv2d_transpose,
            "relax.matmul": self._dense,
            **{op: _skipped_for(why) for op, why in _UNTUNED_CONVS.items()},
        }
        if name not in readers:
            return None
        found = readers[name](call)
        if isinstance(found, str):
            if found:
                self.skipped.setdefault(found, []).append(var.name)
            return None
        op, workload = found
        quant = self.quantized.get(var.name)
        if quant is not None and _int8_capable(op, workload):
            int8 = _int8_workload(op, workload, quant)
            return LayoutOp("", op_of(int8), int8, var, quant)
        return LayoutOp("", op, workload, var)

    def _conv_operands(self, call, op: str, kernel_layout: str) -> tuple | str:
        """``(data shape, weight shape, dtype)`` of a conv graphtune can read, else why not."""
        attrs = call.attrs
        data, weight = call.args[0], call.args[1]
        dshape, wshape = static_shape(data), static_shape(weight)
        if dshape is None or wshape is None or static_shape(call) is None:
            return f"{op} with a dynamic shape"
        if not self._is_const(weight):
            return f"{op} with a non-constant weight (bind weights with relax.transform.BindParams)"
        layouts = (str(attrs.data_layout), str(attrs.kernel_layout), str(attrs.out_layout))
        if layouts != ("NCHW", kernel_layout, "NCHW"):
            return f"{op} in layout {'/'.join(layouts)} (graphtune reads NCHW/{kernel_layout} ones)"
        dtype = dtype_of(data)
        if dtype_of(call) != dtype or dtype_of(weight) != dtype:
            return f"{op} with mixed dtypes"
        return dshape, wshape, dtype

    def _conv2d(self, call) -> tuple[str, dict] | str:
        operands = self._conv_operands(call, "conv2d", "OIHW")
        if isinstance(operands, str):
            return operands
        dshape, wshape, dtype = operands
        attrs = call.attrs
        groups = int(attrs.groups)
        workload = {
            "data": dshape, "kernel": wshape, "strides": _ints(attrs.strides),
            "padding": _padding(attrs), "dilation": _ints(attrs.dilation), "groups": groups,
            "dtype": dtype,
        }
        return conv_op(groups, dshape[1], wshape[0]), workload

    def _conv2d_transpose(self, call) -> tuple[str, dict] | str:
        operands = self._conv_operands(call, "conv2d_transpose", "IOHW")
        if isinstance(operands, str):
            return operands
        dshape, wshape, dtype = operands
        attrs = call.attrs
        if int(attrs.groups) != 1 or _ints(attrs.dilation) != [1, 1]:
            return "conv2d_transpose with groups > 1 or dilation (graphtune.x86 runs groups=1, dilation 1)"
        return "conv2d_transpose", {
            "data": dshape, "kernel": wshape, "strides": _ints(attrs.strides),
            "padding": _padding(attrs),
            "output_padding": _ints(attrs.output_padding), "dilation": _ints(attrs.dilation),
            "groups": int(attrs.groups), "dtype": dtype,
        }

    def _dense(self, call) -> tuple[str, dict] | str:
        data, weight = call.args[0], call.args[1]
        dshape, wshape = static_shape(data), static_shape(weight)
        if not self._is_const(weight) or self._is_const(data):
            return ""  # an activation-by-activation matmul: not a dense layer, a fixed op
        if dshape is None or wshape is None:
            return "dense (matmul) with a dynamic shape"
        if not 2 <= len(dshape) <= 4 or len(wshape) != 2:
            return f"matmul of rank {len(dshape)} by rank {len(wshape)} (dense needs rank 2-4 by 2-D)"
        dtype = dtype_of(data)
        if dtype_of(call) != dtype or dtype_of(weight) != dtype:
            return "dense (matmul) with mixed dtypes"
        return "dense", {"data": dshape, "weight": [wshape[1], wshape[0]], "dtype": dtype}

    def warn(self) -> None:
        for kind, names in self.skipped.items():
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            warnings.warn(
                f"graphtune.frontend: {len(names)} {kind} ({shown}) left out of the layout "
                "choice; they keep the default NCHW layout",
                stacklevel=3,
            )
        for name, count in sorted(self.unknown.items()):
            warnings.warn(
                f"graphtune.frontend: op {name} ({count}x) is unknown to graphtune; treated as a "
                "fixed-layout (NCHW) boundary",
                stacklevel=3,
            )


def vars_read(expr: relax.Expr) -> set[relax.Var]:
    """The vars an expression reads directly: itself, a tuple's fields, a call's arguments (and
    the fields of a tuple argument, as ``call_tir`` passes its inputs).

    Examples
    --------
    >>> x = relax.Var("x", relax.TensorType([2], "float32"))
    >>> vars_read(relax.op.add(x, relax.const(1.0))) == {x}
    True
    """
    if isinstance(expr, relax.Var):
        return {expr}
    if isinstance(expr, relax.Tuple):
        return {f for f in expr.fields if isinstance(f, relax.Var)}
    if isinstance(expr, relax.Call):
        return set().union(*(vars_read(a) for a in expr.args if isinstance(a, (relax.Var, relax.Tuple))))
    return set()
