"""Models TVM cannot import whole (issue 31): op groups of dynamic shape, and partitions.

Step A: a model Relax imports whose compiled form has data-dependent shapes (a non-max
suppression's selected indices) tunes, compiles and matches ONNX Runtime; its dynamic
op groups are left out of pricing. Step B: a model with a ``Loop``, one whose shapes
depend on the data (``Compress`` -> ``Shape`` -> ``ReduceMin`` -> ``Slice``) and one
reading a non-max suppression's output are split into the part TVM compiles and the part
ONNX Runtime runs; each runs whole and matches ONNX Runtime running the whole model.
Step C: the partition is visible (``TuneResult.summary()``, ``graphtune show``,
``graphtune profile`` with the ONNX Runtime part's row) and a partitioned model is exported
as one archive that ``graphtune.load`` runs as the model did.
"""

from __future__ import annotations

import json
import warnings
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import graphtune
from compile_check import ort_outputs
from graphtune import x86
from graphtune.cli import main
from graphtune.config import Config
from graphtune.errors import ConfigMismatchError, ModelError
from graphtune.frontend import import_model
from graphtune.frontend.cut import plan
from graphtune.opgroups.pricing import probe_choices, probe_groups
from graphtune.partition import PartitionedModel
from graphtune.profiling import ORT_PART, ProfileResult
from odd_models import nms_model

pytestmark = pytest.mark.integration

SIZE = 8


# ------------------------------------------------------------------ models
class _Graph:
    """Collects nodes and seeded initializers of a one-input model (``input``, 1x3x8x8)."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []

    def const(self, name: str, array) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: list, name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def conv(self, name: str, x: str, cin: int, cout: int) -> str:
        w = (self.rng.standard_normal((cout, cin, 3, 3)) * 0.2).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.2).astype(np.float32)
        return self.node("Conv", [x, self.const(name + ".w", w), self.const(name + ".b", b)], name,
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1])

    def model(self, outputs: list, opset: int = 13) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, "partition_test",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
            outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def _loop_body(channels: int) -> onnx.GraphProto:
    """``y -> y * 0.5 + 1`` once per trip."""
    shape = [1, channels, SIZE, SIZE]
    return helper.make_graph(
        [helper.make_node("Mul", ["y_in", "half"], ["h"], name="body.mul"),
         helper.make_node("Add", ["h", "one"], ["y_out"], name="body.add"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body.cond")],
        "body", [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("y_in", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(np.float32(0.5), "half"),
         numpy_helper.from_array(np.float32(1.0), "one")])


def loop_model(head_first: bool = False) -> onnx.ModelProto:
    """conv -> relu -> ``Loop`` (3 trips) -> conv ``head`` (-> output); with ``head_first``
    the head reads the relu and the loop the head (same node names, another partition)."""
    g = _Graph(1)
    x = g.node("Relu", [g.conv("conv", "input", 3, 8)], "relu")
    trips, cond = g.const("trips", np.int64(3)), g.const("cond", np.bool_(True))
    if head_first:
        head = g.conv("head", x, 8, 8)
        g.nodes.append(helper.make_node("Loop", [trips, cond, head], ["output"], name="loop",
                                        body=_loop_body(8)))
    else:
        g.nodes.append(helper.make_node("Loop", [trips, cond, x], ["looped"], name="loop",
                                        body=_loop_body(8)))
        g.node("Identity", [g.conv("head", "looped", 8, 8)], "output")
    return g.model([helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, SIZE, SIZE])])


def shape_model() -> onnx.ModelProto:
    """conv -> flatten -> keep the positive values (``Compress``) -> ``Shape`` -> ``ReduceMin``
    with a cap -> ``Slice`` of the first k: shapes that depend on the data, and the conv as a
    second output."""
    g = _Graph(2)
    conv = g.conv("conv", "input", 3, 4)
    flat = g.node("Reshape", [conv, g.const("flat_shape", np.array([-1], np.int64))], "flatten")
    mask = g.node("Greater", [flat, g.const("zero", np.float32(0))], "positive")
    kept = g.node("Compress", [flat, mask], "compress", axis=0)
    count = g.node("Shape", [kept], "count")
    capped = g.node("Concat", [count, g.const("cap", np.array([100], np.int64))], "with_cap", axis=0)
    k = g.node("ReduceMin", [capped], "k", keepdims=1)
    g.node("Slice", [kept, g.const("start", np.array([0], np.int64)), k], "first_k")
    return g.model([helper.make_tensor_value_info("first_k", TensorProto.FLOAT, ["k"]),
                    helper.make_tensor_value_info("conv", TensorProto.FLOAT, [1, 4, SIZE, SIZE])])


def nms_gather_model() -> onnx.ModelProto:
    """Boxes and scores from convs, ``NonMaxSuppression``, then the kept boxes gathered by the
    selected indices (a reader of the suppression's output) and their scores."""
    g = _Graph(3)
    feats = g.conv("box_conv", "input", 3, 4)
    boxes = g.node("ReduceMean", [feats], "box_mean", axes=[3], keepdims=0)  # 1 x 4 x 8
    boxes = g.node("Transpose", [boxes], "boxes", perm=[0, 2, 1])  # 1 x 8 x 4
    scores = g.node("ReduceMean", [g.conv("score_conv", "input", 3, 1)], "scores", axes=[3],
                    keepdims=0)  # 1 x 1 x 8
    selected = g.node("NonMaxSuppression", [boxes, scores, g.const("max_out", np.array([4], np.int64)),
                                            g.const("iou", np.array([0.5], np.float32))], "nms")
    index = g.node("Gather", [selected, g.const("box_column", np.int64(2))], "box_index", axis=1)
    flat = g.node("Squeeze", [boxes, g.const("batch_axis", np.array([0], np.int64))], "flat_boxes")
    g.node("Gather", [flat, index], "kept_boxes", axis=0)
    g.node("ReduceSum", [scores], "total_score", keepdims=0)
    return g.model([helper.make_tensor_value_info("kept_boxes", TensorProto.FLOAT, ["n", 4]),
                    helper.make_tensor_value_info("total_score", TensorProto.FLOAT, [])])


def row_scatter_model() -> onnx.ModelProto:
    """conv -> rows (8 x 4 x 8 x 1) -> the rows with a positive value (``NonZero``) gathered
    and put back in place in zeros, as torch exports ``result[rows] = picked``
    (``ScatterElements`` of an expanded row index, torchvision's MultiScaleRoIAlign)."""
    g = _Graph(4)
    rows = g.node("Transpose", [g.conv("conv", "input", 3, 4)], "rows", perm=[2, 1, 3, 0])
    best = g.node("ReduceMax", [rows], "best", axes=[1, 2, 3], keepdims=0)
    positive = g.node("Greater", [best, g.const("zero", np.float32(0))], "positive")
    kept = g.node("NonZero", [positive], "nonzero")
    index = g.node("Squeeze", [kept, g.const("first", np.array([0], np.int64))], "kept")
    picked = g.node("Gather", [rows, index], "picked", axis=0)
    column = g.node("Reshape", [index, g.const("column", np.array([-1, 1, 1, 1], np.int64))],
                    "column_index")
    expanded = g.node("Expand", [column, g.node("Shape", [picked], "picked_shape")], "index")
    zeros = g.node("ConstantOfShape", [g.node("Shape", [rows], "rows_shape")], "zeros")
    g.node("ScatterElements", [zeros, expanded, picked], "scatter", axis=0)
    return g.model([helper.make_tensor_value_info("scatter", TensorProto.FLOAT, [SIZE, 4, SIZE, 1])])


def _compile(model: onnx.ModelProto, config: Config | None = None):
    """``graphtune.compile`` with a config, default knobs for unmentioned nodes (warning kept)."""
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        return graphtune.compile(model, config or Config({}))


def _assert_matches_whole_ort(model: onnx.ModelProto, compiled, seed: int = 1) -> None:
    inputs = compiled.random_inputs(seed=seed)
    got = compiled(*inputs)
    got = got if isinstance(got, list) else [got]
    expected = ort_outputs(model, inputs)
    assert len(got) == len(expected)
    for ours, theirs in zip(got, expected, strict=True):
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------ step A: dynamic op groups
def test_dynamic_shape_functions_are_no_op_groups():
    """The non-max suppression's dynamic strided slice is left out of pricing, not a crash."""
    model = nms_model()
    g = graphtune.extract(model, max_candidates=1)
    groups = probe_groups(import_model(model), g, probe_choices(g)[0], x86.host_target())
    assert groups.unpriced == ["dynamic_strided_slice"]
    assert groups and all(all(isinstance(d, int) for shape, _ in grp.task.workload["args"]
                              for d in shape) for grp in groups)


@pytest.mark.slow
def test_model_with_dynamic_op_group_tunes_compiles_and_matches_ort(tmp_path):
    model = nms_model()
    with pytest.warns(UserWarning, match=r"1 function\(s\) with data-dependent shapes "
                                         r"\(dynamic_strided_slice\).*predicted_ms leaves them out"):
        result = graphtune.tune(model, records=tmp_path / "nms.records.jsonl", max_candidates=1,
                                progress=False)
    assert result.ops is not None and result.ops.unpriced == ["dynamic_strided_slice"]
    assert "partition" not in result.config.model  # TVM takes the whole model
    compiled = _compile(model, result.config)
    assert not isinstance(compiled, PartitionedModel)
    x = compiled.random_inputs(seed=3)[0]
    np.testing.assert_array_equal(compiled(x), ort_outputs(model, [x])[0])


# ------------------------------------------------------------------ step B: partitions
@pytest.mark.parametrize("make, tvm_nodes, cut, reason", [
    (loop_model, ["conv", "relu"], "loop", "not supported by the Relax ONNX frontend"),
    (shape_model, ["conv", "flatten", "positive"], "compress", "is data-dependent"),
    (nms_gather_model, ["box_conv", "box_mean", "boxes", "score_conv", "scores", "flat_boxes",
                        "total_score"], "nms", "other nodes read them"),
], ids=["loop", "shape", "nms"])
def test_plan_cuts_at_the_first_node_relax_cannot_import(make, tvm_nodes, cut, reason):
    part = plan(make())
    assert part.tvm_nodes == tvm_nodes and not part.whole
    assert [c.node for c in part.cuts] == [cut] and reason in part.cuts[0].reason
    assert set(part.tvm_nodes).isdisjoint(part.ort_nodes)
    tvm_part, ort_part = part.parts()[:2]  # then the row regions (a conv after the loop)
    assert (tvm_part["runtime"], ort_part["runtime"]) == ("tvm", "onnxruntime")
    assert set(ort_part["inputs"]) <= set(tvm_part["outputs"]) | {"input"}
    assert f"cut at {cut!r}" in part.summary()


@pytest.mark.parametrize("make", [loop_model, shape_model, nms_gather_model, row_scatter_model],
                         ids=["loop", "shape", "nms", "row-scatter"])
def test_partitioned_model_matches_ort_running_the_whole_model(make):
    model = make()
    compiled = _compile(model)
    assert isinstance(compiled, PartitionedModel)
    assert compiled.output_names == [o.name for o in model.graph.output]
    _assert_matches_whole_ort(model, compiled)
    assert "onnxruntime:" in compiled.summary()
    parts = compiled.time_parts(repeat=2)
    assert sorted(parts) == sorted(["onnxruntime", "total", "tvm"] + ["rows"] * bool(compiled.regions))
    assert all(v.shape == (2,) and (v > 0).all() for v in parts.values())


def test_outputs_the_tvm_part_makes_are_the_callers_own():
    # the TVM part hands its outputs on as views of its memory; the model's outputs are copies
    model = shape_model()  # its second output, the conv, comes from the TVM part
    compiled = _compile(model)
    first = compiled(*compiled.random_inputs(seed=1))
    kept = [a.copy() for a in first]
    assert all(a.flags.owndata for a in first)
    compiled(*compiled.random_inputs(seed=2))
    for before, now in zip(kept, first, strict=True):
        np.testing.assert_array_equal(before, now)
    assert not compiled.compiled.views(*compiled.random_inputs(seed=1)[:1])[0].flags.owndata


def test_the_onnxruntime_part_scatters_rows_as_rows():
    part = plan(row_scatter_model())
    assert [c.node for c in part.cuts] == ["nonzero"]
    ops = [n.op_type for n in part.ort_model.graph.node]
    assert "ScatterND" in ops and "ScatterElements" not in ops


@pytest.fixture(scope="module")
def tuned_loop(tmp_path_factory):
    """:func:`loop_model` tuned on one candidate per node, and its config saved."""
    folder = tmp_path_factory.mktemp("loop")
    result = graphtune.tune(loop_model(), records=folder / "loop.records.jsonl", max_candidates=1,
                            progress=False)
    path = folder / "loop.graphtune.json"
    result.config.save(path)
    return result, path


def test_tuned_config_records_the_partition_and_compile_refuses_another(tuned_loop):
    model = loop_model()
    result, path = tuned_loop
    assert result.config.model["partition"] == {"tvm_nodes": ["conv", "relu"],
                                                "onnxruntime_nodes": ["loop", "head", "output"]}
    assert set(result.config.nodes) == {"conv"}
    compiled = _compile(model, Config.load(path))
    assert isinstance(compiled, PartitionedModel)
    _assert_matches_whole_ort(model, compiled)
    with pytest.raises(ConfigMismatchError, match=r"model\.partition: ONNX node 'head' runs in "
                                                  r"tvm for this model but in onnxruntime"):
        graphtune.compile(loop_model(head_first=True), Config.load(path))


@pytest.mark.parametrize("make", [loop_model, shape_model, nms_gather_model],
                         ids=["loop", "shape", "nms"])
def test_uniform_and_random_configs_of_a_partitioned_model_are_its_tvm_parts(make):
    model = make()
    part = plan(model)
    for config in (Config.uniform(model), Config.random(model, seed=3)):
        assert config.model["partition"] == part.record()
        assert config.check(model) == []  # every layout node of the TVM part, none missing
        compiled = graphtune.compile(model, config)
        assert isinstance(compiled, PartitionedModel)
        _assert_matches_whole_ort(model, compiled)


def test_a_config_with_a_partition_is_refused_for_a_whole_model():
    config = Config({}, model={"partition": {"tvm_nodes": ["box_conv"], "onnxruntime_nodes": []}})
    with pytest.raises(ConfigMismatchError, match=r"ONNX node 'box_mean' runs in tvm for this "
                                                  r"model but in onnxruntime"):
        graphtune.compile(nms_model(), config)


def test_a_model_whose_first_node_relax_rejects_is_one_error_line():
    g = _Graph(4)
    trips, cond = g.const("trips", np.int64(2)), g.const("cond", np.bool_(True))
    g.nodes.append(helper.make_node("Loop", [trips, cond, "input"], ["output"], name="first_loop",
                                    body=_loop_body(3)))
    model = g.model([helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, SIZE, SIZE])])
    with pytest.raises(ModelError, match=r"^no node of the model imports into TVM Relax \(ONNX "
                                         r"node 'first_loop' \(Loop\) cannot be imported.*"
                                         r"onnxruntime alone$"):
        plan(model)


# ------------------------------------------------------------------ step C: visible, exported
def _outputs(run, inputs: list) -> list:
    got = run(*inputs)
    return got if isinstance(got, list) else [got]


def test_tune_result_keeps_the_partition_and_predicts_its_onnxruntime_part(tuned_loop):
    result, _ = tuned_loop
    assert result.partition is not None and result.partition.tvm_nodes == ["conv", "relu"]
    assert result.onnxruntime_ms > 0
    solution = result.config.solution
    assert solution["onnxruntime_ms"] == result.onnxruntime_ms  # timed once, in the config
    assert result.predicted_ms == pytest.approx(solution["predicted_ms"])
    assert result.predicted_ms - result.onnxruntime_ms == pytest.approx(
        result.kernel_ms + result.ops_ms + result.transform_ms)
    summary = result.summary()
    assert f"+ onnxruntime part {result.onnxruntime_ms:.2f} ms (" in summary
    assert "onnxruntime: 3 nodes (" in summary and "cut at 'loop' (Loop)" in summary


def test_show_prints_the_recorded_partition(tuned_loop, tmp_path, capsys):
    _, path = tuned_loop
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "partition: tvm 2 nodes, onnxruntime 3 nodes (loop, head, output); onnxruntime part " in out
    assert "ms measured in tune (in predicted_ms)" in out
    bad = tmp_path / "bad.graphtune.json"
    Config({}, model={"partition": ["conv"]}).save(bad)
    assert main(["show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert 'model.partition: expected {"tvm_nodes": [...], "onnxruntime_nodes": [...]}' in err


@pytest.mark.parametrize("make", [loop_model, nms_gather_model], ids=["loop", "nms"])
def test_profile_has_the_onnxruntime_part_row_and_the_whole_model_total(make):
    model = make()
    part = plan(model)
    result = graphtune.profile(model, Config({}), repeat=2)
    calls = [r for r in result.rows if r.index >= 0]
    assert calls and all(set(r.nodes) <= set(part.tvm_nodes) for r in calls)
    (row,) = [r for r in result.rows if r.kind == ORT_PART]
    assert row.index == -1 and row.nodes == part.ort_nodes and row.predicted_ms is None
    assert row.gt_ms > 0 and row.ort_ms > 0  # ORT's whole-model times of the same nodes
    assert result.onnxruntime_part_ms == row.gt_ms
    assert result.total_ms == pytest.approx(result.vm_ms + row.gt_ms)
    assert result.gt_total_ms + result.spread_ms + result.overhead_ms == pytest.approx(result.total_ms)
    assert sum(t["gt_ms"] for t in result.totals().values()) == pytest.approx(result.gt_total_ms)
    table = result.table()
    assert "| onnxruntime part | 1 |" in table and f"| total | | {result.total_ms:.3f} |" in table
    data = json.loads(json.dumps(result.to_dict()))
    assert data["total_ms"] == pytest.approx(result.total_ms)
    assert ProfileResult.from_dict(data) == result


def test_profile_predicts_the_onnxruntime_part_by_the_tuned_config(tuned_loop):
    result, path = tuned_loop
    profiled = graphtune.profile(loop_model(), path, repeat=2, ort=False)
    (row,) = [r for r in profiled.rows if r.kind == ORT_PART]
    assert row.predicted_ms == profiled.predicted[ORT_PART] == result.onnxruntime_ms


def test_cli_profiles_a_partitioned_model_with_the_default_config(tmp_path, capsys):
    path = tmp_path / "nms.onnx"
    onnx.save(nms_gather_model(), path)
    assert main(["profile", str(path), "--repeat", "2", "--no-ort", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "(onnxruntime part " in out and "| onnxruntime part | 1 |" in out
    assert "| -1 | onnxruntime part | nms, box_index, kept_boxes |" in out


@pytest.mark.parametrize("make", [loop_model, shape_model, nms_gather_model],
                         ids=["loop", "shape", "nms"])
def test_exported_archive_loads_and_runs_as_the_model(make, tmp_path):
    model = make()
    compiled = _compile(model)
    path = tmp_path / "model.zip"
    compiled.export_library(path)
    loaded = graphtune.load(path)
    assert isinstance(loaded, PartitionedModel)
    assert loaded.input_names == compiled.input_names
    assert loaded.output_names == [o.name for o in model.graph.output]
    inputs = compiled.random_inputs(seed=2)
    expected = _outputs(compiled, inputs)
    for got in (_outputs(loaded, inputs), _outputs(graphtune.load(_reexported(loaded, tmp_path)),
                                                   inputs)):
        assert len(got) == len(expected)
        for ours, theirs in zip(got, expected, strict=True):
            np.testing.assert_array_equal(ours, theirs)
    assert loaded.summary() == compiled.summary() and loaded.parts() == compiled.parts()


def _reexported(loaded: PartitionedModel, folder) -> str:
    """``loaded`` exported again (its library's bytes: a loaded library cannot be exported)."""
    path = str(folder / "again.zip")
    loaded.export_library(path)
    return path


def test_cli_compile_writes_an_archive_graphtune_load_runs(tuned_loop, tmp_path, capsys):
    _, config = tuned_loop
    model, archive = tmp_path / "loop.onnx", tmp_path / "loop.zip"
    onnx.save(loop_model(), model)
    assert main(["compile", str(model), str(config), "-o", str(archive)]) == 0
    out = capsys.readouterr().out
    assert "archive of the partitioned model" in out and "cut at 'loop'" in out
    _assert_matches_whole_ort(loop_model(), graphtune.load(archive))


def test_loading_a_missing_or_damaged_archive_names_the_file_and_the_fix(tmp_path):
    with pytest.raises(ModelError, match=r"none\.zip: no such file; give the archive "
                                         r"PartitionedModel\.export_library wrote"):
        graphtune.load(tmp_path / "none.zip")
    compiled = _compile(nms_gather_model())
    good = tmp_path / "nms.zip"
    compiled.export_library(good)
    data = good.read_bytes()
    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(data[:len(data) // 2])
    with pytest.raises(ModelError, match=r"truncated\.zip: not a graphtune model archive \(.*\); "
                                         r"export the model again with PartitionedModel\.export_library$"):
        graphtune.load(truncated)
    library = tmp_path / "tvm_part.so"
    compiled.compiled.export_library(library)
    with pytest.raises(ModelError, match=r"tvm_part\.so: a shared library, not a graphtune model "
                                         r"archive: load .* with tvm\.runtime\.load_module"):
        graphtune.load(library)
    _rewrite(good, tmp_path / "no_library.zip", drop="tvm.so")
    with pytest.raises(ModelError, match=r"no_library\.zip: not a graphtune model archive \(no tvm\.so\)"):
        graphtune.load(tmp_path / "no_library.zip")
    _rewrite(good, tmp_path / "bad_library.zip", replace={"tvm.so": b"\x7fELF garbage"})
    with pytest.raises(ModelError, match=r"bad_library\.zip: its TVM library tvm\.so does not load"):
        graphtune.load(tmp_path / "bad_library.zip")
    manifest = json.loads(zipfile.ZipFile(good).read("manifest.json"))
    _rewrite(good, tmp_path / "newer.zip",
             replace={"manifest.json": json.dumps({**manifest, "version": 99}).encode()})
    with pytest.raises(ModelError, match=r"newer\.zip: archive version 99, this graphtune reads "
                                         r"version 1"):
        graphtune.load(tmp_path / "newer.zip")
    _rewrite(good, tmp_path / "bad_part.zip", replace={"onnxruntime.onnx": b"garbage"})
    with pytest.raises(ModelError, match=r"bad_part\.zip: a damaged graphtune model archive "
                                         r"\(ValueError: onnxruntime\.onnx is no ONNX model"):
        graphtune.load(tmp_path / "bad_part.zip")


def _rewrite(source, target, drop: str = "", replace: dict | None = None) -> None:
    """Copy the archive ``source`` to ``target`` without the member ``drop``, with members replaced."""
    replace = replace or {}
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for name in old.namelist():
            if name != drop:
                new.writestr(name, replace.get(name, old.read(name)))
