"""Row regions (issue 31): ONNX Runtime's side of a partition has its row-wise heads compiled by TVM.

The model of these tests selects the rows of its input whose largest value passes a threshold
(``NonZero``: a data-dependent count, so ONNX Runtime runs what reads it), then runs two heads
on the selected rows: a dense head (Gemm, ReLU, Gemm, Softmax) and a conv head (Conv, ReLU,
ConvTranspose) — what a two-stage detector's box and mask heads are.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphtune
from graphtune.config import Config
from graphtune.errors import ConfigMismatchError
from graphtune.frontend.cut import plan, random_inputs, recorded_summary
from graphtune.frontend.rows import ROW_MULTIPLE, RowRegion, candidates, row_wise, run_rows
from graphtune.partition import PartitionedModel

ROWS_IN = 64
THRESHOLD = 1.5  # about 43% of standard-normal rows of 8 have a larger value


def heads_model() -> onnx.ModelProto:
    """Rows of ``x`` [64, 8] whose largest value exceeds THRESHOLD, through two row heads."""
    rng = np.random.default_rng(0)
    consts = {"two": np.float32(2.0), "thr": np.float32(2 * THRESHOLD), "ax0": np.array([0], np.int64),
              "shape4": np.array([ROWS_IN, 2, 2, 2], np.int64),
              "fc1": rng.standard_normal((16, 8)).astype(np.float32),
              "b1": rng.standard_normal(16).astype(np.float32),
              "fc2": rng.standard_normal((5, 16)).astype(np.float32),
              "wc": rng.standard_normal((4, 2, 3, 3)).astype(np.float32),
              "wt": rng.standard_normal((4, 3, 2, 2)).astype(np.float32)}
    node = helper.make_node
    nodes = [node("Mul", ["x", "two"], ["cells"], name="double"),
             node("ReduceMax", ["cells"], ["score"], name="score", axes=[1], keepdims=0),
             node("Greater", ["score", "thr"], ["keep"], name="keep"),
             node("Reshape", ["cells", "shape4"], ["maps"], name="maps"),
             node("NonZero", ["keep"], ["idx2"], name="nonzero"),
             node("Squeeze", ["idx2", "ax0"], ["idx"], name="idx"),
             node("Gather", ["cells", "idx"], ["rows"], name="pick", axis=0),
             node("Gemm", ["rows", "fc1", "b1"], ["h"], name="fc1", transB=1),
             node("Relu", ["h"], ["hr"], name="relu"),
             node("Gemm", ["hr", "fc2"], ["logits"], name="fc2", transB=1),
             node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
             node("Gather", ["maps", "idx"], ["picked_maps"], name="pick_maps", axis=0),
             node("Conv", ["picked_maps", "wc"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             node("Relu", ["c"], ["cr"], name="conv_relu"),
             node("ConvTranspose", ["cr", "wt"], ["up"], name="up", strides=[2, 2]),
             node("ReduceSum", ["probs", "ax0"], ["total"], name="total", keepdims=0)]
    graph = helper.make_graph(
        nodes, "heads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS_IN, 8])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in ("probs", "up", "total")],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _inputs(selected: int) -> np.ndarray:
    """An input with exactly ``selected`` rows over the threshold."""
    x = np.random.default_rng(3).uniform(-1, 1, (ROWS_IN, 8)).astype(np.float32)
    x[:selected, 0] = THRESHOLD + 1
    return x


def _ort(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})


@pytest.fixture(scope="module")
def compiled() -> PartitionedModel:
    model = heads_model()
    run = graphtune.compile(model, Config.uniform(model))
    assert isinstance(run, PartitionedModel)
    return run


def test_the_heads_after_the_data_dependent_op_are_two_row_regions():
    part = plan(heads_model())
    assert [r.nodes for r in part.regions] == [["fc1", "relu", "fc2", "softmax"],
                                               ["conv", "conv_relu", "up"]]
    assert [r.inputs for r in part.regions] == [["rows"], ["picked_maps"]]
    assert [r.outputs for r in part.regions] == [["probs"], ["up"]]
    (sample,) = random_inputs(part.inputs)  # the sample run's input
    counted = int((sample.max(axis=1) > THRESHOLD).sum())
    assert 0 < counted < ROWS_IN
    assert [r.rows for r in part.regions] == [-(-counted // ROW_MULTIPLE) * ROW_MULTIPLE] * 2
    kinds = [kind for kind, _ in part.steps]
    assert kinds == ["onnxruntime", "rows", "rows", "onnxruntime"]
    assert "rows: tvm runs 4 of them (Gemm 2, Relu 1, Softmax 1)" in part.summary()
    assert part.record()["row_regions"] == [r.record() for r in part.regions]


def test_without_row_regions_onnxruntime_runs_the_heads():
    part = plan(heads_model(), row_regions=False)
    assert part.regions == [] and [kind for kind, _ in part.steps] == ["onnxruntime"]


@pytest.mark.parametrize("selected", [0, 5, 40, ROWS_IN], ids=["none", "few", "some", "all"])
def test_compiled_row_regions_match_onnxruntime_for_any_row_count(compiled, selected):
    x = _inputs(selected)
    got = compiled(x)
    want = _ort(heads_model(), x)
    assert [g.shape for g in got] == [w.shape for w in want]
    assert got[0].shape[0] == selected
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_row_counts_above_the_rows_per_call_run_in_chunks(compiled):
    rows = [r.rows for r in compiled.partition.regions]
    assert max(rows) < ROWS_IN  # the "all" case above ran more than one call per region
    parts = compiled.time_parts(repeat=2)
    assert sorted(parts) == ["onnxruntime", "rows", "total", "tvm"]
    assert (parts["rows"] > 0).all()


def test_compile_takes_the_rows_per_call_the_config_records():
    model = heads_model()
    assert [r.rows for r in plan(model, rows={"fc1": 8}).regions][0] == 8
    config = Config.uniform(model)
    config.model["partition"]["row_regions"][0]["rows"] = 8  # its nodes were made for other rows
    with pytest.raises(ConfigMismatchError, match=r"nodes.fc1.workload.data: config has \[\d+, 8\], "
                                                  r"the model has \[8, 8\]"):
        graphtune.compile(model, config)


def test_a_config_with_other_row_regions_is_refused_naming_the_node():
    model = heads_model()
    config = Config.uniform(model)
    config.model["partition"]["row_regions"][1]["nodes"].remove("up")
    with pytest.raises(ConfigMismatchError, match="ONNX node 'up' runs in a row region for this model"):
        graphtune.compile(model, config)
    config.model["partition"]["row_regions"] = "many"
    with pytest.raises(ConfigMismatchError, match="row_regions: expected"):
        graphtune.compile(model, config)


def test_an_archive_keeps_the_row_regions(compiled, tmp_path):
    path = tmp_path / "heads.zip"
    compiled.export_library(path)
    loaded = graphtune.load(path)
    assert [r.record() for r in loaded.partition.regions] == [r.record() for r in compiled.partition.regions]
    x = _inputs(40)
    for a, b in zip(loaded(x), compiled(x)):
        np.testing.assert_array_equal(a, b)


def test_tune_tunes_the_row_regions_and_keeps_those_faster_in_tvm(tmp_path):
    model = heads_model()
    result = graphtune.tune(model, records=tmp_path / "heads.records.jsonl", max_candidates=1,
                            progress=False)
    assert [t.nodes for t in result.regions] == [["fc1", "relu", "fc2", "softmax"],
                                                 ["conv", "conv_relu", "up"]]
    kept = [t.nodes for t in result.regions if t.faster_in_tvm]  # measured: either way
    assert [r.nodes for r in result.partition.regions] == kept
    assert result.config.model["partition"].get("row_regions", []) == \
        [r.record() for r in result.partition.regions]
    for timing in result.regions:
        assert timing.tvm_ms > 0 and timing.onnxruntime_ms > 0
        assert ({"fc1", "fc2", "conv", "up"} & set(timing.nodes) <= set(result.config.nodes)) \
            == timing.faster_in_tvm
        assert timing.describe() in result.summary()
    assert ("row region(s) of them in tvm" in recorded_summary(result.config)) == bool(kept)
    run = graphtune.compile(model, result.config)
    x = _inputs(40)
    for g, w in zip(run(x), _ort(model, x)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_row_wise_ops_and_regions_by_structure():
    w = {"w": np.ones((4, 8), np.float32), "c": np.ones((1, 8), np.float32)}
    assert row_wise(helper.make_node("MatMul", ["x", "w"], ["y"]), w)
    assert not row_wise(helper.make_node("MatMul", ["w", "x"], ["y"]), w)  # the rows are the weight's
    assert not row_wise(helper.make_node("Flatten", ["x"], ["y"], axis=0), {})
    assert not row_wise(helper.make_node("Add", ["x", "z"], ["y"]), {})  # two row tensors
    assert not row_wise(helper.make_node("Reshape", ["x", "s"], ["y"]), {"s": np.ones(2)})
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]),
                               helper.make_node("Sigmoid", ["y"], ["z"])], "g", [], [])
    assert candidates(helper.make_model(graph)) == []  # no conv or dense: not worth a call


def test_a_constant_that_indexes_rows_is_no_row_region():
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1),
                               helper.make_node("Add", ["y", "bias"], ["z"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["n", 4])],
                              [numpy_helper.from_array(np.ones((4, 8), np.float32), "w"),
                               numpy_helper.from_array(np.ones((3, 4), np.float32), "bias")])
    model = helper.make_model(graph)
    sample = {"x": np.ones((3, 8), np.float32), "y": np.ones((3, 4), np.float32),
              "z": np.ones((3, 4), np.float32)}
    with pytest.raises(ValueError, match="indexes rows"):
        RowRegion.of(model, [0, 1], sample)
    assert RowRegion.of(model, [0], sample).rows == 3  # a few rows: as many per call


def test_run_rows_pads_the_last_chunk_and_drops_its_rows():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", 3])])
    region = RowRegion(["relu"], ["x"], ["y"], 8, helper.make_model(graph))
    seen = []

    def call(a):
        seen.append(a.copy())
        return np.maximum(a, 0) + 1  # padding rows become 1: they must not come back

    x = -np.ones((17, 3), np.float32)
    y = run_rows(call, region, {"x": x})["y"]
    assert [a.shape[0] for a in seen] == [8, 8, 8]
    assert (seen[-1][1:] == 0).all()  # the last chunk padded with zeros
    assert y.shape == (17, 3) and (y == 1).all()


def pooled_boxes_model() -> onnx.ModelProto:
    """A conv's feature map (TVM) pooled over the boxes whose score passes 0.5 (``NonZero``),
    then a dense layer: a two-stage detector's box pool and head."""
    rng = np.random.default_rng(1)
    consts = {"w": rng.standard_normal((8, 3, 3, 3)).astype(np.float32),
              "fc": rng.standard_normal((5, 72)).astype(np.float32),
              "thr": np.float32(0.5), "ax0": np.array([0], np.int64),
              "images": np.zeros(32, np.int64)}
    node = helper.make_node
    nodes = [node("Conv", ["image", "w"], ["features"], name="conv", pads=[1, 1, 1, 1]),
             node("Greater", ["scores", "thr"], ["keep"], name="keep"),
             node("NonZero", ["keep"], ["idx2"], name="nonzero"),
             node("Squeeze", ["idx2", "ax0"], ["idx"], name="idx"),
             node("Gather", ["boxes", "idx"], ["picked"], name="pick", axis=0),
             node("Gather", ["images", "idx"], ["index"], name="pick_index", axis=0),
             node("RoiAlign", ["features", "picked", "index"], ["pooled"], name="pool",
                  output_height=3, output_width=3, sampling_ratio=2, spatial_scale=0.5,
                  coordinate_transformation_mode="output_half_pixel"),
             node("Flatten", ["pooled"], ["flat"], name="flatten"),
             node("Gemm", ["flat", "fc"], ["logits"], name="fc", transB=1)]
    graph = helper.make_graph(
        nodes, "pooled", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 12, 12]),
                          helper.make_tensor_value_info("scores", TensorProto.FLOAT, [32]),
                          helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [32, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_roi_align_joins_a_row_region_reading_the_feature_map_whole():
    part = plan(pooled_boxes_model())
    (region,) = part.regions
    assert region.nodes == ["pool", "flatten", "fc"]
    assert region.inputs == ["features", "picked", "index"] and region.whole == ["features"]
    assert region.row_inputs == ["picked", "index"]
    assert region.input_shapes() == {"features": [1, 8, 12, 12], "picked": [region.rows, 4],
                                     "index": [region.rows]}
    assert "and whole features" in part.summary()
    assert "features" not in part.tuned_shapes  # the TVM part computes it
    assert "features" not in {v.name for v in part.tuned_model.graph.input}


@pytest.mark.parametrize("selected", [0, 3, 32], ids=["none", "few", "all"])
def test_compiled_roi_align_regions_match_onnxruntime(selected):
    model = pooled_boxes_model()
    run = graphtune.compile(model, Config.uniform(model))
    assert isinstance(run, PartitionedModel) and len(run.partition.regions) == 1
    assert run.partition.regions[0].rows < 32  # "all" runs in chunks
    rng = np.random.default_rng(selected)
    image = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
    scores = np.where(np.arange(32) < selected, 1.0, 0.0).astype(np.float32)
    corner = rng.uniform(-4, 20, (32, 2))
    boxes = np.concatenate([corner, corner + rng.uniform(0.5, 12, (32, 2))], 1).astype(np.float32)
    got = run(image, scores, boxes)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"image": image, "scores": scores, "boxes": boxes})
    assert got.shape == want.shape == (selected, 5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(initial=1.0))


def test_a_tensor_read_whole_must_have_a_static_shape_and_rows_round_up():
    graph = helper.make_graph([helper.make_node("RoiAlign", ["x", "rois", "index"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, 5, 5]),
                               helper.make_tensor_value_info("rois", TensorProto.FLOAT, ["k", 4]),
                               helper.make_tensor_value_info("index", TensorProto.INT64, ["k"])], [])
    sample = {"x": np.ones((1, 4, 5, 5), np.float32), "rois": np.ones((3, 4), np.float32),
              "index": np.zeros(3, np.int64), "y": np.ones((3, 4, 1, 1), np.float32)}
    with pytest.raises(ValueError, match="'x' is read whole but is not an input of static shape"):
        RowRegion.of(helper.make_model(graph), [0], sample)
    graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1  # static: a region
    region = RowRegion.of(helper.make_model(graph), [0], sample)
    assert region.whole == ["x"] and region.rows == ROW_MULTIPLE  # 3 proposals: rounded up all the same


def test_an_archive_keeps_what_a_region_reads_whole(tmp_path):
    model = pooled_boxes_model()
    run = graphtune.compile(model, Config.uniform(model))
    run.export_library(tmp_path / "pooled.zip")
    loaded = graphtune.load(tmp_path / "pooled.zip")
    assert loaded.partition.regions[0].whole == ["features"]
    rng = np.random.default_rng(7)
    inputs = (rng.standard_normal((1, 3, 12, 12)).astype(np.float32),
              rng.standard_normal(32).astype(np.float32),
              np.abs(rng.standard_normal((32, 4))).astype(np.float32) * 8)
    np.testing.assert_array_equal(loaded(*inputs), run(*inputs))
