"""Every op in the objective: op groups measured per layout, in records, in predicted_ms."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import graphtune
from graphtune import extract, solve, x86
from graphtune.frontend import import_model
from graphtune.graph import LayoutGraph
from graphtune.measure import Records, measure
from graphtune.measure.build import build_task, payload_func, prim_func_of
from graphtune.models.builder import GraphBuilder
from graphtune.opgroups import pricing
from graphtune.opgroups.pricing import fused_edges, op_costs, op_group_task, probe_choices, probe_groups
from graphtune.opgroups.probe_index import index_path_of
from graphtune.ops import Op
from graphtune.report import config_table

TINY = {"max_candidates": 2, "progress": False, "min_repeat_ms": 2.0}


def _model():
    """conv -> SiLU -> conv -> squeeze-excitation -> max pool, a residual add of a 1x1 conv,
    a channel concat, global pool, flatten, dense, softmax: an op of every kind."""
    b = GraphBuilder("tiny_se", seed=0, batch_size=1, image_size=16)
    x = b.silu(b.conv(b.input, "stem", 16, kernel=3, padding=1), "stem.act")
    x = b.squeeze_excitation(b.conv(x, "expand", 32, kernel=1), "se", 8)
    x = b.max_pool(x, "pool", kernel=2, stride=2)
    y = b.add(b.conv(x, "branch", 32, kernel=1), x, "add")
    x = b.concat([x, y], "cat")
    x = b.flatten(b.global_avg_pool(x, "gap"), "flatten")
    b.unary("Softmax", b.dense(x, "fc", 10), "softmax", axis=1)
    return b.model(["softmax"])


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    records = tmp_path_factory.mktemp("opgroups") / "tiny.records.jsonl"
    result = graphtune.tune(_model(), records=records, **TINY)
    return result, records


def test_probes_cover_every_out_layout_of_every_free_node():
    g = extract(_model(), max_candidates=4)
    seen = {(n, g.candidates(n)[i].out_layout) for choice in probe_choices(g) for n, i in choice.items()}
    writes = {join: {c.out_layout for c in g.candidates(src)} for src, join in fused_edges(g)}
    want = {(n, c.out_layout) for n in g.nodes if g.op(n) != "boundary" for c in g.candidates(n)
            if c.in_layout in writes.get(n, {c.in_layout})}  # but fused joins' unwritable layouts
    assert seen == want
    assert ("se", "NCHW") not in seen and ("stem.act", "NCHW") not in seen


def test_fused_joins_are_silu_and_the_se_gate_and_probes_run_them_in_their_producers_layout():
    assert sorted(fused_edges(extract(_model(), max_candidates=1))) == [("se.fc2", "se"),
                                                                       ("stem", "stem.act")]
    # EfficientNet-B0's case: the probe covering the gate conv's NCHW3c ran the SE scale in
    # another layout, so its multiply was priced nowhere and the solver took NCHW3c for free
    g = LayoutGraph()
    g.add_node("x", costs=[1.0, 1.0], layouts=["NCHW8c", "NCHW16c"])
    g.add_node("fc2", costs=[1.0, 1.0], layouts=["NCHW8c", "NCHW3c"])
    g.add_node("scale", op="join", costs=[0.0] * 4, layouts=["NCHW", "NCHW8c", "NCHW16c", "NCHW3c"])
    g.add_edge("x", "scale", shape=[1, 48, 8, 8])
    g.add_edge("fc2", "scale", shape=[1, 48, 1, 1])
    assert fused_edges(g) == [("fc2", "scale")]
    probes = probe_choices(g)
    for choice in probes:
        fc2 = g.candidates("fc2")[choice["fc2"]]
        assert g.candidates("scale")[choice["scale"]].in_layout == fc2.out_layout
    seen = {(n, g.candidates(n)[i].out_layout) for choice in probes for n, i in choice.items()}
    assert seen == {("x", "NCHW8c"), ("x", "NCHW16c"), ("fc2", "NCHW8c"), ("fc2", "NCHW3c"),
                    ("scale", "NCHW8c"), ("scale", "NCHW3c")}
    g.add_node("fc3", costs=[1.0], layouts=["NCHW6c"])  # writes no layout the join reads:
    g.add_node("scale3", op="join", costs=[0.0], layouts=["NCHW8c"])  # nothing to fuse, no tie
    g.add_edge("x", "scale3", shape=[1, 48, 8, 8])
    g.add_edge("fc3", "scale3", shape=[1, 48, 1, 1])
    assert fused_edges(g) == [("fc2", "scale")]


def test_probe_groups_belong_to_the_node_whose_layout_they_run_in():
    model = _model()
    g = extract(model, max_candidates=1)
    groups = probe_groups(import_model(model), g, probe_choices(g)[0], x86.host_target())
    owners = {(grp.node, grp.task.workload["ops"]) for grp in groups}
    assert ("expand", "mean") in owners        # the SE pool reads expand's output
    assert ("se", "max_pool2d") in owners      # the pool runs in the layout of the SE scale (a join)
    assert ("cat", "concatenate") in owners    # a join not fused into a kernel: its own group
    assert ("cat", "mean") in owners           # global pool of the concat
    assert ("fc", "softmax") in owners         # after the dense (one layout, NC): a constant
    assert not any(grp.node == "add" for grp in groups)  # residual add fused into branch's kernel
    kernels = {grp.node for grp in groups if grp.task.workload["ops"] in ("conv2d", "dense")}
    assert kernels == {"stem", "expand", "se.fc1", "se.fc2", "branch", "fc"}
    for grp in groups:  # every group runs in a layout of its owner's candidates
        if grp.node is not None:
            assert grp.layout in {c.out_layout for c in g.candidates(grp.node)}


def _dense_block():
    """DenseNet's pattern: each layer concats its input with conv(relu(norm(input)))."""
    b = GraphBuilder("tiny_dense", seed=0, batch_size=1, image_size=8)
    x = b.conv(b.input, "stem", 16, kernel=3, padding=1)
    for i in range(3):
        y = b.conv(b.relu(b.norm(x, f"l{i}.norm"), f"l{i}.relu"), f"l{i}.conv", 16, kernel=3, padding=1)
        x = b.concat([x, y], f"l{i}.concat")
    x = b.flatten(b.global_avg_pool(b.relu(b.norm(x, "norm5"), "relu5"), "gap"), "flatten")
    b.dense(x, "fc", 10)
    return b.model(["fc"])


@pytest.mark.parametrize("join_layout", ["NCHW16c", "NCHW"])
def test_a_join_owns_its_concat_and_the_ops_after_it_in_every_layout(join_layout):
    """A concat of a conv with the conv's own (normalised) input is not fused into the conv,
    and a concat in plain layout is the join's, not a constant after a boundary (DenseNet's
    joins were once free in NCHW, so the solver put 54 of its 58 there)."""
    model = _dense_block()
    g = extract(model, max_candidates=4)
    [choice] = [c for c in probe_choices(g) if g.candidates("l0.concat")[c["l0.concat"]].out_layout
                == join_layout]
    groups = probe_groups(import_model(model), g, choice, x86.host_target())
    owner = {grp.label: (grp.node, grp.layout) for grp in groups}
    for i in range(3):
        [concat] = [label for label in owner if f"concatenate{i or ''}" in label.split("_")]
        assert owner[concat] == (f"l{i}.concat", join_layout)
    assert owner["mean"] == ("l2.concat", join_layout)
    assert not any(node is None for node, _ in owner.values())


def test_identical_winograd_convs_own_their_own_groups_and_joins():
    """DenseNet's 3x3 convs of a block are identical: as Winograd kernels (weights packed at
    legalization) they share one PrimFunc, yet each call and the concat after it belong to
    their own node (once all were taken for the first, and the other joins went unpriced)."""
    b = GraphBuilder("tiny_dense_wino", seed=0, batch_size=1, image_size=8)
    x = b.conv(b.input, "stem", 16, kernel=3, padding=1)
    for i in range(3):
        y = b.conv(b.relu(b.norm(x, f"l{i}.norm"), f"l{i}.relu"), f"l{i}.conv1", 16, kernel=1)
        x = b.concat([x, b.conv(y, f"l{i}.conv2", 16, kernel=3, padding=1)], f"l{i}.concat")
    b.dense(b.flatten(b.global_avg_pool(x, "gap"), "flatten"), "fc", 10)
    model = b.model(["fc"])
    g = extract(model)
    choice = dict(probe_choices(g)[0])
    for i in range(3):
        choice[f"l{i}.conv2"] = next(k for k, c in enumerate(g.candidates(f"l{i}.conv2"))
                                     if "winograd" in c.knobs and c.in_layout == c.out_layout == "NCHW16c")
    groups = probe_groups(import_model(model), g, choice, x86.host_target())
    kernels = [grp.node for grp in groups if grp.task.workload["ops"] == "conv2d"]
    assert [n for n in kernels if n.endswith("conv2")] == [f"l{i}.conv2" for i in range(3)]
    concats = [grp.node for grp in groups if "concatenate" in grp.label]
    assert concats == [f"l{i}.concat" for i in range(3)]


def test_an_op_on_the_graph_input_is_a_constant_of_the_model():
    """A per-channel scale + shift of the image before the first conv (input normalisation)
    reads only the graph input: a plain group of no node, in every probe."""
    b = GraphBuilder("tiny_prep", seed=0, batch_size=1, image_size=8)
    x = b.conv(b.affine(b.input, "prep"), "stem", 16, kernel=3, padding=1)
    b.dense(b.flatten(b.global_avg_pool(x, "gap"), "flatten"), "fc", 10)
    model = b.model(["fc"])
    g = extract(model, max_candidates=4)
    for choice in probe_choices(g):
        groups = probe_groups(import_model(model), g, choice, x86.host_target())
        [prep] = [grp for grp in groups if grp.node is None and "multiply" in grp.label]
        assert prep.layout == "NCHW"


def test_transforms_fused_with_other_ops_are_op_groups():
    """ShuffleNetV2's concat + channel shuffle, fused with a transform to plain NCHW, is priced;
    a transform with only views of it (reshape) is left to the edges."""
    from graphtune import models

    model = models.get("shufflenet_v2", image_size=32)
    g = extract(model, max_candidates=4)
    groups = probe_groups(import_model(model), g, probe_choices(g)[0], x86.host_target())
    shuffles = [grp for grp in groups if "concatenate" in grp.label and "transpose" in grp.label]
    assert len(shuffles) == 16  # one per ShuffleNet unit
    assert all(grp.node is not None and grp.layout in {c.out_layout for c in g.candidates(grp.node)}
               for grp in shuffles)
    assert not any(set(grp.label.split("_")) <= {"layout", "transform", "reshape", "NCHW", "NCHW16c"}
                   for grp in groups)
    assert not any("layout_transform" in grp.label for grp in groups)  # labels: what else they run


def test_op_group_task_key_is_its_code_and_it_builds_and_times(tmp_path):
    model = _model()
    g = extract(model, max_candidates=1)
    choice = probe_choices(g)[0]
    first = probe_groups(import_model(model), g, choice, x86.host_target())
    again = probe_groups(import_model(model), g, choice, x86.host_target())
    assert [grp.task.key for grp in first] == [grp.task.key for grp in again]
    task = next(grp.task for grp in first if grp.task.workload["ops"] == "mean")
    assert json.loads(task.key)["kind"] == Op.OP_GROUP == "segment"  # the records' kind, kept
    built = build_task(prim_func_of, task, x86.host_target(), str(tmp_path))
    assert built["args"] == task.workload["args"]
    [record] = measure([task], records=Records(), min_repeat_ms=1, progress=False)
    assert record.ok and record.median_ms > 0


def test_tune_charges_op_groups_per_layout_and_predicts_the_whole_model(tuned):
    result, records = tuned
    graph, ops = result.graph, result.ops
    free = [n for n in graph.nodes if graph.op(n) != "boundary"]
    for n in free:  # every candidate layout of every node and join has its op cost
        for c in graph.candidates(n):
            assert (n, c.out_layout) in ops.per_layout
    assert ops.per_layout[("expand", graph.candidates("expand")[0].out_layout)] > 0  # SE pool
    assert result.ops_ms > 0 and result.kernel_ms > 0
    assert result.predicted_ms <= result.solution.energy + 1e-9  # shared transforms run once
    assert result.predicted_ms == pytest.approx(result.kernel_ms + result.ops_ms + result.transform_ms)
    kinds = [json.loads(line)["kind"] for line in records.read_text().splitlines()]
    assert kinds.count(Op.OP_GROUP) == result.measured["ops"] > 0
    sol = result.config.solution
    assert sol["ops_ms"] == pytest.approx(result.ops_ms)
    assert sol["predicted_ms"] == pytest.approx(sol["kernel_ms"] + sol["ops_ms"] + sol["transform_ms"])
    assert len(sol["op_groups"]) == len(result.op_groups) > 0
    table = config_table(result.config)
    assert "op groups" in table and result.op_groups[0]["label"] in table
    assert "ops" in result.summary()


def test_op_costs_measures_only_the_groups_that_price_a_pair(tmp_path):
    """Each (node, layout) pair is priced by the first probe covering it and plain groups by the
    first probe: groups of later probes for pairs already covered are not measured at all."""
    mod, g, target = import_model(_model()), extract(_model(), max_candidates=4), x86.host_target()
    probes = probe_choices(g)
    assert len(probes) > 1
    want, everything, seen = set(), set(), set()
    for index, choice in enumerate(probes):
        new = {(n, g.candidates(n)[i].out_layout) for n, i in choice.items()} - seen
        seen |= new
        for grp in probe_groups(mod, g, choice, target):
            tasks = {t for t in (grp.task, grp.bare) if t is not None}
            everything |= tasks
            if (grp.node is None and index == 0) or (grp.node is not None and (grp.node, grp.layout) in new):
                want |= tasks
    asked: list = []

    def run(tasks):
        asked.extend(tasks)
        return measure(tasks, target, tmp_path / "ops.records.jsonl", progress=False, min_repeat_ms=2.0)

    costs = op_costs(mod, g, target, run)
    assert set(asked) == want and costs.tasks == len(want) < len(everything)
    assert {(n, c.out_layout) for n in g.nodes if g.op(n) != "boundary"
            for c in g.candidates(n)} <= set(costs.per_layout)


def test_a_fused_kernel_and_its_bare_twin_are_keyed_as_a_pair():
    """The twin's key covers its fused kernel and the other way round: a pair is in the records
    together or measured together, never a new fused kernel against a twin timed hours before."""
    g = extract(_model(), max_candidates=1)
    groups = [grp for grp in probe_groups(import_model(_model()), g, probe_choices(g)[0],
                                          x86.host_target()) if grp.bare is not None]
    assert len(groups) >= 3
    pairs = {(grp.task, grp.bare) for grp in groups}
    assert len(pairs) == len({t for t, _ in pairs}) == len({b for _, b in pairs})
    for grp in groups:
        alone = op_group_task(payload_func(grp.bare), grp.bare.workload["ops"])
        assert alone.payload == grp.bare.payload and alone != grp.bare


def test_silu_and_se_scale_keep_their_producers_layout_so_they_stay_fused(tuned):
    result = tuned[0]
    cand = {n: result.graph.candidates(n)[i] for n, i in result.solution.assignment.items()}
    assert cand["stem.act"].in_layout == cand["stem"].out_layout
    assert cand["se"].in_layout == cand["se.fc2"].out_layout


def test_solver_stays_exact_with_op_costs(tuned):
    graph = tuned[0].graph
    brute = solve(graph, method="brute")
    for method in ("auto", "dp", "cpsat"):
        assert solve(graph, method=method).energy == pytest.approx(brute.energy, abs=1e-9)


def test_rerun_from_records_measures_no_op_group_again(tuned):
    result, records = tuned
    lines = records.read_text().splitlines()
    again = graphtune.tune(_model(), records=records, **TINY)
    assert records.read_text().splitlines() == lines
    assert again.predicted_ms == pytest.approx(result.predicted_ms)
    assert again.ops.per_layout == pytest.approx(result.ops.per_layout)


def test_a_retune_from_complete_records_compiles_no_probe(tuned, tmp_path, monkeypatch):
    """The probe index beside the records lists each probe's groups: a re-tune whose groups are
    all recorded compiles no probe; a probe whose group lost its record is compiled again."""
    result, records = tuned
    compiled: list = []
    real = pricing.probe_groups
    monkeypatch.setattr(pricing, "probe_groups", lambda *args: compiled.append(1) or real(*args))
    copy = tmp_path / "tiny.records.jsonl"
    lines = records.read_text().splitlines()
    copy.write_text(records.read_text())
    shutil.copy(index_path_of(records), index_path_of(copy))
    again = graphtune.tune(_model(), records=copy, **TINY)
    assert compiled == [] and again.ops.per_layout == result.ops.per_layout
    dropped = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == Op.OP_GROUP)
    copy.write_text("\n".join(lines[:dropped] + lines[dropped + 1:]) + "\n")
    third = graphtune.tune(_model(), records=copy, **TINY)
    assert compiled and len(copy.read_text().splitlines()) == len(lines)  # one re-measured
    groups = [(g["node"], g["layout"], g["label"]) for g in result.ops.groups]
    assert [(g["node"], g["layout"], g["label"]) for g in third.ops.groups] == groups


def test_tuned_model_still_matches_onnxruntime(tuned):
    ort = pytest.importorskip("onnxruntime")
    model = _model()
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype("float32")
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"input": x})[0]
    got = graphtune.compile(model, tuned[0].config)(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
