"""Solvers: every method cross-checked against brute force, bounds, refusals and error messages."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphtune import synthetic
from graphtune.errors import GraphError, SolverError
from graphtune.graph import LayoutGraph
from graphtune.solve import METHODS, solve
from graphtune.solve.dominance import eliminate_dominated
from graphtune.solve.pbqp import reduce_ri, reduce_rii, reduce_rn
from graphtune.solve.problem import Problem

pytestmark = pytest.mark.unit

TOL = 1e-7
EXACT = ["auto", "dp", "pbqp", "cpsat", "lp"]
# auto forced past dp: LP branch and bound, and with a single LP allowed, CP-SAT
FORCED = [{"max_table": 1}, {"max_table": 1, "max_lps": 1}]


def random_graph(seed: int) -> LayoutGraph:
    """Small random instance: cycles, multi-input joins, parallel/opposite edges, isolated parts, ties."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 8))
    max_states = int(rng.integers(1, 4))
    integer_costs = rng.random() < 0.5  # many ties
    layouts = ["NCHW", "NCHW8c", "NCHW16c"]
    g = LayoutGraph()
    for i in range(n):
        k = int(rng.integers(1, max_states + 1))
        costs = rng.integers(0, 4, k).astype(float) if integer_costs else rng.uniform(0, 3, k)
        lay = [layouts[int(j)] for j in rng.integers(0, 3, k)]
        op = "join" if i % 3 == 2 else "conv2d"
        g.add_node(f"n{i}", costs=costs.tolist(), layouts=lay, op=op)
    pairs = [(u, v) for u in range(n) for v in range(n) if u != v]
    rng.shuffle(pairs)
    for u, v in pairs[: int(rng.integers(0, min(len(pairs), 2 * n) + 1))]:
        a, b = f"n{u}", f"n{v}"
        if rng.random() < 0.5:
            g.add_edge(a, b, cost=lambda shape, s, d: 1.0 + len(s) - 0.1 * len(d), shape=[1, 16, 4, 4])
        else:
            shape = (len(g.candidates(a)), len(g.candidates(b)))
            cost = rng.integers(0, 4, shape).astype(float) if integer_costs else rng.uniform(0, 3, shape)
            g.add_edge(a, b, cost=cost)
    return g


def assert_consistent(graph: LayoutGraph, method: str, best: float, **limits) -> None:
    sol = solve(graph, method=method, **limits)
    assert sol.method == method
    assert set(sol.assignment) == set(graph.nodes)
    assert sol.energy == graph.energy(sol.assignment)
    assert sol.energy >= best - TOL
    assert sol.lower_bound <= best + TOL, f"{method}: lower bound {sol.lower_bound} > optimum {best}"
    assert sol.lower_bound <= sol.energy
    if sol.optimal:
        assert sol.energy == pytest.approx(best, rel=1e-9, abs=TOL), f"{method} claims optimal"
        assert sol.gap == 0.0


@pytest.mark.parametrize("seed", range(60))
def test_methods_agree_with_brute_force(seed):
    graph = random_graph(seed)
    best = solve(graph, method="brute").energy
    for method in EXACT:
        assert_consistent(graph, method, best)
    for limits in FORCED:
        assert_consistent(graph, "auto", best, **limits)
    assert solve(graph, method="auto").optimal
    assert solve(graph, method="dp").optimal


def dense_graph(seed: int) -> LayoutGraph:
    """Small, nearly complete graph: reductions leave a core for dp / LP / CP-SAT."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 8))
    g = LayoutGraph()
    for i in range(n):
        g.add_node(f"n{i}", costs=rng.uniform(0, 1, int(rng.integers(2, 4))).tolist())
    for i in range(n):
        for j in range(i + 1, n):
            if rng.random() < 0.8:
                shape = (len(g.candidates(f"n{i}")), len(g.candidates(f"n{j}")))
                ties = rng.random() < 0.5
                g.add_edge(f"n{i}", f"n{j}",
                           cost=rng.integers(0, 3, shape).astype(float) if ties else rng.uniform(0, 1, shape))
    return g


def test_auto_past_dp_agrees_with_brute_on_every_path():
    seen = set()
    for seed in range(60):
        graph = dense_graph(seed)
        best = solve(graph, method="brute").energy
        for limits in FORCED:
            assert_consistent(graph, "auto", best, **limits)
            seen.add(solve(graph, method="auto", **limits).stats["solver"])
    assert {"lp", "lp-branch-and-bound", "cpsat"} <= seen


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 6))
    g = LayoutGraph()
    for i in range(n):
        k = draw(st.integers(1, 3))
        g.add_node(f"v{i}", costs=draw(st.lists(st.integers(0, 5), min_size=k, max_size=k)))
    pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))
    edges = draw(st.lists(pairs, max_size=2 * n, unique=True))
    for u, v in edges:
        if u == v:
            continue
        shape = (len(g.candidates(f"v{u}")), len(g.candidates(f"v{v}")))
        flat = draw(st.lists(st.floats(0, 10, allow_nan=False), min_size=shape[0] * shape[1],
                             max_size=shape[0] * shape[1]))
        g.add_edge(f"v{u}", f"v{v}", cost=np.array(flat).reshape(shape))
    return g


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_property_exact_methods_match_brute(graph):
    best = solve(graph, method="brute").energy
    for method in EXACT:
        assert_consistent(graph, method, best)
    for limits in FORCED:
        assert_consistent(graph, "auto", best, **limits)


@settings(max_examples=40, deadline=None)
@given(graphs())
def test_property_dominance_keeps_the_optimum(graph):
    problem = Problem.from_graph(graph)
    smaller, kept = eliminate_dominated(problem)
    assert all(len(k) >= 1 for k in kept)
    best = solve(graph, method="brute").energy
    from graphtune.solve.brute import solve_brute
    reduced = solve_brute(smaller)
    labels = [int(kept[i][s]) for i, s in enumerate(reduced.labels)]
    assert problem.energy(labels) == pytest.approx(best, abs=TOL)


def test_empty_graph_has_zero_energy():
    for method in METHODS:
        sol = solve(LayoutGraph(), method=method)
        assert sol.assignment == {} and sol.energy == 0.0 and sol.optimal


def test_single_node_and_one_candidate_everywhere():
    g = LayoutGraph()
    g.add_node("only", costs=[3.0, 1.0, 2.0])
    for method in METHODS:
        sol = solve(g, method=method)
        assert sol.assignment == {"only": 1} and sol.optimal and sol.energy == 1.0
    h = LayoutGraph()
    for i in range(4):
        h.add_node(f"n{i}", costs=[float(i)])
    for i in range(3):
        h.add_edge(f"n{i}", f"n{i + 1}", cost=[[0.5]])
    h.add_edge("n3", "n0", cost=[[0.25]])
    for method in METHODS:
        sol = solve(h, method=method)
        assert sol.energy == pytest.approx(6.0 + 1.75) and sol.optimal


def test_disconnected_parts_and_opposite_edges_are_summed():
    g = LayoutGraph()
    for name in "abcd":
        g.add_node(name, costs=[0.0, 0.0])
    g.add_edge("a", "b", cost=[[5.0, 0.0], [0.0, 5.0]])
    g.add_edge("b", "a", cost=[[0.0, 5.0], [0.0, 0.0]])  # together: only a=1, b=... patterns
    g.add_edge("c", "d", cost=[[1.0, 2.0], [3.0, 0.5]])
    best = solve(g, method="brute").energy
    assert best == pytest.approx(0.5)
    for method in EXACT:
        assert_consistent(g, method, best)


@pytest.mark.parametrize("seed", range(10))
def test_polish_never_worsens(seed):
    from graphtune.solve.local import polish

    problem = Problem.from_graph(synthetic.random_graph(30, 45, 4, seed=seed))
    rng = np.random.default_rng(seed)
    start = [int(rng.integers(len(u))) for u in problem.unary]
    end = polish(problem, start)
    assert problem.energy(end) <= problem.energy(start)
    assert polish(problem, end) == end  # a fixed point


def test_reductions_are_exact_on_their_own():
    rng = np.random.default_rng(3)
    cx, cxy, cxz = rng.uniform(0, 1, 4), rng.uniform(0, 1, (4, 3)), rng.uniform(0, 1, (4, 5))
    delta, choice = reduce_ri(cx, cxy)
    for r in range(3):
        assert delta[r] == pytest.approx(min(cx + cxy[:, r]))
        assert cx[choice[r]] + cxy[choice[r], r] == pytest.approx(delta[r])
    delta2, choice2 = reduce_rii(cx, cxy, cxz)
    for r in range(3):
        for t in range(5):
            assert delta2[r, t] == pytest.approx(min(cx + cxy[:, r] + cxz[:, t]))
            assert choice2[r, t] == int(np.argmin(cx + cxy[:, r] + cxz[:, t]))
    assert reduce_rn(np.array([0.0, 1.0]), [(np.array([[9.0, 9.0], [0.0, 0.0]]), np.zeros(2))]) == 1


def frustrated(n_nodes: int = 5, n_states: int = 3) -> LayoutGraph:
    """Complete graph with 'different states preferred' costs: RN needed, LP not tight."""
    g = LayoutGraph()
    rng = np.random.default_rng(1)
    for i in range(n_nodes):
        g.add_node(f"k{i}", costs=rng.uniform(0, 0.1, n_states).tolist())
    for i in range(n_nodes):
        for j in range(i + 1, n_nodes):
            g.add_edge(f"k{i}", f"k{j}", cost=np.eye(n_states) + rng.uniform(0, 0.05, (n_states, n_states)))
    return g


def test_pbqp_reports_rn_and_a_valid_bound_when_heuristic():
    g = frustrated()
    best = solve(g, method="brute").energy
    sol = solve(g, method="pbqp")
    assert sol.stats["rn_steps"] > 0 and not sol.optimal
    assert sol.lower_bound <= best <= sol.energy


def test_lp_gives_bound_when_not_tight_and_auto_branches_or_falls_back_to_cpsat():
    g = frustrated()
    best = solve(g, method="brute").energy
    lp = solve(g, method="lp")
    assert not lp.optimal and lp.stats["lp_fractional"] > 0
    assert lp.lower_bound < best
    branched = solve(g, method="auto", max_table=10)
    assert branched.stats["solver"] == "lp-branch-and-bound" and branched.optimal
    assert branched.stats["bnb_lps"] > 1
    assert branched.energy == pytest.approx(best, abs=TOL)
    auto = solve(g, method="auto", max_table=10, max_lps=1)
    assert auto.stats["solver"] == "cpsat" and auto.optimal
    assert auto.energy == pytest.approx(best, abs=TOL)
    assert auto.stats["cpsat_status"] == "OPTIMAL" and auto.stats["scaling_bound"] < 1e-9


def test_branch_and_bound_limits_return_incumbent_and_open_bound():
    from graphtune.solve.branch import solve_branch_and_bound

    problem = Problem.from_graph(frustrated(n_nodes=6))
    best = solve(frustrated(n_nodes=6), method="brute").energy
    out = solve_branch_and_bound(problem, max_lps=1)
    assert not out.optimal and out.stats["bnb_open"] == 2
    assert out.lower_bound <= best <= problem.energy(out.labels)
    full = solve_branch_and_bound(problem)
    assert full.optimal and problem.energy(full.labels) == pytest.approx(best, abs=TOL)


def test_cpsat_time_limit_returns_best_found_and_bound():
    g = synthetic.random_graph(40, 120, 4, seed=2)
    sol = solve(g, method="cpsat", time_limit=0.05)
    assert sol.lower_bound <= sol.energy
    # UNKNOWN: no solution of its own in time; the PBQP warm start is returned with a bound
    assert sol.stats["cpsat_status"] in ("OPTIMAL", "FEASIBLE", "UNKNOWN")
    assert sol.energy <= solve(g, method="pbqp").energy + TOL
    if not sol.optimal:
        assert sol.gap > 0


def test_cpsat_without_max_lp_still_correct_on_small_instances():
    g = random_graph(11)
    best = solve(g, method="brute").energy
    sol = solve(g, method="cpsat", max_lp=False, linearization_level=2)
    assert sol.optimal and sol.energy == pytest.approx(best, abs=TOL)


def test_dp_refuses_with_table_size():
    g = frustrated(n_nodes=8, n_states=8)
    with pytest.raises(SolverError,
                       match=r"dp: eliminating node 'k\d' needs a table of .* entries .*max_table=1000"):
        solve(g, method="dp", max_table=1000)
    sol = solve(g, method="dp", max_table=10**8)
    assert sol.optimal and sol.stats["treewidth"] == 7


def test_brute_refuses_large_instances():
    g = synthetic.random_graph(30, 30, 4, seed=0)
    with pytest.raises(SolverError, match="brute: .* assignments exceed max_assignments=1000"):
        solve(g, method="brute", max_assignments=1000)


def test_bad_method_and_limits_are_value_errors_listing_choices():
    g = LayoutGraph()
    g.add_node("a", costs=[1.0])
    valid = "valid methods are: auto, brute, cpsat, dp, lp, pbqp"
    with pytest.raises(ValueError, match=f"unknown solve method 'fast'; {valid}"):
        solve(g, method="fast")
    with pytest.raises(ValueError, match="solve method 'dp' does not take max_assignments; "
                                         "its limits are: max_table"):
        solve(g, method="dp", max_assignments=3)


def test_invalid_graph_is_rejected_before_solving():
    g = LayoutGraph()
    g.add_node("a", costs=[float("nan")])
    with pytest.raises(GraphError, match="node 'a'"):
        solve(g)


@pytest.mark.parametrize("name", ["resnet50", "inception_v3", "densenet201", "ssd_resnet50_512"])
def test_cnn_shaped_graphs_reduce_completely(name):
    g = synthetic.INSTANCES[name](8, seed=1)
    sol = solve(g)
    assert sol.optimal and sol.stats["solver"] == "reductions"
    assert sol.stats["reductions"]["RN"] == 0
    assert solve(g, method="pbqp").energy == pytest.approx(sol.energy)
    assert solve(g, method="dp").energy == pytest.approx(sol.energy)


def test_synthetic_instances_are_seeded_and_layout_like():
    a, b, c = (synthetic.resnet50(8, seed=s) for s in (0, 0, 1))
    assert a.to_json() == b.to_json() != c.to_json()
    assert a.fingerprint() == c.fingerprint()  # same structure, other costs
    assert synthetic.transform_ms([1, 64, 56, 56], "NCHW8c", "NCHW8c") == 0.0
    small = synthetic.transform_ms([1, 64, 28, 28], "NCHW8c", "NCHW16c")
    assert 0 < small < synthetic.transform_ms([1, 64, 56, 56], "NCHW8c", "NCHW16c")
    for name in ("conv1", "layer1.0.add", "output"):
        for u, v in a.nx.in_edges(name):
            matrix = a.edge_cost(u, v)
            for s, cu in enumerate(a.candidates(u)):
                for r, cv in enumerate(a.candidates(v)):
                    assert (matrix[s, r] == 0) == (cu.out_layout == cv.in_layout)
    g32 = synthetic.inception_v3(32, seed=0)
    assert max(len(g32.candidates(n)) for n in g32.nodes) == 32
    with pytest.raises(ValueError, match="concat must be"):
        synthetic.densenet201(8, concat="sometimes")


def test_dense_concat_graph_needs_more_than_reductions_and_is_still_proven():
    g = synthetic.densenet201(8, seed=0, concat="all_pairs", blocks=(6, 8), image_size=64)
    auto = solve(g)
    exact = solve(g, method="cpsat")
    assert auto.optimal and exact.optimal
    assert auto.stats["remainder_nodes"] > 0
    assert auto.energy == pytest.approx(exact.energy, rel=1e-9)
    with pytest.raises(SolverError, match="needs a table of"):
        solve(g, method="dp")  # without auto's dominance + reductions the tables are too large
