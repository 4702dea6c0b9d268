"""Import a model (ONNX or Relax) into a static-shape Relax ``IRModule``.

ONNX models go through ``tvm.relax.frontend.onnx.from_onnx`` with the
initializers as constants (``keep_params_in_input=False``), so every conv and
dense weight is a ``Constant`` the compiler can pre-transform and fold. The
Relax importer forgets ONNX node names (its variables are ``lv``, ``lv1``...)
and binds a call only when a later node reads it (a residual branch's conv after
the other branch), so :func:`relax_import` binds the conv, matmul, add, multiply
or concat call of each ``Conv`` / ``ConvTranspose`` / ``Gemm`` / ``MatMul`` node and each
``Add`` / ``Mul`` / ``Concat`` of activations as the node is converted, under the node's name
(``layer1.0.conv1``, ``layer1.0.add``). :func:`graphtune.frontend.walk` then reads
these names.

The importer lowers ``Clip`` (relu6) to TIR ``maximum`` / ``minimum``
functions with fixed 4-D buffers; :func:`import_model` turns them back into
the layout-agnostic Relax ops. An inference ``BatchNormalization`` with
constant statistics becomes what it computes, a per-channel scale and shift
(``multiply`` + ``add`` by ``[C, 1, 1]`` constants), which runs in any channel
layout. Shape computations (``Shape -> Gather -> ... -> Reshape``) are folded
on the ONNX graph first (:func:`graphtune.frontend.fold.fold_constants`), dilated conv
taps that read only padding are dropped (:func:`graphtune.frontend.taps.drop_dead_taps`) and
convs whose output positions mostly read padding with some taps are split by band
(:func:`graphtune.frontend.taps.split_by_band`), and convs
with odd output-channel counts whose output leaves the blocked layout anyway
compute a few zero channels more (:func:`graphtune.frontend.pad.pad_output_channels`).

Examples
--------
>>> from graphtune import models
>>> mod = import_model(models.get("resnet18", image_size=32))
>>> mod["main"].params[0].name
'input'
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import onnx_frontend

from ..errors import ModelError
from .fold import fold_constants
from .pad import pad_channel_chains, pad_int8_input_channels, pad_output_channels
from .qdq import INT8_NODES, rewrite_qdq
from .taps import drop_dead_taps, split_by_band
from .walk import _DEFAULT_NAME, op_name, scalar_value

__all__ = ["import_model", "prepare_onnx", "ImportFailure", "relax_import", "roi_align_half_pixel"]

# ONNX op types and the Relax op whose binding is named after the node: the call the
# importer returns for the node, or the first such call nested in it (a Conv's bias add
# wraps its conv2d, a Gemm's add its matmul).
_NAMED_CALLS = {
    "Conv": frozenset({"relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv3d"}),
    "ConvTranspose": frozenset({"relax.nn.conv1d_transpose", "relax.nn.conv2d_transpose"}),
    "Gemm": frozenset({"relax.matmul"}),
    "MatMul": frozenset({"relax.matmul"}),
    "Add": frozenset({"relax.add"}),
    "Mul": frozenset({"relax.multiply"}),
    "Concat": frozenset({"relax.concat"}),
}
_JOIN_OPS = frozenset({"Add", "Mul", "Concat"})


def import_model(
    model: onnx.ModelProto | str | os.PathLike | tvm.IRModule,
    *,
    shape_dict: Mapping[str, Sequence[int]] | None = None,
) -> tvm.IRModule:
    """Import ``model`` into Relax with static shapes and constant weights.

    Parameters
    ----------
    model : onnx.ModelProto, path to an ``.onnx`` file, or tvm.IRModule
        An IRModule is returned unchanged (it must have a ``main`` function).
    shape_dict : mapping of str to sequence of int, optional
        Static shapes for ONNX graph inputs whose shape has symbolic or
        unknown dimensions (e.g. ``{"input": [1, 3, 224, 224]}``).

    Returns
    -------
    tvm.IRModule
        ``main`` takes the graph inputs only; the variable bound to each
        conv, matmul and join (add / mul / concat of activations) is named
        after its ONNX node when it has one; ONNX ``Clip`` is
        ``R.maximum`` / ``R.minimum`` with scalar bounds.

    Raises
    ------
    ModelError
        Unreadable file, not an ONNX model, an input with a dynamic shape not
        fixed by ``shape_dict``, a node the Relax importer cannot convert (named;
        :func:`graphtune.tune` and :func:`graphtune.compile` run such nodes in ONNX
        Runtime instead, ``docs/partition.md``), or an IRModule without ``main``.

    Examples
    --------
    >>> from graphtune import models
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> mod["main"].body.blocks[0].bindings[0].var.name
    'conv1'
    """
    if isinstance(model, tvm.IRModule):
        if "main" not in [gv.name_hint for gv in model.get_global_vars()]:
            raise ModelError("the IRModule has no 'main' function; graphtune imports main(inputs...)")
        return model
    proto = _load_onnx(model)
    shapes = _static_input_shapes(proto, shape_dict)
    proto = prepare_onnx(proto, shapes)
    mod, failure = relax_import(proto, shapes)
    if failure is not None:
        raise ModelError(f"{failure}; graphtune.tune and graphtune.compile run such nodes in "
                         "ONNX Runtime (docs/partition.md)")
    assert mod is not None  # no failure: a module
    main = _TirClipToRelax(mod).visit_expr(mod["main"])
    main = _ClippedCastToAstype(mod).visit_expr(_BatchNormToAffine(mod).visit_expr(main))
    mod["main"] = main
    quantized = {p.key: p.value for p in proto.metadata_props}.get(INT8_NODES)
    if quantized:  # the convs and dense layers the int8 kernels run, for frontend.walk
        mod = mod.with_attr(INT8_NODES, quantized)
    return relax.transform.DeadCodeElimination(["main"])(mod)


@dataclass(frozen=True)
class ImportFailure:
    """The first ONNX node the Relax importer cannot convert (or, strictly, gives no static shape).

    Attributes
    ----------
    index : int
        The node's position in the graph.
    node : str
        The node's name (``#k`` for the k-th node when it has none).
    op_type : str
        Its ONNX op type.
    reason : str
        Why, in one line.

    Examples
    --------
    >>> str(ImportFailure(3, "loop", "Loop", "not supported by the Relax ONNX frontend"))
    "ONNX node 'loop' (Loop) cannot be imported into TVM Relax: not supported by the Relax ONNX frontend"
    """

    index: int
    node: str
    op_type: str
    reason: str

    def __str__(self) -> str:
        return f"ONNX node {self.node!r} ({self.op_type}) cannot be imported into TVM Relax: {self.reason}"


def relax_import(proto: onnx.ModelProto, shapes: Mapping[str, Sequence[int]], *,
                 strict: bool = False) -> tuple[tvm.IRModule | None, ImportFailure | None]:
    """Run TVM's Relax ONNX importer on ``proto`` node by node, naming the node it stops at.

    ``import_model`` without graphtune's preparation and clean-ups; the partition of a model
    (:mod:`graphtune.frontend.cut`) asks it which nodes TVM takes.

    Parameters
    ----------
    proto : onnx.ModelProto
        The model, as given to the importer.
    shapes : mapping of str to sequence of int
        Static shapes of the graph inputs.
    strict : bool
        Also fail at the first node whose output has a symbolic (data-dependent) shape, and
        at a graph output that is not a tensor.

    Returns
    -------
    (tvm.IRModule, None) or (None, ImportFailure)

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    >>> y = helper.make_tensor_value_info("y", TensorProto.INT64, [1, None])
    >>> graph = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"], name="nz")], "g",
    ...                           [x], [y])
    >>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    >>> relax_import(model, {"x": [4]})[1] is None
    True
    >>> print(relax_import(model, {"x": [4]}, strict=True)[1])
    ONNX node 'nz' (NonZero) cannot be imported into TVM Relax: its output shape ... is data-dependent
    """
    supported = onnx_frontend._get_convert_map()
    for index, node in enumerate(proto.graph.node):
        if node.op_type not in supported and node.op_type not in ("If", "Constant"):
            return None, ImportFailure(index, _node_name(node, index), node.op_type,
                                       "not supported by the Relax ONNX frontend")
    graph = _uniquely_named(proto).graph
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 1)
    importer = _TracingImporter(dict(shapes), strict, _joins(graph))
    try:
        with _quiet():
            mod = importer.from_onnx(graph, opset)
            if strict:
                importer.check_outputs(graph)
    except Exception as err:  # the importer raises bare ValueError/AssertionError/TVMError
        importer.close()
        index = importer.failed_at(graph)
        reason = err.reason if isinstance(err, _NotStatic) else \
            f"{type(err).__name__}: {_first_line(err)}"
        node = proto.graph.node[index]
        return None, ImportFailure(index, _node_name(node, index), node.op_type, reason)
    if importer.names:
        mod["main"] = _Renamer(importer.names).visit_expr(mod["main"])
    return mod, None


def _text(attrs: Mapping[str, Any], key: str, default: str) -> str:
    """A string attribute of a converted node (the importer hands them over as bytes)."""
    value = attrs.get(key, default)
    return value.decode() if isinstance(value, bytes) else str(value)


def _roi_align_mode(attrs: Mapping[str, Any], opset: int) -> str:
    return _text(attrs, "coordinate_transformation_mode", "half_pixel" if opset >= 16 else "")


def roi_align_half_pixel(bb: relax.BlockBuilder, inputs: Sequence[relax.Expr],
                         attrs: Mapping[str, Any], params: Any = None) -> relax.Expr:
    """ONNX ``RoiAlign`` in ``half_pixel`` mode as Relax's ``roi_align``: ONNX shifts the
    *scaled* ROI by half a pixel (``x1 * spatial_scale - 0.5``), so the ROIs are shifted by
    ``0.5 / spatial_scale`` before scaling (TVM 0.27's converter shifts them by 0.5, right only
    for a scale of 1), then aligned (no minimum ROI size).

    Examples
    --------
    >>> from tvm import relax
    >>> bb = relax.BlockBuilder()
    >>> data = relax.Var("x", relax.TensorType((1, 8, 10, 10), "float32"))
    >>> rois = relax.Var("rois", relax.TensorType((3, 4), "float32"))
    >>> index = relax.Var("index", relax.TensorType((3,), "int64"))
    >>> with bb.function("main", [data, rois, index]):
    ...     out = bb.emit(roi_align_half_pixel(bb, [data, rois, index], {"output_height": 7,
    ...         "output_width": 7, "sampling_ratio": 2, "spatial_scale": 0.25}))
    ...     _ = bb.emit_func_output(out)
    >>> [int(d) for d in out.ty.shape]
    [3, 8, 7, 7]
    """
    data, rois, index = inputs
    scale = float(attrs.get("spatial_scale", 1.0))
    shifted = relax.op.subtract(rois, relax.const(0.5 / scale, rois.ty.dtype))
    index = relax.op.astype(relax.op.expand_dims(index, axis=1), rois.ty.dtype)
    return relax.op.vision.roi_align(
        data, relax.op.concat([index, shifted], axis=1),
        pooled_size=(int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))),
        spatial_scale=scale, sample_ratio=int(attrs.get("sampling_ratio", 0)), aligned=True,
        layout="NCHW", mode=_text(attrs, "mode", "avg"))


def _uniquely_named(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto``, or a copy whose nodes without a name or with a taken one are named ``#k``
    (the importer tells nodes apart by name only; it names nothing after them)."""
    names = [n.name for n in proto.graph.node]
    if "" not in names and len(set(names)) == len(names):
        return proto
    named = onnx.ModelProto()
    named.CopyFrom(proto)
    seen: set[str] = set()
    for index, node in enumerate(named.graph.node):
        if not node.name or node.name in seen:
            node.name = f"#{index}"
        seen.add(node.name)
    return named


class _NotStatic(Exception):
    """A node's output has no static shape (strict import)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _TracingImporter(onnx_frontend.ONNXGraphImporter):
    """TVM's importer, remembering the node it converts (and, strict, checking its shapes)."""

    def __init__(self, shapes: dict, strict: bool, joins: set[str]) -> None:
        super().__init__(shapes, "float32", keep_params_in_input=False, sanitize=True)
        self.strict = strict
        self.current: str | None = None
        self.last_done: str | None = None
        self.bound: set[str] = set()
        self.joins = joins  # the Add / Mul / Concat nodes named: those of activations only
        self.names: dict[relax.Var, str] = {}  # bindings named after their ONNX node

    def _free_name(self, name: str | None) -> bool:
        """True (and taken from now on) if ``name`` may name a binding: not empty or made up by
        :func:`_uniquely_named`, not a default variable name, not a graph input's, not bound
        before."""
        if (not name or name.startswith("#") or _DEFAULT_NAME.match(name) or name in self.bound
                or name in self._inputs):
            return False
        self.bound.add(name)
        return True

    def _convert_operator(self, op_name, inputs, attrs, opset):  # TVM importer hook
        self.current = attrs["tvm_custom"]["name"]
        # TVM's _convert_operator, binding the named call before normalize binds its nested
        # calls under default names
        convert_map = onnx_frontend._get_convert_map()
        if op_name not in convert_map:
            raise NotImplementedError(f"Operator {op_name} not implemented.")
        converter = convert_map[op_name].get_converter(opset)
        if op_name == "RoiAlign" and _roi_align_mode(attrs, opset) == "half_pixel":
            converter = roi_align_half_pixel
        sym = converter(self.bb, inputs, attrs, [self._nodes, self._params])
        if op_name in _NAMED_CALLS and (op_name not in _JOIN_OPS or self.current in self.joins) \
                and self._free_name(self.current):
            sym = _bind_named(self.bb, sym, _NAMED_CALLS[op_name], self.current, self.names)
        if isinstance(sym, relax.Expr):
            sym = self.bb.normalize(sym)
        if self.strict and isinstance(sym, relax.Expr) and not _static_type(sym.ty):
            raise _NotStatic(f"its output shape {sym.ty} is data-dependent")
        self.last_done, self.current = self.current, None
        return sym

    def close(self) -> None:
        """End the block and scope a failed import left open (else TVM warns when the builder
        is freed)."""
        with contextlib.suppress(Exception):
            self.bb._end_block()
            self.bb.end_scope()

    def check_outputs(self, graph: onnx.GraphProto) -> None:
        """Raise _NotStatic at the producer of the first graph output that is no static tensor."""
        producers = {o: n.name for n in graph.node for o in n.output}
        for output in graph.output:
            ty = self._nodes[output.name].ty
            if not (isinstance(ty, relax.TensorType) and _static_type(ty)):
                self.current = producers.get(output.name)
                raise _NotStatic(f"its output {output.name!r} is a {ty}, not a static tensor")

    def failed_at(self, graph: onnx.GraphProto) -> int:
        """Index of the node the import stopped at: the one being converted, else the one after
        the last converted."""
        names = [n.name for n in graph.node]
        if self.current in names:
            return names.index(self.current)
        return names.index(self.last_done) + 1 if self.last_done in names else 0


def _joins(graph: onnx.GraphProto) -> set[str]:
    """Names of the Add / Mul / Concat nodes of two or more activations (no initializer or
    ``Constant`` output among their inputs): a conv's or a quantization's constant operand
    leaves its node unnamed.

    Examples
    --------
    >>> from onnx import helper
    >>> nodes = [helper.make_node("Add", ["x", "y"], ["s"], name="join"),
    ...          helper.make_node("Add", ["s", "b"], ["t"], name="bias")]
    >>> sorted(_joins(helper.make_graph(nodes, "g", [], [], [helper.make_tensor("b", 1, [1], [0.0])])))
    ['join']
    """
    consts = {t.name for t in graph.initializer}
    consts |= {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    return {n.name for n in graph.node
            if n.op_type in _JOIN_OPS and len(n.input) > 1 and not consts & set(n.input)}


def _bind_named(bb: relax.BlockBuilder, expr: Any, ops: frozenset, name: str,
                names: dict[relax.Var, str]) -> Any:
    """``expr`` with its first call of ``ops`` (itself, else depth-first in its arguments)
    bound by ``bb``, the variable recorded in ``names`` under ``name`` (``bb`` would rewrite
    the dots of ONNX names); unchanged when there is none."""
    if not isinstance(expr, relax.Call):
        return expr
    if op_name(expr) in ops:
        var = bb.emit(expr)
        names[var] = name
        return var
    args = list(expr.args)
    for k, arg in enumerate(args):
        bound = _bind_named(bb, arg, ops, name, names)
        if bound is not arg:
            args[k] = bound
            return relax.Call(expr.op, args, expr.attrs, expr.ty_args)
    return expr


@relax.expr_functor.mutator
class _Renamer(relax.PyExprMutator):
    """Give the variables in ``names`` new names; their uses follow automatically."""

    def __init__(self, names: dict) -> None:
        super().__init__()
        self.names = names

    def visit_dataflow_var_def_(self, var):  # TVM visitor hook
        name = self.names.get(var)
        return var if name is None else relax.DataflowVar(name, var.ty)

    def visit_var_def_(self, var):  # TVM visitor hook
        name = self.names.get(var)
        return var if name is None else relax.Var(name, var.ty)


def _static_type(ty) -> bool:
    """True if a Relax type has static shapes throughout (tensors, shapes, tuples, scalars)."""
    if isinstance(ty, relax.TupleType):
        return all(_static_type(field) for field in ty.fields)
    if isinstance(ty, relax.TensorType):
        values = getattr(ty.shape, "values", None)
    elif isinstance(ty, relax.ShapeType):
        values = ty.values
    else:
        return isinstance(ty, tvm.ir.PrimType)
    return values is not None and all(isinstance(v, tvm.ir.prim.IntImm) for v in values)


def _node_name(node: onnx.NodeProto, index: int) -> str:
    return node.name or f"#{index}"


def _first_line(err: Exception) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else ""


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The importer's warnings (renamed inputs...) and prints (failed conversions) silenced."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def prepare_onnx(proto: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]) -> onnx.ModelProto:
    """The ONNX graph :func:`import_model` hands to TVM: quantization nodes rewritten into fp32
    (:func:`~graphtune.frontend.qdq.rewrite_qdq`), shape computations folded for the static
    input ``shapes`` (:func:`~graphtune.frontend.fold.fold_constants`), conv taps that read only
    padding dropped (:func:`~graphtune.frontend.taps.drop_dead_taps`), convs where most output
    positions read padding with some taps split by band (:func:`~graphtune.frontend.taps.split_by_band`),
    channels that no block of 8 divides padded between the convs that pass them on
    (:func:`~graphtune.frontend.pad.pad_channel_chains`), odd output channels padded
    where that is free (:func:`~graphtune.frontend.pad.pad_output_channels`), the input channels
    of int8 convs padded to what the int8 kernels read
    (:func:`~graphtune.frontend.pad.pad_int8_input_channels`). Its node names are
    those of the compiled model's calls.

    Examples
    --------
    >>> from graphtune import models
    >>> ssd = prepare_onnx(models.get("ssd_resnet50_512", image_size=64), {"input": [1, 3, 64, 64]})
    >>> "class_predictors.0.unpad" in {n.name for n in ssd.graph.node}
    True
    """
    folded = split_by_band(drop_dead_taps(fold_constants(rewrite_qdq(proto), shapes)))
    return pad_output_channels(pad_int8_input_channels(pad_channel_chains(folded)))


def _load_onnx(model) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if not isinstance(model, (str, os.PathLike)):
        raise ModelError(
            f"cannot import a {type(model).__name__}: give an onnx.ModelProto, a path to an "
            ".onnx file or a tvm.IRModule"
        )
    try:
        return onnx.load(os.fspath(model))
    except FileNotFoundError:
        raise ModelError(f"model file {os.fspath(model)!r} does not exist") from None
    except Exception as err:  # protobuf DecodeError and friends
        raise ModelError(f"model file {os.fspath(model)!r} is not a readable ONNX model ({err})") from None


def _static_input_shapes(proto: onnx.ModelProto, shape_dict) -> dict[str, list[int]]:
    """Static shape of every true graph input (not an initializer); ModelError if one is dynamic."""
    shape_dict = dict(shape_dict or {})
    initializers = {t.name for t in proto.graph.initializer}
    inputs = [i for i in proto.graph.input if i.name not in initializers]
    unknown = sorted(set(shape_dict) - {i.name for i in inputs})
    if unknown:
        raise ModelError(
            f"shape_dict names {unknown}, which are not graph inputs; inputs are "
            f"{[i.name for i in inputs]}"
        )
    shapes = {}
    for value in inputs:
        if value.name in shape_dict:
            shape = [int(d) for d in shape_dict[value.name]]
            if any(d <= 0 for d in shape):
                raise ModelError(f"shape_dict[{value.name!r}] = {shape}: dimensions must be positive")
        else:
            dims = value.type.tensor_type.shape.dim
            shape = [d.dim_value if d.HasField("dim_value") else 0 for d in dims]
            if not dims or any(d <= 0 for d in shape):
                shown = [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?") for d in dims]
                raise ModelError(
                    f"graph input {value.name!r} has a dynamic shape {shown}; graphtune needs static "
                    f"shapes: pass shape_dict={{{value.name!r}: [...]}} to tune, compile or "
                    f"extract (command line: --shape {value.name}=D0,D1,...)"
                )
        shapes[value.name] = shape
    return shapes


_CALL_TIR = tvm.ir.Op.get("relax.call_tir")
_CLIP_HALVES = {"maximum": relax.op.maximum, "minimum": relax.op.minimum}
_CLIP_FUNC = re.compile(r"^(maximum|minimum)\d*$")
_SCALAR_EVAL: dict[str, Callable[..., Any]] = {"relax.isnan": np.isnan, "relax.where": np.where}


@relax.expr_functor.mutator
class _TirClipToRelax(relax.PyExprMutator):
    """Turn the importer's ``call_tir(maximum|minimum, (x, scalar))`` back into Relax ops.

    The ONNX importer lowers ``Clip`` (relu6) straight to TIR functions with
    fixed 4-D buffers, which no layout rewrite can reuse; ``R.maximum`` /
    ``R.minimum`` with a scalar are layout-agnostic and legalize to the same
    code. The bound, which the importer guards with ``where(isnan(b), inf, b)``,
    is evaluated to a plain scalar constant when it is computed from constants.
    """

    def __init__(self, mod: tvm.IRModule) -> None:
        super().__init__(mod)

    def _value(self, expr) -> np.ndarray | None:
        """Numpy value of a scalar computed from constants by isnan/where, else None."""
        if isinstance(expr, tvm.ir.expr.Constant):
            return expr.value.numpy()
        if isinstance(expr, relax.Var):
            bound = self.lookup_binding(expr)
            return None if bound is None else self._value(bound)
        name = op_name(expr)
        evaluate = None if name is None else _SCALAR_EVAL.get(name)
        if evaluate is None:
            return None
        args = [self._value(a) for a in expr.args]
        return None if any(a is None for a in args) else evaluate(*args)

    def visit_call_(self, call):  # TVM visitor hook
        call = super().visit_call_(call)
        if not (isinstance(call, relax.Call) and call.op.same_as(_CALL_TIR)):
            return call
        callee, args = call.args[0], call.args[1]
        match = _CLIP_FUNC.match(getattr(callee, "name_hint", ""))
        if not match or not isinstance(args, relax.Tuple) or len(args.fields) != 2:
            return call
        scalar = args.fields[1]
        if not isinstance(scalar.ty, relax.TensorType) or scalar.ty.ndim != 0:
            return call
        value = self._value(scalar)
        if value is not None:
            scalar = relax.const(value.astype(str(scalar.ty.dtype)))
        return _CLIP_HALVES[match.group(1)](args.fields[0], scalar)


@relax.expr_functor.mutator
class _ClippedCastToAstype(relax.PyExprMutator):
    """Turn the importer's ``Cast`` to uint8 of a value clipped to ``[0, 255]`` into one ``astype``.

    ONNX leaves casting a float outside the target's range undefined; the Relax importer
    wraps it (``astype(bitwise_and(astype(where(!isfinite(x), 0, x), "int32"), 255),
    "uint8")``: four ops that need plain layouts). After ``minimum(maximum(x, lo), hi)``
    with ``0 <= lo`` and ``hi <= 255`` -- the uint8 quantization :mod:`graphtune.frontend.qdq`
    writes -- there is nothing to wrap, and ``astype`` runs in any layout.
    """

    def __init__(self, mod: tvm.IRModule) -> None:
        super().__init__(mod)

    def _through(self, expr: relax.Expr, name: str) -> relax.Call | None:
        """The call ``expr`` is bound to if it is a ``name`` op, else None."""
        bound = self.lookup_binding(expr) if isinstance(expr, relax.Var) else expr
        return bound if op_name(bound) == name else None

    @staticmethod
    def _scalar(expr: relax.Expr) -> float | None:
        value = scalar_value(expr)
        return None if value is None else float(value)

    def _clipped(self, expr: relax.Expr) -> bool:
        """``expr`` is ``minimum(maximum(x, lo), hi)`` (or the other order) within [0, 255]."""
        for outer_name, inner_name in (("relax.minimum", "relax.maximum"),
                                       ("relax.maximum", "relax.minimum")):
            outer = self._through(expr, outer_name)
            inner = None if outer is None else self._through(outer.args[0], inner_name)
            if outer is not None and inner is not None:
                bounds = [self._scalar(outer.args[1]), self._scalar(inner.args[1])]
                return all(b is not None and 0 <= b <= 255 for b in bounds)
        return False

    def visit_call_(self, call):  # TVM visitor hook
        call = super().visit_call_(call)
        if op_name(call) != "relax.astype" or str(call.attrs.dtype) != "uint8":
            return call
        masked = self._through(call.args[0], "relax.bitwise_and")
        widened = None if masked is None else self._through(masked.args[0], "relax.astype")
        finite = None if widened is None else self._through(widened.args[0], "relax.where")
        if finite is None or masked is None or self._scalar(masked.args[1]) != 255:
            return call
        value = finite.args[2]
        return relax.op.astype(value, "uint8") if self._clipped(value) else call


_BATCH_NORM = "relax.nn.batch_norm"


@relax.expr_functor.mutator
class _BatchNormToAffine(relax.PyExprMutator):
    """Turn ``batch_norm(x, gamma, beta, mean, var)[0]`` (inference, constant operands,
    channel axis 1) into ``x * scale + shift`` with ``[C, 1, ..., 1]`` constants."""

    def __init__(self, mod: tvm.IRModule) -> None:
        super().__init__(mod)

    def visit_tuple_getitem_(self, op):  # TVM visitor hook
        item = super().visit_tuple_getitem_(op)
        bound = self.lookup_binding(item.tuple_value) if isinstance(item.tuple_value, relax.Var) \
            else None
        if item.index != 0 or op_name(bound) != _BATCH_NORM or bool(bound.attrs.training) \
                or int(bound.attrs.axis) != 1:
            return item
        x, *stats = bound.args
        if not all(isinstance(a, tvm.ir.expr.Constant) for a in stats) or x.ty.ndim < 2:
            return item
        gamma, beta, mean, var = (a.value.numpy().astype(np.float64) for a in stats)
        if not bound.attrs.scale:
            gamma = np.ones_like(gamma)
        if not bound.attrs.center:
            beta = np.zeros_like(beta)
        scale = gamma / np.sqrt(var + float(bound.attrs.epsilon))
        shift = beta - mean * scale
        tail = (1,) * (x.ty.ndim - 2)
        dtype = str(x.ty.dtype)
        scaled = self.builder_.emit(relax.op.multiply(
            x, relax.const(scale.reshape(-1, *tail).astype(dtype))))
        return relax.op.add(scaled, relax.const(shift.reshape(-1, *tail).astype(dtype)))
