"""Walk a Relax ``main`` and tell what every binding means for layouts.

One walk serves both ends of graphtune: :func:`graphtune.extract` builds the
layout graph from it and :mod:`graphtune.compiler` rewrites the same bindings,
so node names and op roles agree by construction.

Every binding of ``main`` gets a *role*:

``layout``
    A conv2d (``NCHW``/``OIHW``, static shapes, constant weight), a
    conv2d_transpose (``NCHW``/``IOHW``, likewise) or a dense (``matmul`` of a
    static rank-2 to rank-4 tensor by a constant 2-D weight): a
    :class:`LayoutOp` whose layout graphtune chooses.
``pass``
    Layout-agnostic: unary elementwise ops (relu, clip, sigmoid...), max/avg
    pools, spatial keepdims means (global average pool), and binary elementwise
    ops with a scalar or per-channel (``[C,1,1]``, ``[1,C,1,1]``) constant
    operand (bias add, folded BN scale, relu6 bounds). The output carries the
    layout of its data input.
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
>>> [(s.var.name, s.role) for s in walk(mod)][:4]
[('conv1', 'layout'), ('lv1', 'const'), ('lv2', 'pass'), ('lv3', 'pass')]
"""

from __future__ import annotations

import math
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import tvm
from tvm import relax

__all__ = ["LayoutOp", "Step", "ROLES", "layout_ops", "walk", "bindings", "op_name", "static_shape"]

ROLES = ("layout", "pass", "join", "fixed", "tuple", "const")
"""Roles a binding of ``main`` can have (see the module docstring)."""

_UNARY = frozenset(
    "relax." + n
    for n in (
        "nn.relu", "clip", "sigmoid", "tanh", "nn.silu", "nn.gelu", "nn.leakyrelu", "exp", "sqrt",
        "negative", "abs", "nn.relu6", "nn.prelu_scalar",
    )
)
_POOLS = frozenset({"relax.nn.max_pool2d", "relax.nn.avg_pool2d"})
_BINARY = frozenset(
    "relax." + n for n in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power")
)
_KNOWN_FIXED = frozenset(
    "relax." + n
    for n in (
        "reshape", "permute_dims", "flatten", "nn.softmax", "nn.log_softmax", "mean", "sum", "max",
        "min", "squeeze", "expand_dims", "strided_slice", "split", "take", "concat", "matmul",
        "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv2d_transpose", "image.resize2d", "nn.pad",
        "astype", "broadcast_to", "tile", "argmax", "topk", "nn.batch_norm", "nn.dropout",
        "nn.adaptive_avg_pool2d", "where", "isnan", "rsqrt", "square", "erf",
        "nn.layer_norm", "nn.group_norm", "nn.instance_norm",
    )
)
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
        ``"group_conv2d"`` (other grouped convs), ``"conv2d_transpose"`` or ``"dense"``.
    workload : dict
        The op's workload in graphtune's JSON form.
    var : tvm.relax.Var
        The variable bound to the call in ``main``.

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


@dataclass(frozen=True)
class Step:
    """One binding of ``main`` and its role.

    Parameters
    ----------
    var : tvm.relax.Var
        The bound variable.
    value : tvm.relax.Expr
        The bound expression.
    role : str
        One of :data:`ROLES`.
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
        ``concat_0``; ``k`` counts that kind); None for other roles.

    Examples
    --------
    >>> from graphtune import models
    >>> from graphtune.frontend import import_model
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> sorted(Counter(s.role for s in walk(mod)).items())
    [('const', 21), ('fixed', 1), ('join', 8), ('layout', 21), ('pass', 40)]
    """

    var: Any
    value: Any
    role: str
    inputs: tuple
    layout_op: LayoutOp | None = None
    op_name: str | None = None
    name: str | None = None


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
    return [s.layout_op for s in walk(mod) if s.role == "layout"]


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
    walker = _Walker()
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
        if s.role in ("layout", "join"):
            kind = s.layout_op.op if s.role == "layout" else s.op_name.rsplit(".", 1)[-1]
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


def _spatial_mean(call) -> bool:
    """A keepdims mean over H and W only: a global average pool."""
    axes = sorted(int(a) % 4 for a in call.attrs.axis) if call.attrs.axis is not None else []
    return axes == [2, 3] and bool(call.attrs.keepdims)


def _dtype(expr) -> str | None:
    ty = getattr(expr, "ty", None)
    return str(ty.dtype) if isinstance(ty, relax.TensorType) else None


def _ints(values) -> list[int]:
    return [int(v) for v in values]


class _Walker:
    """Classifies bindings one by one, remembering constants and tuples."""

    def __init__(self) -> None:
        self.consts: set = set()
        self.roles: dict = {}
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
        if isinstance(value, relax.Tuple):
            self.tuples[var] = value
        data = list(dict.fromkeys(self._data(value)))
        name = op_name(value)
        if not data:
            self.consts.add(var)
            role, layout = "const", None
        else:
            layout = self._layout_op(var, value, name)
            role = "layout" if layout is not None else self._role(value, name, data)
            if layout is not None:
                data = [value.args[0]]
        self.roles[var] = role
        return Step(var, value, role, tuple(data), layout, name)

    def _role(self, value, name, data) -> str:
        if isinstance(value, relax.Var):
            return "pass"
        if isinstance(value, relax.Tuple):
            return "tuple"
        if not isinstance(value, relax.Call):
            return "fixed"
        four_d = len(static_shape(value) or []) == 4
        if name in _UNARY and len(data) == 1:
            return "pass"
        if name in _POOLS and four_d and str(value.attrs.layout) == "NCHW":
            return "pass"
        if name == "relax.mean" and four_d and _spatial_mean(value):
            return "pass"
        if name in _BINARY:
            return self._binary_role(value, data)
        if name == "relax.concat":
            return self._concat_role(value, data)
        if name not in _KNOWN_FIXED:
            self.unknown[name or type(value).__name__] += 1
        return "fixed"

    def _binary_role(self, call, data) -> str:
        out = static_shape(call)
        if len(data) == 2:
            shapes = [static_shape(v) for v in data]
            if out and len(out) == 4 and all(s and len(s) == 4 and s[:2] == out[:2] for s in shapes):
                return "join"
            return "fixed"
        x = data[0]
        shape = static_shape(x)
        other = call.args[1] if call.args[0].same_as(x) else call.args[0]
        cshape = static_shape(other)
        if shape is None or out != shape or cshape is None:
            return "fixed"
        if len(shape) != 4 or math.prod(cshape) == 1:
            return "pass"  # 2-D tensors have one layout; scalars broadcast in any layout
        per_channel = cshape in ([shape[1], 1, 1], [1, shape[1], 1, 1])
        return "pass" if per_channel else "fixed"

    def _concat_role(self, call, data) -> str:
        fields = call.args[0]
        if isinstance(fields, relax.Var):
            fields = self.tuples.get(fields)
        if not isinstance(fields, relax.Tuple) or call.attrs.axis is None:
            return "fixed"
        shapes = [static_shape(f) for f in fields.fields]
        if any(self._is_const(f) for f in fields.fields) or not all(s and len(s) == 4 for s in shapes):
            return "fixed"
        return "join" if int(call.attrs.axis) in (1, -3) else "fixed"

    # ------------------------------------------------------------ layout ops
    def _layout_op(self, var, call, name) -> LayoutOp | None:
        readers = {
            "relax.nn.conv2d": self._conv2d,
            "relax.nn.conv2d_transpose": self._conv2d_transpose,
            "relax.matmul": self._dense,
            **{op: (lambda call, why=why: why) for op, why in _UNTUNED_CONVS.items()},
        }
        if name not in readers:
            return None
        found = readers[name](call)
        if isinstance(found, str):
            if found:
                self.skipped.setdefault(found, []).append(var.name)
            return None
        op, workload = found
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
        dtype = _dtype(data)
        if _dtype(call) != dtype or _dtype(weight) != dtype:
            return f"{op} with mixed dtypes"
        return dshape, wshape, dtype

    def _conv2d(self, call) -> tuple[str, dict] | str:
        operands = self._conv_operands(call, "conv2d", "OIHW")
        if isinstance(operands, str):
            return operands
        dshape, wshape, dtype = operands
        attrs = call.attrs
        pad = _ints(attrs.padding)
        pad = {1: pad * 4, 2: pad * 2}.get(len(pad), pad)
        groups = int(attrs.groups)
        workload = {
            "data": dshape, "kernel": wshape, "strides": _ints(attrs.strides), "padding": pad,
            "dilation": _ints(attrs.dilation), "groups": groups, "dtype": dtype,
        }
        if groups == 1:
            return "conv2d", workload
        depthwise = groups == dshape[1] == wshape[0] and wshape[1] == 1
        return ("depthwise_conv2d" if depthwise else "group_conv2d"), workload

    def _conv2d_transpose(self, call) -> tuple[str, dict] | str:
        operands = self._conv_operands(call, "conv2d_transpose", "IOHW")
        if isinstance(operands, str):
            return operands
        dshape, wshape, dtype = operands
        attrs = call.attrs
        if int(attrs.groups) != 1 or _ints(attrs.dilation) != [1, 1]:
            return "conv2d_transpose with groups > 1 or dilation (graphtune.x86 runs groups=1, dilation 1)"
        pad = _ints(attrs.padding)
        return "conv2d_transpose", {
            "data": dshape, "kernel": wshape, "strides": _ints(attrs.strides),
            "padding": {1: pad * 4, 2: pad * 2}.get(len(pad), pad),
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
        dtype = _dtype(data)
        if _dtype(call) != dtype or _dtype(weight) != dtype:
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
