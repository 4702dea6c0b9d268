"""Row scatters written element by element, rewritten as the row copies they are.

torchvision's ``MultiScaleRoIAlign`` (Faster / Mask R-CNN) puts each feature level's pooled
regions back in proposal order with ``result[rows] = pooled``, which the exporters write as
``ScatterElements(zeros, Expand(Reshape(rows, [-1, 1, 1, 1]), shape), pooled, axis=0)``:
one index per *element* (``rows x 256 x 7 x 7`` of them), each read and bounds-checked. ONNX
Runtime runs it element by element; on a Mask R-CNN the scatters were the largest op type
after the convolutions. :func:`scatter_rows` rewrites each such scatter into a
``ScatterND`` of whole rows (one index per row, a row copied at a time), the same values.

The rule: ``ScatterElements`` on ``axis`` 0 without reduction, whose indices are an
``Expand`` of a tensor that is 1 in every dimension but the first, and whose data and
updates have the same static extents in every dimension but the first (ONNX shape
inference with data propagation must prove both). Then every element of an update row
goes to the same data row, which is ``ScatterND(data, rows[:, None], updates)`` (both ops
leave the order of duplicate indices undefined). Nodes only the rewritten indices read are
dropped. :func:`graphtune.partition.plan` applies it to the part ONNX Runtime runs.

Examples
--------
>>> import numpy as np
>>> from onnx import TensorProto, helper, numpy_helper
>>> graph = helper.make_graph([
...     helper.make_node("Reshape", ["rows", "column"], ["rows4"]),
...     helper.make_node("Shape", ["pooled"], ["pooled_shape"]),
...     helper.make_node("Expand", ["rows4", "pooled_shape"], ["index"]),
...     helper.make_node("ScatterElements", ["zeros", "index", "pooled"], ["out"],
...                      name="scatter", axis=0)],
...     "g", [helper.make_tensor_value_info("zeros", TensorProto.FLOAT, [None, 8, 7, 7]),
...           helper.make_tensor_value_info("rows", TensorProto.INT64, [None]),
...           helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [None, 8, 7, 7])],
...     [helper.make_tensor_value_info("out", TensorProto.FLOAT, [None, 8, 7, 7])],
...     [numpy_helper.from_array(np.array([-1, 1, 1, 1], np.int64), "column")])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
>>> rewritten = scatter_rows(model)
>>> [n.op_type for n in rewritten.graph.node]
['Reshape', 'Reshape', 'Shape', 'Slice', 'Concat', 'Expand', 'ScatterND']
>>> import onnxruntime as ort
>>> feeds = {"zeros": np.zeros((5, 8, 7, 7), np.float32), "rows": np.array([3, 0, 4]),
...          "pooled": np.random.default_rng(0).random((3, 8, 7, 7), np.float32)}
>>> def run(m):
...     session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
...     return session.run(None, feeds)[0]
>>> bool((run(model) == run(rewritten)).all())
True
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .fold import drop_dead

__all__ = ["scatter_rows"]


def scatter_rows(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its row scatters written as ``ScatterND`` (module docstring's rule);
    ``model`` itself when it has none (or ONNX shape inference fails on it)."""
    if not any(n.op_type == "ScatterElements" for n in model.graph.node):
        return model
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except (onnx.shape_inference.InferenceError, ValueError):  # no proof: no rewrite
        return model
    shapes = _static_dims(inferred)
    producer = {o: n for n in model.graph.node for o in n.output}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes: list[onnx.NodeProto] = []
    extra: list[onnx.TensorProto] = []
    for node in model.graph.node:
        rows = _row_index(node, producer, shapes)
        if rows is None:
            nodes.append(node)
            continue
        nodes += _row_scatter(node, rows, extra)
    if not extra:
        return model
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(extra)
    drop_dead(out.graph)
    return out


def _static_dims(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    """Tensor name -> its inferred dims (None where not a static number); initializers too."""
    values = list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output)
    dims: dict[str, list[int | None]] = {
        v.name: [d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim]
        for v in values if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")}
    dims.update({t.name: list(t.dims) for t in model.graph.initializer})
    return dims


def _row_index(node: onnx.NodeProto, producer: dict[str, onnx.NodeProto],
               shapes: dict[str, list[int | None]]) -> str | None:
    """The tensor of one index per row that ``node``'s indices expand, if ``node`` is a row
    scatter by the module's rule."""
    if node.op_type != "ScatterElements" or len(node.input) != 3:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("axis", 0) != 0 or attrs.get("reduction", b"none") not in (b"none", "none"):
        return None
    data, indices, updates = node.input
    expand = producer.get(indices)
    if expand is None or expand.op_type != "Expand":
        return None
    rows = expand.input[0]
    rank = len(shapes.get(data, []))
    row_dims, data_dims, update_dims = (shapes.get(rows), shapes.get(data), shapes.get(updates))
    if rank < 2 or row_dims is None or update_dims is None or data_dims is None:
        return None
    if len(row_dims) != rank or len(update_dims) != rank:
        return None
    if any(d != 1 for d in row_dims[1:]):
        return None
    if any(d is None or d != u for d, u in zip(data_dims[1:], update_dims[1:])):
        return None
    return rows


def _row_scatter(node: onnx.NodeProto, rows: str, extra: list[onnx.TensorProto]
                 ) -> list[onnx.NodeProto]:
    """``ScatterND(data, rows as [n, 1] broadcast to the updates' rows, updates)`` with
    ``node``'s output; the constants it needs go to ``extra``."""
    data, _, updates = node.input
    name = node.name or node.output[0]
    consts = {f"{name}/column": [-1, 1], f"{name}/zero": [0], f"{name}/one": [1]}
    extra += [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in consts.items()]
    column, zero, one = consts
    return [
        helper.make_node("Reshape", [rows, column], [f"{name}/rows"], name=f"{name}/rows"),
        helper.make_node("Shape", [updates], [f"{name}/updates_shape"], name=f"{name}/updates_shape"),
        helper.make_node("Slice", [f"{name}/updates_shape", zero, one], [f"{name}/count"],
                         name=f"{name}/count"),
        helper.make_node("Concat", [f"{name}/count", one], [f"{name}/index_shape"],
                         name=f"{name}/index_shape", axis=0),
        helper.make_node("Expand", [f"{name}/rows", f"{name}/index_shape"], [f"{name}/index"],
                         name=f"{name}/index"),
        helper.make_node("ScatterND", [data, f"{name}/index", updates], list(node.output),
                         name=name),
    ]
