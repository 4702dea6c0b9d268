"""graphtune.lazy: measuring only the transforms solutions run finds the fully measured optimum."""

import itertools

import numpy as np
import pytest

from graphtune import synthetic
from graphtune.errors import GraphError
from graphtune.graph import Candidate, LayoutGraph
from graphtune.lazy import solve_measuring, transform_cells
from graphtune.solve import solve

pytestmark = pytest.mark.unit

LAYOUTS = ("NCHW8c", "NCHW16c", "NCHW32c")


def without_edge_costs(graph: LayoutGraph) -> LayoutGraph:
    """A copy of ``graph`` whose edges have no costs yet (as extraction leaves them)."""
    data = graph.to_dict()
    for edge in data["edges"]:
        edge["cost"] = None
    return LayoutGraph.from_dict(data)


def random_table(seed: int):
    """A transform cost function: random ms per (shape, src, dst), fixed by ``seed``."""
    cache = {}
    rng = np.random.default_rng(seed)

    def cost(shape, src, dst):
        key = (tuple(shape), src, dst)
        if key not in cache:
            cache[key] = float(rng.uniform(0.0, 0.5))
        return cache[key]

    return cost


def small_graph(seed: int, n: int = 6) -> LayoutGraph:
    """A chain with a skip edge and a two-tensor edge: every node has a candidate per layout pair."""
    rng = np.random.default_rng(seed)
    g = LayoutGraph()
    for i in range(n):
        pairs = list(itertools.product(LAYOUTS, LAYOUTS))[: 2 + i % 3]
        g.add_node(f"n{i}", [Candidate({"k": j}, a, b, float(rng.uniform(0.2, 1.0)))
                             for j, (a, b) in enumerate(pairs)])
    for i in range(1, n):
        g.add_edge(f"n{i - 1}", f"n{i}", shape=[1, 32, 8 * i, 8])
    g.add_edge("n0", f"n{n - 1}", tensors={"x": [1, 32, 4, 4], "y": [1, 32, 2, 2]})
    return g


def counting(cost):
    """``measure`` for solve_measuring from a cost function; records every pair asked for."""
    asked = []

    def measure(pairs):
        asked.extend(pairs)
        return [cost(list(shape), src, dst) for shape, src, dst, _ in pairs]

    return measure, asked


@pytest.mark.parametrize("seed", range(6))
def test_lazy_optimum_equals_brute_force_over_the_fully_measured_graph(seed):
    cost = random_table(seed)
    full = small_graph(seed)
    full.fill_edge_costs(cost)
    best = solve(full, method="brute")
    lazy = small_graph(seed)
    measure, asked = counting(cost)
    sol, costs, rounds = solve_measuring(lazy, measure, lambda g: solve(g, method="brute"))
    assert sol.energy == pytest.approx(best.energy, abs=1e-12)
    assert full.energy(sol.assignment) == pytest.approx(sol.energy, abs=1e-12)  # its cost is exact
    assert lazy.unmeasured(sol.assignment) == []
    assert len(asked) == len(set(asked)) == len(costs)  # nothing measured twice
    assert rounds >= 1


@pytest.mark.parametrize("name", ["resnet50", "inception_v3"])
def test_lazy_measures_a_fraction_of_the_transforms_of_cnn_shaped_graphs(name):
    full = synthetic.INSTANCES[name](n_candidates=6, seed=1)
    best = solve(full)
    lazy = without_edge_costs(full)
    total = len(lazy.transform_pairs())
    measure, asked = counting(synthetic.transform_ms)
    sol, _, _ = solve_measuring(lazy, measure, solve)
    assert sol.optimal and best.optimal
    assert sol.energy == pytest.approx(best.energy, rel=1e-9)
    assert full.energy(sol.assignment) == pytest.approx(sol.energy, rel=1e-9)
    assert 0 < len(asked) < total
    marked = sum(int(lazy.edge_bound(u, v).sum()) for u, v in lazy.edges
                 if lazy.edge_bound(u, v) is not None)
    assert marked > 0  # the entries left at their bound say so


def test_known_costs_are_used_and_never_measured_again():
    cost = random_table(3)
    first = small_graph(3)
    measure, asked = counting(cost)
    sol, costs, _ = solve_measuring(first, measure, solve)
    again_measure, again_asked = counting(cost)
    again, _, _ = solve_measuring(small_graph(3), again_measure, solve, known=costs)
    assert again.energy == pytest.approx(sol.energy)
    assert again_asked == []


def test_adjust_is_applied_once_and_kept_as_costs_come_in():
    cost = random_table(4)
    graph = small_graph(4)
    penalty = {}

    def adjust(g):  # forbid the first candidate pair of the n1 -> n2 edge
        matrix = np.zeros(g.edge_cost("n1", "n2").shape)
        matrix[0, 0] = 1e3
        penalty["m"] = matrix
        g.set_edge_cost("n1", "n2", g.edge_cost("n1", "n2") + matrix, bound=g.edge_bound("n1", "n2"))

    measure, _ = counting(cost)
    sol, costs, _ = solve_measuring(graph, measure, solve, adjust=adjust)
    cells = transform_cells(small_graph(4))[("n1", "n2")]
    measured = np.array([[sum(costs.get(p, 0.0) for p in cell) for cell in row] for row in cells])
    np.testing.assert_allclose(graph.edge_cost("n1", "n2"), measured + penalty["m"])
    assert (sol.assignment["n1"], sol.assignment["n2"]) != (0, 0)


def test_also_measures_the_transforms_of_other_assignments():
    cost = random_table(5)
    graph = small_graph(5)
    every_first = {n: 0 for n in graph.nodes}
    measure, _ = counting(cost)
    solve_measuring(graph, measure, solve, also=[lambda g: every_first])
    assert graph.unmeasured(every_first) == []


def test_measure_errors_propagate():
    def broken(pairs):
        raise RuntimeError("transform failed")

    with pytest.raises(RuntimeError, match="transform failed"):
        solve_measuring(small_graph(0), broken, solve)


def test_bound_masks_survive_json_and_pruning_and_are_dropped_with_new_candidates():
    g = LayoutGraph()
    g.add_node("a", costs=[1.0, 1.0, 1.0])
    g.add_node("b", costs=[1.0, 2.0])
    g.add_edge("a", "b")
    g.set_edge_cost("a", "b", [[0.0, 0.1], [0.2, 0.3], [0.4, 0.5]],
                    bound=[[False, True], [False, False], [True, False]])
    back = LayoutGraph.from_json(g.to_json())
    np.testing.assert_array_equal(back.edge_bound("a", "b"), g.edge_bound("a", "b"))
    assert back.unmeasured({"a": 2, "b": 0}) == [("a", "b")]
    g.prune("a", [2, 1])
    assert g.edge_bound("a", "b").tolist() == [[True, False], [False, False]]
    g.set_candidates("b", [Candidate({}, "#0", "#0", 1.0)])
    assert g.edge_bound("a", "b") is None
    with pytest.raises(GraphError, match="bound mask has shape"):
        back.set_edge_cost("a", "b", [[0.0, 0.0]] * 3, bound=[[True]])
