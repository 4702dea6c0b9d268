"""Coordinate-trick suppressions rewritten per label (issue 31): same boxes kept, same order."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from graphtune.frontend.cut import plan
from graphtune.frontend.nms import batched_nms, coordinate_trick_model


def _feeds(seed: int, count: int = 300, labels: int = 6, first_label: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 60, (count, 2)).astype(np.float32)
    return {"boxes": np.concatenate([xy, xy + rng.uniform(4, 25, (count, 2)).astype(np.float32)], 1),
            "scores": rng.random(count, dtype=np.float32),
            "labels": rng.integers(first_label, first_label + labels, count)}


def _run(model: onnx.ModelProto, feeds: dict) -> list:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def _nms_inputs(model: onnx.ModelProto) -> list[int]:
    found = []

    def walk(graph):
        for node in graph.node:
            if node.op_type == "NonMaxSuppression":
                found.append(len([i for i in node.input if i]))
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)
    walk(model.graph)
    return found


@pytest.mark.parametrize("seed, max_out, iou, first_label", [
    (0, 2**63 - 1, 0.5, 0), (1, 2**63 - 1, 0.3, 0), (2, 7, 0.5, 0), (3, 2**63 - 1, 0.7, 3)],
    ids=["all", "iou0.3", "max7", "labels3-8"])
def test_per_label_suppression_keeps_the_same_boxes_in_the_same_order(seed, max_out, iou, first_label):
    model = coordinate_trick_model(max_out=max_out, iou=iou)
    rewritten = batched_nms(model)
    assert _nms_inputs(model) == [4] and _nms_inputs(rewritten) == [5]
    feeds = _feeds(seed, first_label=first_label)
    (want,), (got,) = _run(model, feeds), _run(rewritten, feeds)
    assert len(want) == max_out if max_out < 100 else len(want) > 10
    np.testing.assert_array_equal(got, want)


def _in_if(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model``'s graph as the else branch of an ``If`` on an empty input (torchvision's form)."""
    inner = model.graph
    else_branch = helper.make_graph(list(inner.node), "else", [], list(inner.output), list(inner.initializer))
    then_branch = helper.make_graph(
        [helper.make_node("Constant", [], ["none"], value=numpy_helper.from_array(np.zeros(0, np.int64)))],
        "then", [], [helper.make_tensor_value_info("none", TensorProto.INT64, None)])
    nodes = [helper.make_node("Size", ["scores"], ["count"]),
             helper.make_node("Equal", ["count", "zero"], ["empty"]),
             helper.make_node("If", ["empty"], ["keep"], then_branch=then_branch, else_branch=else_branch)]
    graph = helper.make_graph(nodes, "guarded", list(inner.input), list(inner.output),
                              [numpy_helper.from_array(np.int64(0), "zero")])
    return helper.make_model(graph, opset_imports=list(model.opset_import))


def test_a_suppression_inside_an_if_is_rewritten():
    model = _in_if(coordinate_trick_model())
    rewritten = batched_nms(model)
    assert _nms_inputs(rewritten) == [5]
    feeds = _feeds(4)
    np.testing.assert_array_equal(_run(rewritten, feeds)[0], _run(model, feeds)[0])


def test_a_suppression_without_the_trick_stays():
    model = coordinate_trick_model()
    for node in model.graph.node:  # shift by the labels alone: not the trick's spacing
        if node.output[0] == "offsets":
            node.input[1] = "one"
    assert batched_nms(model) is model


def test_the_onnxruntime_part_of_a_partition_suppresses_per_label():
    """A conv making boxes and scores, rows kept by a score filter (``NonZero``), then the trick:
    TVM runs the conv, ONNX Runtime the rest, as in a detector."""
    trick = coordinate_trick_model()
    rng = np.random.default_rng(0)
    conv = helper.make_node("Conv", ["image", "w"], ["maps"], name="conv")
    nodes = [conv,
             helper.make_node("Reshape", ["maps", "shape"], ["rows"], name="rows"),
             helper.make_node("Transpose", ["rows"], ["all_cells"], name="all_cells", perm=[1, 0]),
             helper.make_node("Gather", ["all_cells", "s4i"], ["score_all"], name="score_all", axis=1),
             helper.make_node("Greater", ["score_all", "zero_f"], ["passed"], name="passed"),
             helper.make_node("NonZero", ["passed"], ["kept2"], name="filter"),
             helper.make_node("Squeeze", ["kept2", "s0"], ["kept"], name="kept"),
             helper.make_node("Gather", ["all_cells", "kept"], ["cells"], name="cells", axis=0),
             helper.make_node("Slice", ["cells", "s0", "s4", "ax1"], ["raw"], name="raw"),
             helper.make_node("Abs", ["raw"], ["corner"], name="corner"),
             helper.make_node("Slice", ["corner", "s0", "s2", "ax1"], ["xy"], name="xy"),
             helper.make_node("Add", ["xy", "size"], ["far"], name="far"),
             helper.make_node("Concat", ["xy", "far"], ["boxes"], name="boxes", axis=1),
             helper.make_node("Gather", ["cells", "s4i"], ["scores"], name="scores", axis=1),
             helper.make_node("Gather", ["cells", "s5i"], ["label_col"], name="label_col", axis=1),
             helper.make_node("Abs", ["label_col"], ["labels_a"], name="labels_a"),
             helper.make_node("Cast", ["labels_a"], ["labels"], name="labels", to=TensorProto.INT64)]
    nodes += list(trick.graph.node)
    inits = [numpy_helper.from_array(rng.standard_normal((6, 3, 1, 1)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([6, 64], np.int64), "shape"),
             numpy_helper.from_array(np.array([0], np.int64), "s0"),
             numpy_helper.from_array(np.array([2], np.int64), "s2"),
             numpy_helper.from_array(np.array([4], np.int64), "s4"),
             numpy_helper.from_array(np.int64(4), "s4i"), numpy_helper.from_array(np.int64(5), "s5i"),
             numpy_helper.from_array(np.array([[1.5, 1.5]], np.float32), "size"),
             numpy_helper.from_array(np.array([1], np.int64), "ax1"),
             numpy_helper.from_array(np.float32(-0.5), "zero_f")] + list(trick.graph.initializer)
    graph = helper.make_graph(nodes, "detector",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8])],
                              list(trick.graph.output), inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    part = plan(model)
    assert "nms" in part.ort_nodes and "conv" in part.tvm_nodes
    assert _nms_inputs(part.ort_model) == [5]
    image = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(_run(model, {"image": image})[0],
                                  _run(_whole(part), {"image": image})[0])


def _whole(part) -> onnx.ModelProto:
    """The partition's two parts as one ONNX model (the TVM part run by ONNX Runtime)."""
    tvm, rest = part.tvm_model, part.ort_model
    names = {i.name for i in rest.graph.input}
    graph = helper.make_graph(
        list(tvm.graph.node) + list(rest.graph.node), "whole", list(tvm.graph.input),
        list(rest.graph.output), list({t.name: t for t in list(tvm.graph.initializer)
                                       + list(rest.graph.initializer)}.values()))
    assert names <= {o.name for o in tvm.graph.output} | {i.name for i in tvm.graph.input}
    return helper.make_model(graph, opset_imports=list(part.model.opset_import))
