"""graphtune.profile / ``graphtune profile``: per-call VM times mapped to ONNX nodes, vs config and ORT."""

import dataclasses
import json
import shutil
import statistics

import pytest
import tvm
from tvm import relax

import graphtune
from graphtune import models
from graphtune.cli import main
from graphtune.config import Config
from graphtune.profiling import KINDS, ProfileResult, ProfileRow, ort_scale_factor

MODEL = "efficientnet_b0"  # SiLU, squeeze-excitation, global pools, a dense head


@pytest.fixture(scope="module")
def model():
    return models.get(MODEL, image_size=32)


@pytest.fixture(scope="module")
def config(model):
    """Uniform config with a made-up cost on every node (predictions are config data)."""
    cfg = Config.uniform(model)
    for k, node in enumerate(cfg.nodes.values()):
        node.cost_ms = 0.001 * (k + 1)
    cfg.solution = {**(cfg.solution or {}), "transform_ms": 0.5}
    return cfg


@pytest.fixture(scope="module")
def result(model, config):
    return graphtune.profile(model, config, repeat=3)


def _called_primfuncs(model, config):
    """PrimFunc calls of one run, counted by an instrument of our own."""
    compiled = graphtune.compile(model, config)
    vm = relax.VirtualMachine(compiled.executable, tvm.cpu(0))
    called = []

    def instrument(func, symbol, before, ret, *args):
        if before and symbol in compiled.functions:
            called.append(symbol)
        return 0

    vm.set_instrument(instrument)
    vm["main"](*compiled._tensors(compiled.random_inputs()))
    return called


def test_rows_cover_every_called_primfunc(model, config, result):
    rows = [r for r in result.rows if r.index >= 0]
    assert [r.function for r in rows] == _called_primfuncs(model, config)
    assert [r.index for r in rows] == list(range(len(rows)))
    assert all(r.kind in KINDS and r.gt_ms is not None and r.gt_ms >= 0 for r in rows)


def test_every_onnx_node_is_placed_once(model, result):
    rows = [r for r in result.rows if r.index >= 0]
    placed = [n for r in rows for n in r.nodes]
    assert len(placed) == len(set(placed))
    assert result.unplaced == []
    convs = {n.name for n in model.graph.node if n.op_type in ("Conv", "Gemm")}
    assert convs <= set(placed)
    by_node = {n: r for r in rows for n in r.nodes}
    # SiLU's sigmoid fused with its conv; the squeeze-excitation pool is a call of its own
    assert by_node["features.0.2.sigmoid"] is by_node["features.0.0"]
    pool = by_node["features.1.0.block.1.avgpool"]
    assert pool.kind == "pool" and pool.nodes == ["features.1.0.block.1.avgpool"]
    assert by_node["features.1.0.block.1.fc1"].kind == "conv2d"
    assert by_node["features.1.0.block.0.0"].kind == "depthwise"
    assert by_node["classifier.1"].kind == "dense"


def test_totals_agree_with_the_runs(result):
    # each run's timed calls are part of that run's wall time
    assert len(result.calls_ms) == len(result.instrumented_ms) == 3
    assert all(0 < c <= w for c, w in zip(result.calls_ms, result.instrumented_ms))
    totals = result.totals()
    assert sum(t["gt_ms"] for t in totals.values()) == pytest.approx(result.gt_total_ms)
    assert sum(t["calls"] for t in totals.values()) == len([r for r in result.rows if r.index >= 0])
    # an identity, not a speed bound: the rows are medians of these very runs, and the median
    # of 3 numbers is at most half their sum, so the medians' sum is at most half the runs' sum
    assert 0 < result.gt_total_ms <= sum(result.calls_ms) / 2 * (1 + 1e-9)
    assert result.vm_ms > 0


def test_predictions_come_from_the_config(config, result):
    for row in result.rows:
        costs = [config.nodes[n].cost_ms for n in row.nodes if n in config.nodes]
        if costs:
            assert row.predicted_ms == pytest.approx(sum(costs))
            assert row.diff_ms == pytest.approx(row.gt_ms - row.predicted_ms)
        else:
            assert row.predicted_ms is None and row.diff_ms is None
    total = sum(node.cost_ms for node in config.nodes.values()) + 0.5
    assert sum(result.predicted.values()) == pytest.approx(total)
    assert result.totals()["transform"]["predicted_ms"] >= 0.5


def test_ort_rows_name_real_onnx_nodes(model, result):
    names = {n.name for n in model.graph.node}
    gt = [r for r in result.rows if r.index >= 0]
    ort_only = [r for r in result.rows if r.index < 0]
    assert any(r.ort_ms for r in gt)
    assert all(set(r.nodes) <= names for r in gt)
    assert all(len(r.nodes) == 1 and r.nodes[0].startswith("ort:") and r.gt_ms is None
               for r in ort_only)
    assert sum(r.ort_ms or 0 for r in result.rows) == pytest.approx(result.ort_total_ms)
    assert "| total |" in result.table()


def test_json_round_trip(result):
    data = json.loads(json.dumps(result.to_dict()))
    assert data["format"] == "graphtune.profile" and set(data["totals"]) <= set(KINDS)
    assert ProfileResult.from_dict(data) == result


def test_host_state_is_probed_around_the_runs_with_several_threads(result):
    assert len(result.handoff_ratio) == (2 if result.threads > 1 else 0)
    assert all(r > 0 for r in result.handoff_ratio)
    assert ("host handoff ratio" in result.table()) is (result.threads > 1)


def test_bad_arguments_raise_before_work():
    with pytest.raises(graphtune.ArgumentError, match="repeat"):
        graphtune.profile("resnet18", repeat=0)
    with pytest.raises(graphtune.ModelError, match="unknown model"):
        graphtune.profile("resnet-18")


@pytest.mark.parametrize("argv, words", [
    (["--repeat", "0"], "--repeat must be a positive integer"),
    (["--top", "-1"], "--top must be a positive integer"),
    (["--json", "/nonexistent/p.json"], "does not exist"),
    (["--config", "/nonexistent/c.json"], "no such config file"),
])
def test_cli_bad_input_is_one_line_exit_2(capsys, argv, words):
    assert main(["profile", "resnet18", "--image-size", "32", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphtune: error:") and words in err and err.count("\n") == 1


def test_cli_unknown_model_and_mismatched_config(tmp_path, capsys):
    assert main(["profile", "resnet-18"]) == 2
    assert "unknown model" in capsys.readouterr().err
    other = tmp_path / "m.json"
    Config.uniform(models.get("mobilenet_v2", image_size=32)).save(other)
    assert main(["profile", "resnet18", "--image-size", "32", "--config", str(other)]) == 2
    assert capsys.readouterr().err.startswith("graphtune: error:")


def test_cli_writes_json(tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["profile", "resnet18", "--image-size", "32", "--repeat", "2", "--no-ort",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| conv2d |" in text and str(out) in text
    assert "| overhead |" in text and "| spread |" in text  # the rows adding up to the latency
    data = json.loads(out.read_text())
    assert data["model"] == "resnet18" and data["ort_total_ms"] is None
    assert data["overhead_ms"] == pytest.approx(data["vm_ms"] - statistics.median(data["calls_ms"]))
    assert data["ort_overhead_ms"] is None and data["ort_e2e_ms"] is None
    assert {"conv1", "layer4.1.conv2", "fc"} <= {n for r in data["rows"] for n in r["nodes"]}


@pytest.fixture(scope="module")
def tuned18(tmp_path_factory, resnet18_records):
    """ResNet-18 at 32 px tuned on 2 candidates with every transform measured, and its records."""
    records = tmp_path_factory.mktemp("r18") / "r18.records.jsonl"
    shutil.copyfile(resnet18_records, records)
    return graphtune.tune("resnet18", records=records, image_size=32, max_candidates=2,
                          min_repeat_ms=1, repeat=1, transforms="all", progress=False), records


def test_op_groups_are_predicted_on_the_calls_that_run_them(tuned18):
    tuned, _ = tuned18
    config = tuned.config
    result = graphtune.profile("resnet18", config, image_size=32, repeat=2, ort=False)
    by_node = {n: r for r in result.rows for n in r.nodes}
    pool_group = [g for g in config.solution["op_groups"] if g[2].startswith("max_pool2d")]
    assert len(pool_group) == 1 and pool_group[0][0] == "conv1"  # the pool runs in conv1's layout
    pool, conv = by_node["maxpool"], by_node["conv1"]
    assert pool.kind == "pool" and pool.predicted_ms == pytest.approx(pool_group[0][3])
    epilogues = sum(g[3] for g in config.solution["op_groups"] if g[0] == "conv1" and g is not pool_group[0])
    assert conv.predicted_ms == pytest.approx(config.nodes["conv1"].cost_ms - pool_group[0][3])
    assert conv.predicted_ms >= epilogues
    # moved, not added: the kinds still sum to the model's prediction
    assert sum(result.predicted.values()) == pytest.approx(config.solution["predicted_ms"])
    assert result.totals()["pool"]["predicted_ms"] >= pool_group[0][3]


def test_transform_predictions_come_from_the_records(tuned18, tmp_path):
    from graphtune.config import Config
    from graphtune.solve import Solution

    tuned, records = tuned18
    graph = tuned.graph  # alternate first and last candidates: layouts change along the chain,
    order = list(graph.nodes)  # through transforms tune measured (whatever the optimum was)
    choice = {n: (len(graph.candidates(n)) - 1) * (i % 2) for i, n in enumerate(order)}
    mixed = Config.from_solution(graph, Solution(choice, graph.energy(choice), 0.0, False, "test", 0.0))
    result = graphtune.profile("resnet18", mixed, image_size=32, repeat=2, ort=False,
                               records=records)
    transforms = [r for r in result.rows if r.kind == "transform"]
    assert transforms and all(r.predicted_ms is not None and r.predicted_ms > 0
                              for r in transforms if not r.nodes)
    assert result.predicted["transform"] == pytest.approx(mixed.solution["transform_ms"])
    with pytest.raises(graphtune.MeasureError, match="does not exist"):
        graphtune.profile("resnet18", image_size=32, records=tmp_path / "none.jsonl")


def test_dynamic_input_with_shape_dict():
    model = models.get("resnet18", image_size=32)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    result = graphtune.profile(model, shape_dict={"input": [1, 3, 32, 32]}, repeat=2)
    assert result.rows[1].nodes == ["conv1", "relu"] and result.rows[1].ort_ms is not None
    assert result.unplaced == []


def test_placement_rules_on_a_pre_activation_chain():
    """conv0+relu0 fused, a pool of its own, then BN (mul, add) + relu fused without a conv."""
    from onnx import helper

    from graphtune.profiling import _place

    nodes = [helper.make_node("Conv", ["x", "w"], ["c0"], name="c0"),
             helper.make_node("Relu", ["c0"], ["r0"], name="r0"),
             helper.make_node("MaxPool", ["r0"], ["p0"], name="p0"),
             helper.make_node("Mul", ["p0", "s"], ["bn.mul"], name="bn.mul"),
             helper.make_node("Add", ["bn.mul", "b"], ["bn"], name="bn"),
             helper.make_node("Relu", ["bn"], ["r1"], name="r1")]
    model = helper.make_model(helper.make_graph(nodes, "g", [], []))
    sites = [("fused_gt_c0_add_relu", ["c0", "lv1", "lv2"]), ("max_pool2d", ["lv3"]),
             ("fused_multiply_add_relu1", ["lv4", "lv5", "lv6"])]
    placed, unplaced = _place(model, sites)
    assert placed == [["c0", "r0"], ["p0"], ["bn.mul", "bn", "r1"]] and unplaced == []


def test_a_group_is_found_on_its_call_whatever_transforms_fused_with_it():
    """ShuffleNetV2's concat + channel shuffle: the probe priced it with other transforms fused
    into it than the config's compile has, and owned by the branch's last conv (its layout).
    Labels leave transforms out (graphtune.compiler.legalize.label_of): found by its label."""
    from types import SimpleNamespace

    from onnx import helper

    from graphtune.profiling import _place_groups

    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="b5"),
             helper.make_node("Concat", ["y", "c"], ["cat"], name="cat", axis=1),
             helper.make_node("Reshape", ["cat", "s"], ["view"], name="view")]
    model = helper.make_model(helper.make_graph(nodes, "g", [], []))
    layout = SimpleNamespace(out_layout="NCHW1c")
    config = SimpleNamespace(nodes={"b5": layout, "cat": layout}, solution={"op_groups": [
        ["b5", "NCHW1c", "concatenate_reshape", 0.02]]})
    labels = ["gt_b5_add", "concatenate1_reshape"]
    rows, moved, unmatched = _place_groups(labels, [["b5"], ["cat", "view"]], model, config)
    assert rows == {1: [0.02]} and moved == {"b5": 0.02} and unmatched == 0.0


def test_totals_add_up_to_each_runtimes_latency(result):
    # graphtune: call medians + spread + overhead = uninstrumented latency; overhead = latency
    # minus the median run's calls
    assert result.gt_total_ms + result.spread_ms + result.overhead_ms == pytest.approx(result.vm_ms)
    assert result.overhead_ms == pytest.approx(result.vm_ms - statistics.median(result.calls_ms))
    assert result.builtin_calls > 0
    # ONNX Runtime: its node times scaled down (never up) onto its unprofiled latency
    assert len(result.ort_calls_ms) == result.repeat
    assert result.ort_scale == ort_scale_factor(statistics.median(result.ort_calls_ms),
                                                result.ort_e2e_ms)
    assert result.ort_e2e_ms > 0 and result.ort_profiled_ms > 0
    scaled_run = statistics.median(result.ort_calls_ms) * result.ort_scale
    assert result.ort_total_ms + result.ort_spread_ms == pytest.approx(scaled_run)
    assert result.ort_total_ms + result.ort_spread_ms + result.ort_overhead_ms \
        == pytest.approx(result.ort_e2e_ms)
    if result.ort_scale < 1:  # scaled: the median profiled run's nodes take exactly the latency
        assert scaled_run == pytest.approx(result.ort_e2e_ms)
        assert result.ort_overhead_ms == pytest.approx(0, abs=1e-9)
    else:
        assert result.ort_overhead_ms >= 0
    table = result.table()
    for label in ("| sum of calls |", "| spread |", f"| overhead | {result.builtin_calls} VM builtins |",
                  "| total |"):
        assert label in table
    data = result.to_dict()
    assert data["overhead_ms"] == pytest.approx(result.overhead_ms)
    assert data["ort_overhead_ms"] == pytest.approx(result.ort_overhead_ms)


def test_overhead_and_scale_arithmetic():
    rows = [ProfileRow(0, "f0", "conv2d", ["a"], "kernel", 1.0, None, 0.5),
            ProfileRow(1, "f1", "pool", ["b"], "reduction", 0.25, None, 1.0)]
    result = ProfileResult("m", rows, vm_ms=2.0, instrumented_ms=[3.0, 3.0, 3.0],
                           calls_ms=[1.5, 1.75, 9.0], ort_total_ms=1.5, repeat=3, threads=2,
                           builtin_calls=7, ort_e2e_ms=2.5, ort_profiled_ms=3.0,
                           ort_calls_ms=[1.5, 2.0, 8.0], ort_scale=1.0)
    assert result.gt_total_ms == 1.25
    assert result.spread_ms == pytest.approx(0.5)    # median run 1.75 - medians 1.25
    assert result.overhead_ms == pytest.approx(0.25)  # latency 2.0 - median run 1.75
    assert result.ort_spread_ms == pytest.approx(0.5) and result.ort_overhead_ms == pytest.approx(0.5)
    assert "| overhead | 7 VM builtins | 0.250 | - | 0.500 | - |" in result.table()
    assert "| total | | 2.000 | - | 2.500 | 0.80 |" in result.table()
    assert ort_scale_factor(4.0, 2.5) == pytest.approx(0.625) and ort_scale_factor(2.0, 2.5) == 1.0
    assert ProfileResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result
    assert "other work took" not in result.table()  # contention unknown
    busy = dataclasses.replace(result, contention=0.3)
    assert "other work took 30% of the CPUs (times slower than alone)" in busy.table()
    assert "other work took" not in dataclasses.replace(result, contention=0.01).table()


def test_ort_nodes_named_after_their_outputs_are_matched():
    # torch's dynamo exporter names nodes "node_Conv_3" writing "getitem_1"; ORT's NCHWc pass
    # names its fused conv after the output ("relu_nchwc"): both must map to ONNX nodes
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from graphtune.profiling import ort_profile

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype("float32"), name)
               for name, shape in (("w1", [32, 16, 3, 3]), ("w2", [32, 32, 1, 1]))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["conv"], name="node_Conv_3", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["conv"], ["relu"], name="node_relu"),
             helper.make_node("Conv", ["relu", "w2"], ["getitem_1"], name="node_Conv_5")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [1, 16, 16, 16])],
                              [helper.make_tensor_value_info("getitem_1", TensorProto.FLOAT, None)],
                              weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    convs = [n for n in ort_profile(model, repeat=2, threads=1)["nodes"] if n["op"] == "Conv"]
    assert len(convs) == 2
    assert {n["node"] for n in convs} <= {"node_Conv_3", "node_relu", "node_Conv_5"}
    assert "node_Conv_5" in {n["node"] for n in convs}
