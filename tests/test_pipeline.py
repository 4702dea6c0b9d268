"""graphtune.tune end to end on a small model: costs filled, optimum, config, resume."""

import json
import shutil

import numpy as np
import pytest

import graphtune
from compile_check import assert_matches_ort, group_conv_model
from graphtune import models
from graphtune.pipeline import kernel_best_solution

TINY = dict(image_size=32, max_candidates=2, min_repeat_ms=1, repeat=1, progress=False,
            final_check=False)  # tests/test_final_check.py tests the final check


@pytest.fixture(scope="module")
def tuned(tmp_path_factory, resnet18_records):
    records = tmp_path_factory.mktemp("tune") / "resnet18.records.jsonl"
    shutil.copyfile(resnet18_records, records)
    return graphtune.tune("resnet18", records=records, **TINY), records


def test_tune_fills_every_cost_and_proves_the_optimum(tuned):
    result, _ = tuned
    result.graph.validate()  # every node and edge cost measured
    assert result.solution.optimal
    brute_free = graphtune.solve(result.graph, method="cpsat")
    assert result.solution.energy == pytest.approx(brute_free.energy, rel=1e-6)  # both optimal
    # the objective charges every consumer its own transform; the prediction counts the shared
    # ones the compiled model runs once (equal when no two consumers share a transform)
    assert result.predicted_ms <= result.solution.energy + 1e-9
    assert result.kernel_ms + result.ops_ms + result.transform_ms == pytest.approx(result.predicted_ms)
    assert set(result.phase_seconds) == {"extract", "kernels", "ops", "transforms", "solve"}


def test_pruning_keeps_one_candidate_per_layout_pair(tuned):
    graph = tuned[0].graph
    for node in graph.nodes:
        if graph.op(node) in ("conv2d", "dense", "depthwise_conv2d"):
            pairs = [(c.in_layout, c.out_layout) for c in graph.candidates(node)]
            assert len(pairs) == len(set(pairs))


def test_config_covers_every_layout_node_and_checks_against_the_model(tuned):
    result, _ = tuned
    model = models.get("resnet18", image_size=32)
    assert result.config.check(model) == []
    assert result.config.solution["optimal"] is True
    assert result.config.solution["predicted_ms"] == pytest.approx(result.predicted_ms)


def test_second_run_measures_nothing_new(tuned):
    result, records = tuned
    lines = records.read_text().splitlines()
    again = graphtune.tune("resnet18", records=records, **TINY)
    assert records.read_text().splitlines() == lines
    assert again.solution.energy == pytest.approx(result.solution.energy)
    assert {json.loads(line)["kind"] for line in lines} >= {"conv2d", "transform"}


def test_lazy_transforms_find_the_optimum_of_measuring_them_all(tuned, tmp_path):
    _, shared = tuned  # records without transforms (the run's shared records measured them all)
    records = tmp_path / "no-transforms.records.jsonl"
    records.write_text("".join(line + "\n" for line in shared.read_text().splitlines()
                               if json.loads(line)["kind"] != "transform"))
    result = graphtune.tune("resnet18", records=records, **TINY)  # transforms="lazy", the default
    assert result.graph.unmeasured(result.solution.assignment) == []
    assert result.graph.unmeasured(kernel_best_solution(result.graph).assignment) == []
    full = graphtune.tune("resnet18", records=records, transforms="all", **TINY)
    assert full.solution.energy == pytest.approx(result.solution.energy, rel=1e-9)
    assert full.predicted_ms == pytest.approx(result.predicted_ms, rel=1e-9)
    assert full.measured["transforms"] == len(full.graph.transform_pairs(missing_only=False))
    assert result.measured["transforms"] < full.measured["transforms"]
    assert all(full.graph.edge_bound(u, v) is None for u, v in full.graph.edges)


def test_kernel_best_is_never_better_than_the_graph_optimum(tuned):
    result, _ = tuned
    best = kernel_best_solution(result.graph)
    assert best.energy >= result.solution.energy - 1e-9
    assert best.lower_bound <= result.solution.energy + 1e-9
    for node, index in best.assignment.items():
        if result.graph.op(node) != "join":
            costs = [c.cost for c in result.graph.candidates(node)]
            assert costs[index] == min(costs)


def test_unknown_model_name_lists_the_zoo():
    with pytest.raises(graphtune.ModelError, match="valid names: .*resnet50"):
        graphtune.tune("resnet-50", records=None, progress=False)


def test_tuned_config_compiles_and_matches_onnxruntime(tuned):
    import onnxruntime as ort

    result, _ = tuned
    model = models.get("resnet18", image_size=32)
    compiled = graphtune.compile(model, result.config)
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype("float32")
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"input": x})[0]
    np.testing.assert_allclose(compiled(x), want, rtol=1e-4, atol=1e-4)


def test_group_convs_are_tuned_and_compiled(tmp_path):
    """A model with group convs: measured as group_conv2d nodes, configured, compiled right."""
    model = group_conv_model()
    records = tmp_path / "groups.records.jsonl"
    result = graphtune.tune(model, records=records, max_candidates=3, min_repeat_ms=1, repeat=1,
                            progress=False, final_check=False)
    result.graph.validate()
    assert [result.graph.op(n) for n in ("g1", "g2")] == ["group_conv2d", "group_conv2d"]
    assert {result.config.nodes[n].op for n in ("g1", "g2")} == {"group_conv2d"}
    kinds = {json.loads(line)["kind"] for line in records.read_text().splitlines()}
    assert "group_conv2d" in kinds
    assert_matches_ort(model, graphtune.compile(model, result.config))
