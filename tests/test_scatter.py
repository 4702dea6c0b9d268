"""Row scatters (torchvision's MultiScaleRoIAlign) become ScatterND with the same values."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from graphtune.frontend.scatter import scatter_rows

pytestmark = pytest.mark.unit

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(updates_dims=(None, 8, 7, 7), axis=0, reduction=None, column=(-1, 1, 1, 1),
           from_expand=True) -> onnx.ModelProto:
    """``ScatterElements(zeros of the updates' shape but ``total`` rows, Expand(rows as
    ``column``), updates)``, as torch exports ``result[rows] = updates``."""
    nodes = [helper.make_node("Reshape", ["rows", "column"], ["rows4"]),
             helper.make_node("Shape", ["updates"], ["updates_shape"]),
             helper.make_node("Expand", ["rows4", "updates_shape"], ["index"])]
    if not from_expand:
        nodes[2] = helper.make_node("Mul", ["rows4", "ones"], ["index"])
    nodes += [helper.make_node("Slice", ["updates_shape", "one", "four"], ["row_shape"]),
              helper.make_node("Concat", ["total", "row_shape"], ["data_shape"], axis=0),
              helper.make_node("ConstantOfShape", ["data_shape"], ["zeros"]),
              helper.make_node("ScatterElements", ["zeros", "index", "updates"], ["out"],
                               name="scatter", axis=axis,
                               **({"reduction": reduction} if reduction else {}))]
    inits = [numpy_helper.from_array(np.array(column, np.int64), "column"),
             numpy_helper.from_array(np.ones((1, 8, 7, 7), np.int64), "ones"),
             numpy_helper.from_array(np.array([1], np.int64), "one"),
             numpy_helper.from_array(np.array([4], np.int64), "four")]
    graph = helper.make_graph(
        nodes, "scatter", [helper.make_tensor_value_info("total", I64, [1]),
                           helper.make_tensor_value_info("rows", I64, [None]),
                           helper.make_tensor_value_info("updates", F, list(updates_dims))],
        [helper.make_tensor_value_info("out", F, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


@pytest.mark.parametrize("rows", [[3, 0, 4], [1], [], [-1, 0]])
def test_row_scatter_becomes_scatter_nd_with_the_same_values(rows):
    model = _model()
    rewritten = scatter_rows(model)
    assert "ScatterElements" not in _ops(rewritten) and "ScatterND" in _ops(rewritten)
    rng = np.random.default_rng(len(rows))
    feeds = {"total": np.array([5], np.int64), "rows": np.array(rows, np.int64),
             "updates": rng.standard_normal((len(rows), 8, 7, 7)).astype(np.float32)}
    expected = _run(model, feeds)
    assert np.array_equal(_run(rewritten, feeds), expected)
    assert np.count_nonzero(expected.reshape(5, -1).any(axis=1)) == len(rows)


@pytest.mark.parametrize("kwargs", [
    {"axis": 1},                            # not the row axis
    {"reduction": "add"},                   # accumulates
    {"column": (1, -1, 1, 1)},              # one index per channel, not per row
    {"from_expand": False},                 # indices not an Expand
    {"updates_dims": (None, 8, None, 7)},   # updates' extent unknown: may be narrower than the data
])
def test_other_scatters_stay(kwargs):
    model = _model(**kwargs)
    assert scatter_rows(model) is model


def test_a_model_without_scatters_is_returned_as_is():
    model = _model()
    del model.graph.node[-1]
    assert scatter_rows(model) is model
