"""Fold an ONNX graph's shape computations into constants, given static input shapes.

Exporters compute reshape targets from the tensors themselves
(``Shape -> Gather -> Div -> Unsqueeze -> Concat -> Reshape``, torch's channel
shuffle). With static input shapes every such value is a constant; the Relax
importer folds only part of them (and mixes int32 and int64 on the way), so
the shapes after the first such ``Reshape`` stop being static and the layout
nodes behind them drop out. :func:`fold_constants` evaluates them on the ONNX
graph first, as ONNX Runtime does: ONNX shape inference (with data
propagation) gives every tensor's static shape, ``Shape`` / ``Size`` of a
static tensor and every node whose inputs are all constants are evaluated
(ONNX's reference implementation, dtypes kept), and their outputs become
initializers. Nodes left without consumers are dropped.

Examples
--------
>>> from graphtune import models
>>> model = models.get("shufflenet_v2", image_size=32)
>>> folded = fold_constants(model)
>>> sorted({n.op_type for n in folded.graph.node} & {"Shape", "Gather", "Div"})
[]
>>> fold_constants(models.get("resnet18", image_size=32)) is not None
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference
from onnx.reference import ReferenceEvaluator

from ..errors import ModelError

__all__ = ["fold_constants", "names_read", "submodel", "drop_dead"]

_SHAPE_OPS = frozenset({"Shape", "Size"})
_NONDETERMINISTIC = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform",
                               "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"})
_MAX_ROUNDS = 64


def fold_constants(model: onnx.ModelProto,
                   input_shapes: Mapping[str, Sequence[int]] | None = None) -> onnx.ModelProto:
    """``model`` with its constant and shape subgraphs evaluated into initializers.

    Parameters
    ----------
    model : onnx.ModelProto
        The model.
    input_shapes : mapping of str to sequence of int, optional
        Static shapes of graph inputs, replacing the model's (dynamic) ones.

    Returns
    -------
    onnx.ModelProto
        ``model`` itself when there is nothing to fold, else a folded copy
        computing the same outputs.

    Raises
    ------
    ModelError
        If a node cannot be evaluated (names the node).

    Examples
    --------
    >>> from graphtune import models
    >>> model = models.get("shufflenet_v2", image_size=32)
    >>> len(model.graph.node) > len(fold_constants(model).graph.node)
    True
    """
    if not any(_foldable_kind(node) for node in model.graph.node):
        return model
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    for value in folded.graph.input:
        if input_shapes and value.name in input_shapes:
            dims = value.type.tensor_type.shape.dim
            del dims[:]
            for d in input_shapes[value.name]:
                dims.add().dim_value = int(d)
    for _ in range(_MAX_ROUNDS):
        if not _fold_once(folded):
            break
    drop_dead(folded.graph)
    return folded


def _foldable_kind(node: onnx.NodeProto) -> bool:
    """Nodes worth looking at: shape reads and ``Constant`` nodes (which feed computations)."""
    return node.op_type in _SHAPE_OPS or node.op_type == "Constant"


def _static_shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    """Every tensor's fully static shape that ONNX shape inference finds."""
    inferred = shape_inference.infer_shapes(model, data_prop=True)
    shapes = {}
    graph = inferred.graph
    for value in [*graph.input, *graph.value_info, *graph.output]:
        t = value.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            shapes[value.name] = [d.dim_value for d in t.shape.dim]
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


def _fold_once(model: onnx.ModelProto) -> bool:
    """Fold every node computable from constants once; True if any was folded."""
    graph = model.graph
    known: dict[str, np.ndarray | None] = {t.name: None for t in graph.initializer}  # lazily loaded
    arrays = {t.name: t for t in graph.initializer}
    shapes = _static_shapes(model) if any(n.op_type in _SHAPE_OPS for n in graph.node) else {}
    keep, new_inits, changed = [], [], False
    for node in graph.node:
        values = _evaluate(node, known, arrays, shapes, model.opset_import)
        if values is None:
            keep.append(node)
            continue
        changed = changed or node.op_type != "Constant"
        for name, value in zip(node.output, values):
            known[name] = value
            tensor = numpy_helper.from_array(np.asarray(value), name)
            arrays[name] = tensor
            new_inits.append(tensor)
    if not changed:
        return False
    del graph.node[:]
    graph.node.extend(keep)
    graph.initializer.extend(new_inits)
    return True


def _value(name: str, known: dict, arrays: dict) -> np.ndarray:
    if known[name] is None:
        known[name] = numpy_helper.to_array(arrays[name])
    return known[name]


def _evaluate(node: onnx.NodeProto, known: dict, arrays: dict, shapes: dict,
              opsets: list) -> list[np.ndarray] | None:
    """Output values of ``node`` if they are constants, else None."""
    if node.domain not in ("", "ai.onnx") or node.op_type in _NONDETERMINISTIC:
        return None
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
           for a in node.attribute):
        return None
    if node.op_type in _SHAPE_OPS:
        shape = shapes.get(node.input[0])
        if shape is None:
            return None
        if node.op_type == "Size":
            return [np.array(int(np.prod(shape)), dtype=np.int64)]
        attrs = {a.name: a.i for a in node.attribute}
        start, end = attrs.get("start", 0), attrs.get("end", len(shape))
        return [np.array(shape[start:end] if "end" in attrs else shape[start:], dtype=np.int64)]
    inputs = [i for i in node.input if i]
    if not all(i in known for i in inputs):
        return None
    feeds = {i: _value(i, known, arrays) for i in inputs}
    try:
        return list(ReferenceEvaluator(_single_node_model(node, feeds, opsets)).run(None, feeds))
    except Exception as err:  # the reference implementation raises plain exceptions
        raise ModelError(f"ONNX node {node.name or node.output[0]!r} ({node.op_type}) computes "
                         f"from constants only but cannot be evaluated: {err}") from None


def _single_node_model(node: onnx.NodeProto, feeds: dict, opsets: list) -> onnx.ModelProto:
    inputs = [onnx.helper.make_tensor_value_info(
        name, onnx.helper.np_dtype_to_tensor_dtype(value.dtype), value.shape)
        for name, value in feeds.items()]
    outputs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output]
    graph = onnx.helper.make_graph([node], "fold", inputs, outputs)
    return onnx.helper.make_model(graph, opset_imports=list(opsets))


def names_read(node: onnx.NodeProto) -> set[str]:
    """Names ``node`` reads, including those its subgraphs (If, Loop...) read from outside.

    Examples
    --------
    >>> from onnx import helper
    >>> sorted(names_read(helper.make_node("Add", ["a", "b"], ["c"])))
    ['a', 'b']
    """
    names = {i for i in node.input if i}
    for attr in node.attribute:
        for sub in [attr.g] * (attr.type == onnx.AttributeProto.GRAPH) + list(attr.graphs):
            for inner in sub.node:
                names |= names_read(inner)
    return names


def submodel(proto: onnx.ModelProto, keep: Sequence[int], inputs: list[onnx.ValueInfoProto],
             outputs: list[onnx.ValueInfoProto], name: str) -> onnx.ModelProto:
    """A model of the nodes ``keep`` (indices) of ``proto`` with these inputs and outputs, the
    initializers they read, and ``proto``'s opsets, IR version and functions.

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]),
    ...                            helper.make_node("Neg", ["y"], ["z"])], "g", [], [])
    >>> vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2])
    >>> sub = submodel(helper.make_model(graph), [1], [vi("y")], [vi("z")], "tail")
    >>> [n.op_type for n in sub.graph.node], sub.graph.name
    (['Neg'], 'tail')
    """
    nodes = [proto.graph.node[i] for i in keep]
    reads = set().union(*(names_read(n) for n in nodes)) if nodes else set()
    inits = [t for t in proto.graph.initializer if t.name in reads]
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    sub = helper.make_model(graph, opset_imports=list(proto.opset_import))
    sub.ir_version = proto.ir_version
    sub.functions.extend(proto.functions)
    return sub


def drop_dead(graph: onnx.GraphProto) -> None:
    """Remove nodes and initializers nothing reads any more (initializers that are also
    graph inputs stay).

    Examples
    --------
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph(
    ...     [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["unused"])],
    ...     "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    >>> drop_dead(graph)
    >>> [n.op_type for n in graph.node]
    ['Relu']
    """
    used = {o.name for o in graph.output} | {i.name for i in graph.input}
    alive = []
    for node in reversed(graph.node):
        if any(o in used for o in node.output):
            alive.append(node)
            used |= names_read(node)
    del graph.node[:]
    graph.node.extend(reversed(alive))
    inits = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(inits)
