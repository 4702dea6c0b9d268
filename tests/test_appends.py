"""Loops appending rows to a carried tensor (Mask R-CNN's mask pasting) stack them once."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper

from graphtune.frontend.appends import loop_appends

pytestmark = pytest.mark.unit


def _model(axis: int = 0, unsqueeze_axes=(0,), extra_reader: bool = False,
           output: str = "out") -> onnx.ModelProto:
    """A loop carrying ``total`` (summed) and ``rows`` (appended ``x * i`` per iteration),
    its last value ``rows`` and ``total`` the model's outputs."""
    nodes = [helper.make_node("Cast", ["i"], ["i_float"], to=T.FLOAT),
             helper.make_node("Mul", ["x", "i_float"], ["row"]),
             helper.make_node("Constant", [], ["axes"], value_ints=list(unsqueeze_axes)),
             helper.make_node("Unsqueeze", ["row", "axes"], ["row1"]),
             helper.make_node("Concat", ["rows", "row1"], ["rows_next"], axis=axis),
             helper.make_node("ReduceSum", ["row"], ["row_sum"], keepdims=0),
             helper.make_node("Add", ["total", "row_sum"], ["total_next"]),
             helper.make_node("Identity", ["cond"], ["cond_next"])]
    if extra_reader:  # the carried value read by another node too
        nodes[5] = helper.make_node("ReduceSum", ["rows"], ["row_sum"], keepdims=0)
    body = helper.make_graph(
        nodes, "body", [helper.make_tensor_value_info("i", T.INT64, []),
                        helper.make_tensor_value_info("cond", T.BOOL, []),
                        helper.make_tensor_value_info("total", T.FLOAT, []),
                        helper.make_tensor_value_info("rows", T.FLOAT, None)],
        [helper.make_tensor_value_info("cond_next", T.BOOL, []),
         helper.make_tensor_value_info("total_next", T.FLOAT, []),
         helper.make_tensor_value_info("rows_next", T.FLOAT, None)])
    loop = helper.make_node("Loop", ["n", "", "zero", "start"], ["total_out", output],
                            name="paste", body=body)
    graph = helper.make_graph(
        [loop], "g", [helper.make_tensor_value_info("n", T.INT64, []),
                      helper.make_tensor_value_info("zero", T.FLOAT, []),
                      helper.make_tensor_value_info("start", T.FLOAT, [None, 3, 2]),
                      helper.make_tensor_value_info("x", T.FLOAT, [3, 2])],
        [helper.make_tensor_value_info("total_out", T.FLOAT, [])]
        + ([helper.make_tensor_value_info("out", T.FLOAT, None)] if output else []))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(model: onnx.ModelProto, n: int, start_rows: int) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(n)
    return session.run(None, {"n": np.array(n, np.int64), "zero": np.array(0, np.float32),
                              "start": rng.standard_normal((start_rows, 3, 2)).astype(np.float32),
                              "x": rng.standard_normal((3, 2)).astype(np.float32)})


@pytest.mark.parametrize("n, start_rows", [(4, 0), (3, 2), (0, 0), (0, 1)])
def test_appended_rows_are_stacked_once_with_the_same_values(n, start_rows):
    model = _model()
    rewritten = loop_appends(model)
    loop = rewritten.graph.node[0]
    assert [x.op_type for x in rewritten.graph.node] == ["Loop", "Concat"]
    assert "Concat" not in [x.op_type for x in loop.attribute[0].g.node]  # the append is gone
    assert len(loop.input) == 3 and list(loop.output) == ["total_out", "paste/row"]
    expected = _run(model, n, start_rows)
    got = _run(rewritten, n, start_rows)
    assert [a.shape for a in got] == [a.shape for a in expected]
    assert all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))
    assert expected[1].shape == (start_rows + n, 3, 2)


@pytest.mark.parametrize("kwargs", [
    {"axis": 1},                   # concatenated along another axis
    {"unsqueeze_axes": (1,)},      # the row's new axis is not the first
    {"extra_reader": True},        # the body reads the carried value for something else
    {"output": ""},                # the loop's final value is not used
])
def test_other_loops_stay(kwargs):
    model = _model(**kwargs)
    assert loop_appends(model) is model
