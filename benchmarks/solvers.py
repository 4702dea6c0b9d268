"""Benchmark graphtune's solvers (and toulbar2 as a peer) on CNN-shaped layout graphs.

Usage::

    python benchmarks/solvers.py [--quick] [--json PATH] [--time-limit S] [--graphs out]

Instances (``graphtune.synthetic``): ResNet-50, Inception-v3, DenseNet-201 with
incremental concat and with all-pairs concat, SSD-ResNet50-512, each with 8 and
32 candidates per conv node, plus a random graph (200 nodes, 300 edges, 8
states). Every graphtune method and, when importable, ``pytoulbar2`` solve the
same instance in the same run. Prints a table; ``--json`` writes one record
per (instance, method) with ``instance, nodes, edges, candidates, treewidth,
method, energy, lower_bound, optimal, seconds`` plus ``above_best`` (energy
relative to the best energy any method found on that instance in this run) and
``error`` (a refusal message, e.g. dp above its table cap). ``treewidth`` is the
min-fill upper bound. ``--quick`` runs seed 0 with a 5 s limit per solve.
``--graphs DIR`` adds the zoo layout graphs with measured costs that
``benchmarks/e2e.py`` saved there (``measured/MODEL``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from graphtune import synthetic
from graphtune.errors import SolverError
from graphtune.graph import LayoutGraph
from graphtune.solve import solve
from graphtune.solve.dp import min_fill_order
from graphtune.solve.problem import Problem

METHODS = ("auto", "dp", "pbqp", "lp", "cpsat")


def instances(seeds: list[int]) -> list[tuple[str, LayoutGraph]]:
    """(name, graph) pairs: every CNN shape x {8, 32} candidates, and the random graph."""
    out = []
    for seed in seeds:
        for name, make in synthetic.INSTANCES.items():
            for k in (8, 32):
                out.append((f"{name}/k{k}/s{seed}", make(k, seed=seed)))
        out.append((f"random200x300/k8/s{seed}", synthetic.random_graph(200, 300, 8, seed=seed)))
    return out


def run_toulbar2(graph: LayoutGraph, time_limit: float) -> dict:
    """Solve with pytoulbar2 (costs at 1e-6 ms resolution); energy re-evaluated in floats.

    ``lower_bound`` is toulbar2's dual bound at its own 1e-6 resolution.
    """
    import pytoulbar2

    start = time.perf_counter()
    problem = Problem.from_graph(graph)
    cfn = pytoulbar2.CFN(resolution=6)
    for i, u in enumerate(problem.unary):
        cfn.AddVariable(f"v{i}", range(len(u)))
    for i, u in enumerate(problem.unary):
        cfn.AddFunction([i], u.tolist())
    for (i, j), m in problem.pairs.items():
        cfn.AddFunction([i, j], m.ravel().tolist())
    result = cfn.Solve(timeLimit=max(1, int(time_limit)))
    seconds = time.perf_counter() - start
    if not result:
        return {"energy": None, "lower_bound": None, "optimal": False, "seconds": seconds,
                "error": "no solution"}
    assignment = {name: int(s) for name, s in zip(problem.names, result[0])}
    energy = graph.energy(assignment)
    bound = float(cfn.GetDDualBound())
    optimal = bound >= float(result[1]) - 1e-6  # proven at toulbar2's 1e-6 ms resolution
    return {"energy": energy, "lower_bound": bound, "optimal": optimal, "seconds": seconds, "error": None}


def run_method(graph: LayoutGraph, method: str, time_limit: float) -> dict:
    """One graphtune method; refusals are recorded, not raised."""
    start = time.perf_counter()
    try:
        limit = time_limit if method in ("auto", "cpsat", "lp") else None
        sol = solve(graph, method=method, time_limit=limit)
    except SolverError as err:
        return {"energy": None, "lower_bound": None, "optimal": False,
                "seconds": time.perf_counter() - start, "error": str(err).split(";")[0]}
    return {"energy": sol.energy, "lower_bound": sol.lower_bound, "optimal": sol.optimal,
            "seconds": sol.seconds, "error": None}


def describe(graph: LayoutGraph) -> dict:
    problem = Problem.from_graph(graph)
    plan = min_fill_order(problem.adjacency(), problem.domain_sizes())
    return {"nodes": len(graph), "edges": len(graph.edges),
            "candidates": max(len(graph.candidates(n)) for n in graph.nodes), "treewidth": plan.width}


def measured_graphs(folder: Path) -> list[tuple[str, LayoutGraph]]:
    """(name, graph) pairs for the measured zoo layout graphs ``benchmarks/e2e.py`` saved."""
    return [(f"measured/{path.name[:-len('.graph.json')]}", LayoutGraph.from_json(path.read_text()))
            for path in sorted(folder.glob("*.graph.json"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="seed 0 only (< 2 min)")
    parser.add_argument("--json", type=Path, help="write the records as a JSON list")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="seconds per solve (default 5 quick, 60 full)")
    parser.add_argument("--graphs", type=Path, default=None,
                        help="also solve the measured zoo graphs in this folder (benchmarks/e2e.py --out)")
    args = parser.parse_args(argv)
    time_limit = args.time_limit or (5.0 if args.quick else 60.0)
    try:
        import pytoulbar2  # noqa: F401

        peers = ["toulbar2"]
    except ImportError:
        peers = []
        print("pytoulbar2 not importable: running without the toulbar2 peer", file=sys.stderr)

    records = []
    header = f"{'instance':<30} {'n':>4} {'m':>5} {'k':>3} {'tw':>3} {'method':<9} {'energy':>10} " \
             f"{'lower_bound':>11} {'+best%':>7} {'opt':>4} {'seconds':>8}"
    print(header)
    print("-" * len(header))
    cases = instances([0] if args.quick else [0, 1, 2])
    if args.graphs is not None:
        cases += measured_graphs(args.graphs)
    for name, graph in cases:
        info = describe(graph)
        rows = []
        for method in [*METHODS, *peers]:
            res = (run_toulbar2(graph, time_limit) if method == "toulbar2"
                   else run_method(graph, method, time_limit))
            rows.append({"instance": name, **info, "method": method, **res})
        best = min((r["energy"] for r in rows if r["energy"] is not None), default=None)
        for r in rows:
            r["above_best"] = None if r["energy"] is None else (r["energy"] - best) / max(best, 1e-12)
            if r["error"]:
                text = f"refused: {r['error']}"[:60]
                print(f"{name:<30} {r['nodes']:>4} {r['edges']:>5} {r['candidates']:>3} {r['treewidth']:>3} "
                      f"{r['method']:<9} {text:>42} {r['seconds']:>8.3f}")
            else:
                print(f"{name:<30} {r['nodes']:>4} {r['edges']:>5} {r['candidates']:>3} {r['treewidth']:>3} "
                      f"{r['method']:<9} {r['energy']:>10.4f} {r['lower_bound']:>11.4f} "
                      f"{100 * r['above_best']:>7.3f} "
                      f"{'yes' if r['optimal'] else 'no':>4} {r['seconds']:>8.3f}")
            records.append(r)
        sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))
        print(f"wrote {len(records)} records to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
