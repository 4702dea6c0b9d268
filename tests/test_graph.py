"""LayoutGraph: building, lazy edge costs, pruning, validation, energy, JSON, fingerprint."""

import json
import math

import networkx as nx
import numpy as np
import pytest

from graphtune.errors import GraphError
from graphtune.graph import Candidate, LayoutGraph
from graphtune.synthetic import transform_ms

pytestmark = pytest.mark.unit


def conv(knobs_in, knobs_out, cost):
    return Candidate({"ic_bn": knobs_in, "oc_bn": knobs_out}, f"NCHW{knobs_in}c", f"NCHW{knobs_out}c", cost)


def small_graph():
    g = LayoutGraph()
    g.add_node("input", [Candidate({}, "NCHW", "NCHW", 0.0)], op="boundary")
    g.add_node("conv1", [conv(8, 8, 1.0), conv(8, 16, 0.8), conv(16, 16, 0.9)],
               workload={"data": [1, 16, 8, 8], "kernel": [16, 16, 3, 3]})
    g.add_node("conv2", [conv(8, 8, 0.5), conv(16, 16, 0.7)])
    g.add_node("output", [Candidate({}, "NCHW", "NCHW", 0.0)], op="boundary")
    g.add_edge("input", "conv1", shape=[1, 16, 8, 8])
    g.add_edge("conv1", "conv2", shape=[1, 16, 8, 8])
    g.add_edge("conv2", "output", shape=[1, 16, 8, 8])
    g.fill_edge_costs(transform_ms)
    return g


def test_costs_convenience_builds_candidates():
    g = LayoutGraph()
    g.add_node("a", costs=[1.0, 2.5])
    g.add_node("b", costs=[0.0], layouts=["NCHW8c"])
    cands = g.candidates("a")
    assert [c.cost for c in cands] == [1.0, 2.5]
    assert [c.knobs for c in cands] == [{}, {}]
    assert cands[0].in_layout != cands[1].in_layout
    assert g.candidates("b")[0].out_layout == "NCHW8c"
    assert len(g) == 2 and g.nodes == ["a", "b"] and "a" in g and "z" not in g


def test_callable_edge_cost_is_zero_on_equal_layouts_and_called_once_per_pair():
    calls = []

    def fn(shape, src, dst):
        calls.append((tuple(shape), src, dst))
        return 0.25

    g = LayoutGraph()
    g.add_node("a", costs=[1.0, 1.0, 1.0], layouts=["NCHW8c", "NCHW8c", "NCHW16c"])
    g.add_node("b", costs=[1.0, 1.0], layouts=["NCHW8c", "NCHW16c"])
    g.add_edge("a", "b", cost=fn, shape=[1, 16, 4, 4])
    matrix = g.edge_cost("a", "b")
    assert matrix.tolist() == [[0.0, 0.25], [0.0, 0.25], [0.25, 0.0]]
    assert sorted(calls) == [((1, 16, 4, 4), "NCHW16c", "NCHW8c"), ((1, 16, 4, 4), "NCHW8c", "NCHW16c")]
    g.edge_cost("a", "b")
    assert len(calls) == 2  # cached


def test_transform_pairs_lists_distinct_needed_transforms():
    g = LayoutGraph()
    g.add_node("a", costs=[1.0, 1.0], layouts=["NCHW", "NCHW8c"])
    g.add_node("b", costs=[1.0, 1.0], layouts=["NCHW8c", "NCHW8c"])
    g.add_node("c", costs=[1.0], layouts=["NCHW"])
    g.add_edge("a", "b", shape=[1, 8, 4, 4])
    g.add_edge("b", "c", shape=[1, 8, 2, 2])
    g.add_edge("a", "c", cost=[[0.0], [1.0]], shape=[1, 8, 4, 4])
    assert g.transform_pairs() == [((1, 8, 2, 2), "NCHW8c", "NCHW", "float32"),
                                   ((1, 8, 4, 4), "NCHW", "NCHW8c", "float32")]
    assert ((1, 8, 4, 4), "NCHW8c", "NCHW", "float32") in g.transform_pairs(missing_only=False)
    g.fill_edge_costs(lambda shape, src, dst: 1.0)
    assert g.transform_pairs() == []
    g.validate()


def test_a_transform_before_an_int8_candidate_moves_uint8():
    """The dtype of a transform is what the destination candidate reads (ops.input_dtype): uint8
    before a quantized node's int8 candidate, float32 before its fp32 one; a cost function that
    takes no dtype is refused there, naming the edge."""
    g = LayoutGraph()
    g.add_node("a", costs=[1.0], layouts=["NCHW8c"])
    g.add_node("q", [Candidate({}, "NCHW16c", "NCHW16c", 1.0),
                     Candidate({"precision": "float32"}, "NCHW16c", "NCHW16c", 1.0),
                     Candidate({}, "NCHW8c", "NCHW8c", 1.0)], op="conv2d_int8")
    g.add_edge("a", "q", shape=[1, 16, 4, 4])
    assert g.transform_pairs() == [((1, 16, 4, 4), "NCHW8c", "NCHW16c", "float32"),
                                   ((1, 16, 4, 4), "NCHW8c", "NCHW16c", "uint8")]
    g.fill_edge_costs(lambda shape, src, dst, dtype: {"uint8": 0.25, "float32": 1.0}[dtype])
    assert g.edge_cost("a", "q").tolist() == [[0.25, 1.0, 0.0]]
    with pytest.raises(GraphError, match="a -> q: the transform cost function takes .* 'q' reads uint8"):
        g.fill_edge_costs(lambda shape, src, dst: 1.0, overwrite=True)


def test_transform_pairs_needs_shapes():
    g = LayoutGraph()
    g.add_node("a", costs=[1.0])
    g.add_node("b", costs=[1.0])
    g.add_edge("a", "b")
    with pytest.raises(GraphError, match="a -> b has no shape"):
        g.transform_pairs()


def test_set_candidates_drops_explicit_matrices_and_recomputes_callables():
    g = small_graph()
    g.add_node("side", costs=[0.0])
    g.add_edge("conv2", "side", cost=[[0.0], [0.0]])
    before = g.edge_cost("conv1", "conv2").copy()
    dropped = g.set_candidates("conv2", [conv(16, 16, 0.4)])
    assert dropped == [("conv2", "side")]
    # callable edges are recomputed for the new candidates
    assert g.edge_cost("conv1", "conv2").shape == (3, 1) != before.shape
    with pytest.raises(GraphError, match="conv2 -> side has no cost matrix"):
        g.validate()
    g.set_edge_cost("conv2", "side", [[0.1]])
    g.validate()


def test_prune_keeps_matrices_consistent():
    g = LayoutGraph()
    g.add_node("a", costs=[1.0, 2.0, 3.0])
    g.add_node("b", costs=[1.0, 2.0])
    matrix = np.arange(6.0).reshape(3, 2)
    g.add_edge("a", "b", cost=matrix)
    before = g.energy({"a": 2, "b": 1})
    g.prune("a", [2, 0])
    g.prune("b", [1])
    assert g.edge_cost("a", "b").tolist() == [[5.0], [1.0]]
    assert g.energy({"a": 0, "b": 0}) == before
    with pytest.raises(GraphError, match="node 'a': prune indices"):
        g.prune("a", [5])


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda g: g.add_node("a", costs=[1.0]), "node 'a' already exists"),
        (lambda g: g.add_edge("a", "zzz"), "edge a -> zzz: unknown node 'zzz'"),
        (lambda g: g.add_edge("a", "a"), "edge a -> a: self-loops"),
        (lambda g: g.add_edge("a", "b", cost=np.zeros((3, 3))),
         r"edge a -> b: cost matrix has shape \(3, 3\), expected \(2, 1\)"),
        (lambda g: g.add_node("x", costs=[1.0], op="pool"), "node 'x': unknown op 'pool'"),
        (lambda g: g.add_node("x"), "node 'x': give exactly one of"),
        (lambda g: g.add_node("x", ["not a candidate"]), "node 'x': candidate 0 is a str"),
        (lambda g: g.add_node("", costs=[1.0]), "node names must be non-empty"),
        (lambda g: g.add_node("x", costs=["fast"]), "node 'x': Candidate cost must be a number"),
    ],
)
def test_building_errors_name_the_culprit(build, message):
    g = LayoutGraph()
    g.add_node("a", costs=[1.0, 2.0])
    g.add_node("b", costs=[1.0])
    with pytest.raises(GraphError, match=message):
        build(g)


def test_duplicate_edge_rejected():
    g = LayoutGraph()
    g.add_node("a", costs=[1.0])
    g.add_node("b", costs=[1.0])
    g.add_edge("a", "b", cost=[[0.0]])
    with pytest.raises(GraphError, match="edge a -> b already exists"):
        g.add_edge("a", "b", cost=[[0.0]])


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda g: g.add_node("c", costs=[float("nan")]), "node 'c': candidate 0 has cost nan"),
        (lambda g: g.add_node("c", costs=[1.0, -2.0]), "node 'c': candidate 1 has cost -2.0"),
        (lambda g: g.add_node("c", []), "node 'c' has no candidates"),
        (lambda g: g.add_node("c", costs=[0.0, 0.0], op="boundary"), "boundary node 'c' has 2 candidates"),
        (lambda g: g.add_edge("b", "a", cost=[[0.0, -1.0]]), r"edge b -> a: cost\[0, 1\] = -1.0"),
        (lambda g: g.add_edge("b", "a", cost=[[0.0, np.inf]]), r"edge b -> a: cost\[0, 1\] = inf"),
        (lambda g: g.add_edge("b", "a"), "edge b -> a has no cost matrix"),
        (lambda g: g.add_edge("b", "a", cost=lambda s, x, y: "slow"), "edge b -> a: transform cost #0 -> #1"),
        (lambda g: g.add_edge("b", "a", cost=lambda s, x, y: {}[x]), "could not be computed .KeyError"),
    ],
)
def test_validate_errors_name_the_culprit(build, message):
    g = LayoutGraph()
    g.add_node("a", costs=[1.0, 2.0])
    g.add_node("b", costs=[1.0])
    g.add_edge("a", "b", cost=[[0.0], [1.0]])
    g.validate()
    build(g)
    with pytest.raises(GraphError, match=message):
        g.validate()


def test_energy_sums_kernels_and_transforms_and_names_bad_nodes():
    g = small_graph()
    shape = [1, 16, 8, 8]
    expected = 0.8 + 0.7 + transform_ms(shape, "NCHW", "NCHW8c") + transform_ms(shape, "NCHW16c", "NCHW")
    assert g.energy({"input": 0, "conv1": 1, "conv2": 1, "output": 0}) == pytest.approx(expected)
    with pytest.raises(GraphError, match="no candidate for node 'output'"):
        g.energy({"input": 0, "conv1": 1, "conv2": 1})
    with pytest.raises(GraphError, match="node 'conv2': candidate index 5 out of range"):
        g.energy({"input": 0, "conv1": 1, "conv2": 5, "output": 0})
    with pytest.raises(GraphError, match="unknown node 'conv9'"):
        g.energy({"input": 0, "conv1": 1, "conv2": 1, "output": 0, "conv9": 0})


def test_json_round_trip_materialises_callables():
    g = small_graph()
    text = g.to_json()
    assert "NaN" not in text
    h = LayoutGraph.from_json(text)
    assert h.nodes == g.nodes and h.edges == g.edges
    assert h.fingerprint() == g.fingerprint()
    assert h.workload("conv1") == g.workload("conv1")
    assert h.op("input") == "boundary"
    for u, v in g.edges:
        np.testing.assert_array_equal(h.edge_cost(u, v), g.edge_cost(u, v))
    rng = np.random.default_rng(0)
    for _ in range(5):
        a = {n: int(rng.integers(len(g.candidates(n)))) for n in g.nodes}
        assert h.energy(a) == g.energy(a)


def test_json_keeps_unmeasured_costs_and_missing_matrices():
    g = LayoutGraph()
    g.add_node("a", [Candidate({"oc_bn": 8}, "NCHW", "NCHW8c")])
    g.add_node("b", costs=[1.0])
    g.add_edge("a", "b", shape=[1, 8, 2, 2])
    h = LayoutGraph.from_json(g.to_json())
    assert math.isnan(h.candidates("a")[0].cost)
    assert h.edge_shape("a", "b") == [1, 8, 2, 2]
    with pytest.raises(GraphError, match="no cost matrix"):
        h.edge_cost("a", "b")


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not valid JSON"),
        ('{"format": "other"}', "not a layout graph document"),
        ('{"format": "graphtune.layout_graph", "version": 7}', "version 7 unsupported"),
        ('{"format": "graphtune.layout_graph", "version": 1, "nodes": [{"name": "a"}], "edges": []}',
         "missing or bad field"),
    ],
)
def test_from_json_rejects_bad_documents(text, message):
    with pytest.raises(GraphError, match=message):
        LayoutGraph.from_json(text)


def test_fingerprint_tracks_structure_not_costs():
    g, h = small_graph(), small_graph()
    assert g.fingerprint() == h.fingerprint()
    h.prune("conv1", [0])
    h.set_edge_cost("input", "conv1", [[0.5]])
    assert g.fingerprint() == h.fingerprint()
    h.add_node("extra", costs=[0.0])
    assert g.fingerprint() != h.fingerprint()
    k = small_graph()
    k.nx.nodes["conv1"]["workload"]["data"] = [2, 16, 8, 8]
    assert k.fingerprint() != g.fingerprint()
    assert json.loads(json.dumps(g.fingerprint())) == g.fingerprint() and len(g.fingerprint()) == 64


def test_nx_view_is_the_underlying_digraph():
    g = small_graph()
    assert isinstance(g.nx, nx.DiGraph)
    assert list(nx.topological_sort(g.nx)) == ["input", "conv1", "conv2", "output"]
    assert g.nx.nodes["conv1"]["op"] == "conv2d"


def test_candidate_checks_and_serialises():
    c = Candidate({"oc_bn": 16}, "NCHW", "NCHW16c", 1.5)
    assert Candidate.from_dict(c.to_dict()) == c
    assert hash(c) == hash(Candidate({"oc_bn": 16}, "NCHW", "NCHW16c", 1.5))
    with pytest.raises(GraphError, match="knobs must be a dict"):
        Candidate([1, 2], "NCHW", "NCHW", 1.0)
    with pytest.raises(GraphError, match="in_layout must be a non-empty str"):
        Candidate({}, "", "NCHW", 1.0)
    with pytest.raises(GraphError, match="cost must be a number of ms"):
        Candidate({}, "NCHW", "NCHW", None)


def test_edge_with_two_tensors_charges_two_transforms():
    """A join reading x and mean(x) of one producer needs both moved: its edge costs two."""
    g = LayoutGraph()
    g.add_node("conv", [Candidate({}, "NCHW", "NCHW16c", 1.0)])
    g.add_node("mul", [Candidate({}, lay, lay, 0.0) for lay in ("NCHW16c", "NCHW8c")])
    g.add_edge("conv", "mul", shape=[1, 16, 4, 4],
               tensors={"x": [1, 16, 4, 4], "mean": [1, 16, 1, 1]})
    g.fill_edge_costs(lambda shape, src, dst: float(np.prod(shape)))
    assert g.edge_cost("conv", "mul").tolist() == [[0.0, 272.0]]
    assert sorted(g.transform_pairs(missing_only=False)) == [
        ((1, 16, 1, 1), "NCHW16c", "NCHW8c", "float32"), ((1, 16, 4, 4), "NCHW16c", "NCHW8c", "float32")]
    runs = g.transforms({"conv": 0, "mul": 1})
    assert sorted(t for _, t, _, _ in runs) == ["mean", "x"] and sum(runs.values()) == 272.0
