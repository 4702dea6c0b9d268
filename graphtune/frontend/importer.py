"""Import a model (ONNX or Relax) into a static-shape Relax ``IRModule``.

ONNX models go through ``tvm.relax.frontend.onnx.from_onnx`` with the
initializers as constants (``keep_params_in_input=False``), so every conv and
dense weight is a ``Constant`` the compiler can pre-transform and fold. The
Relax importer forgets ONNX node names (its variables are ``lv``, ``lv1``...),
so :func:`import_model` renames the variable bound to each conv and matmul
call after its ONNX node (``layer1.0.conv1``): the importer converts nodes in
graph order and every ONNX ``Conv`` / ``Gemm`` / ``MatMul`` yields exactly one
``conv*d`` / ``matmul`` call, so the k-th call of a family is the k-th node of
that family. :func:`graphtune.frontend.layout_ops` then reads these names.

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
from collections.abc import Mapping, Sequence

import onnx
import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

from ..errors import ModelError

__all__ = ["import_model"]

# ONNX op types and the Relax ops each of them becomes, one call per node.
_NAMED_FAMILIES = (
    (frozenset({"Conv"}), frozenset({"relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv3d"})),
    (frozenset({"Gemm", "MatMul"}), frozenset({"relax.matmul"})),
)


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
        conv / matmul call is named after its ONNX node when it has one.

    Raises
    ------
    ModelError
        Unreadable file, not an ONNX model, an input with a dynamic shape not
        fixed by ``shape_dict``, an op the Relax importer does not support, or
        an IRModule without ``main``.

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
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")  # onnx.checker complaints, re-raised below if fatal
            mod = from_onnx(proto, shape_dict=shapes, keep_params_in_input=False)
    except tvm.error.OpNotImplemented as err:
        raise ModelError(f"ONNX model cannot be imported into TVM Relax: {err}") from None
    except Exception as err:  # the importer raises bare ValueError/AssertionError/TVMError
        raise ModelError(
            f"ONNX model cannot be imported into TVM Relax ({type(err).__name__}: {err}); "
            "check it with onnx.checker.check_model"
        ) from None
    mod["main"] = _name_after_onnx(_TirClipToRelax(mod).visit_expr(mod["main"]), proto)
    return relax.transform.DeadCodeElimination(["main"])(mod)


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
                    f"shapes: pass shape_dict={{{value.name!r}: [...]}}"
                )
        shapes[value.name] = shape
    return shapes


_DEFAULT_NAME = re.compile(r"^(lv|gv|tmp)\d*$")


def _name_after_onnx(func: relax.Function, proto: onnx.ModelProto) -> relax.Function:
    """Rename the vars bound to conv / matmul calls after their ONNX nodes."""
    bindings = _bindings(func)
    names: dict[relax.Var, str] = {}
    taken = {b.var.name for b in bindings} | {p.name for p in func.params}
    for onnx_ops, relax_ops in _NAMED_FAMILIES:
        nodes = [n for n in proto.graph.node if n.op_type in onnx_ops]
        calls = [b.var for b in bindings if _op_name(b.value) in relax_ops]
        if len(nodes) != len(calls):  # importer lowered a node unusually: keep derived names
            continue
        for node, var in zip(nodes, calls):
            if node.name and not _DEFAULT_NAME.match(node.name) and node.name not in taken:
                names[var] = node.name
                taken.add(node.name)
    return _Renamer(names).visit_expr(func) if names else func


def _bindings(func: relax.Function) -> list:
    body = func.body
    return [b for block in body.blocks for b in block.bindings] if isinstance(body, relax.SeqExpr) else []


def _op_name(expr) -> str | None:
    op = getattr(expr, "op", None) if isinstance(expr, relax.Call) else None
    return getattr(op, "name", None)


_CALL_TIR = tvm.ir.Op.get("relax.call_tir")
_CLIP_HALVES = {"maximum": relax.op.maximum, "minimum": relax.op.minimum}
_CLIP_FUNC = re.compile(r"^(maximum|minimum)\d*$")


@relax.expr_functor.mutator
class _TirClipToRelax(relax.PyExprMutator):
    """Turn the importer's ``call_tir(maximum|minimum, (x, scalar))`` back into Relax ops.

    The ONNX importer lowers ``Clip`` (relu6) straight to TIR functions with
    fixed 4-D buffers, which no layout rewrite can reuse; ``R.maximum`` /
    ``R.minimum`` with a scalar are layout-agnostic and legalize to the same
    code.
    """

    def __init__(self, mod: tvm.IRModule) -> None:
        super().__init__(mod)
        self.mod = mod

    def visit_call_(self, call):  # noqa: D102 (TVM visitor hook)
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
        return _CLIP_HALVES[match.group(1)](args.fields[0], scalar)


@relax.expr_functor.mutator
class _Renamer(relax.PyExprMutator):
    """Give the variables in ``names`` new names; their uses follow automatically."""

    def __init__(self, names: dict) -> None:
        super().__init__()
        self.names = names

    def visit_dataflow_var_def_(self, var):  # noqa: D102 (TVM visitor hook)
        name = self.names.get(var)
        return var if name is None else relax.DataflowVar(name, var.ty)

    def visit_var_def_(self, var):  # noqa: D102 (TVM visitor hook)
        name = self.names.get(var)
        return var if name is None else relax.Var(name, var.ty)
