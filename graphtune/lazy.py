"""Solve a layout graph measuring only the layout transforms its solutions use.

The edges of an extracted graph need thousands of distinct transforms
``(shape, src, dst, dtype)`` (EfficientNet-B0 at 32 candidates per node: 4436), of
which an optimal assignment runs a few dozen. A transform costs at least 0 ms,
so the graph with every unmeasured transform at 0 is a relaxation: no
assignment costs less in it than in the true graph. :func:`solve_measuring`
solves the relaxation, measures the transforms the solution runs that are not
measured yet, raises their entries to the measured costs, and solves again,
until a solution runs only measured transforms. That solution's energy is its
true cost, and every other assignment costs at least its relaxed energy, which
is at least the relaxed optimum: with an exact solver the result is the
optimum of the fully measured graph (lazy constraint generation). Each round
measures at least one new transform, so it ends after at most as many
transforms as measuring all of them.

Entries still at their bound stay marked in the graph
(:meth:`~graphtune.graph.LayoutGraph.edge_bound`,
:meth:`~graphtune.graph.LayoutGraph.unmeasured`).

Examples
--------
>>> from graphtune.graph import LayoutGraph
>>> from graphtune.solve import solve
>>> g = LayoutGraph()
>>> g.add_node("a", costs=[1.0, 1.5], layouts=["NCHW8c", "NCHW16c"])
>>> g.add_node("b", costs=[1.0, 1.3], layouts=["NCHW16c", "NCHW8c"])
>>> g.add_edge("a", "b", shape=[1, 16, 8, 8])
>>> asked = []
>>> def measure(pairs):
...     asked.extend(pairs)
...     return [0.4 for _ in pairs]
>>> sol, costs, rounds = solve_measuring(g, measure, solve)  # 8c -> 16c first looks free
>>> sol.assignment, round(sol.energy, 6), rounds, asked
({'a': 0, 'b': 1}, 2.3, 2, [((1, 16, 8, 8), 'NCHW8c', 'NCHW16c', 'float32')])
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from .errors import GraphError
from .graph import LayoutGraph, _shapes
from .solve.solution import Solution

__all__ = ["Pair", "transform_cells", "solve_measuring"]

Pair = tuple[tuple[int, ...], str, str, str]
"""A layout transform: (logical NCHW shape, source layout, destination layout, dtype: what the
destination candidate reads, :func:`graphtune.ops.input_dtype`)."""

Edge = tuple[str, str]
Grid = list[list[tuple[Pair, ...]]]  # per (src candidate, dst candidate): the transforms it runs


def transform_cells(graph: LayoutGraph) -> dict[Edge, Grid]:
    """The transforms behind every entry of the edges that have no cost yet.

    ``cells[u, v][s][r]`` lists one transform per tensor the edge carries from
    candidate ``s`` of ``u`` to candidate ``r`` of ``v``; empty when their
    layouts agree. Edges with a matrix or a cost callable are left out.

    Examples
    --------
    >>> g = LayoutGraph()
    >>> g.add_node("a", costs=[1.0, 1.0], layouts=["NCHW", "NCHW8c"])
    >>> g.add_node("b", costs=[1.0], layouts=["NCHW8c"])
    >>> g.add_edge("a", "b", shape=[1, 8, 4, 4])
    >>> transform_cells(g)[("a", "b")]
    [[(((1, 8, 4, 4), 'NCHW', 'NCHW8c', 'float32'),)], [()]]
    """
    cells = {}
    for u, v, data in graph.nx.edges(data=True):
        if data["cost"] is not None or data["fn"] is not None:
            continue
        shapes = [tuple(int(d) for d in shape) for shape in _shapes(data) if shape is not None]
        if not shapes:
            raise GraphError(f"edge {u} -> {v} has no shape; pass shape= or tensors= to add_edge")
        reads = graph.reads(v)
        cells[u, v] = [[tuple((shape, a.out_layout, b, dtype) for shape in shapes)
                        if a.out_layout != b else ()
                        for b, dtype in reads]
                       for a in graph.candidates(u)]
    return cells


def _set_costs(graph: LayoutGraph, cells: Mapping[Edge, Grid], costs: Mapping[Pair, float],
               edges: Iterable[Edge], base: Mapping[Edge, np.ndarray]) -> None:
    """Set ``edges``' entries to the sum of their measured transforms (unmeasured ones count 0
    and mark the entry as a bound) plus ``base`` (what else was added to the entries, e.g.
    penalties; none when absent)."""
    for edge in edges:
        grid = cells[edge]
        bound = np.array([[any(p not in costs for p in cell) for cell in row] for row in grid])
        graph.set_edge_cost(*edge, _measured_part(grid, costs) + base.get(edge, 0.0), bound=bound)


def _measured_part(grid: Grid, costs: Mapping[Pair, float]) -> np.ndarray:
    """Entries of an edge's ``grid``: the sum of the measured costs of each entry's transforms."""
    return np.array([[sum(costs.get(p, 0.0) for p in cell) for cell in row] for row in grid],
                    dtype=float)


def _pending(graph: LayoutGraph, cells: Mapping[Edge, Grid], costs: Mapping[Pair, float],
             assignment: Mapping[str, int]) -> list[Pair]:
    """The unmeasured transforms ``assignment`` runs, in a stable order."""
    pending = {p for u, v in graph.unmeasured(assignment) if (u, v) in cells
               for p in cells[u, v][assignment[u]][assignment[v]] if p not in costs}
    return sorted(pending)


def solve_measuring(graph: LayoutGraph, measure: Callable[[Sequence[Pair]], Sequence[float]],
                    solve: Callable[[LayoutGraph], Solution], *,
                    known: Mapping[Pair, float] | None = None,
                    adjust: Callable[[LayoutGraph], object] | None = None,
                    also: Sequence[Callable[[LayoutGraph], Mapping[str, int]]] = ()
                    ) -> tuple[Solution, dict[Pair, float], int]:
    """Solve ``graph``, measuring only the transforms of the edges without costs that solutions run.

    Parameters
    ----------
    graph : LayoutGraph
        Edges without a matrix or callable get their transform costs here (in place);
        the rest are used as they are.
    measure : callable
        ``measure(pairs) -> ms`` for a list of :data:`Pair`, one time per pair, in order.
        Errors propagate.
    solve : callable
        ``solve(graph) -> Solution``, e.g. :func:`graphtune.solve` with its method and limits.
    known : mapping, optional
        Transforms already measured (e.g. found in a records file): used, never re-measured.
    adjust : callable, optional
        Called once on the graph after the entries are first set (to their bounds),
        e.g. :func:`graphtune.opgroups.pricing.tie_fused_joins`; what it adds to the
        entries is kept as measured costs come in.
    also : sequence of callable
        ``f(graph) -> assignment``, called once the solution is final: the transforms
        those assignments run are measured too (e.g. the kernel-best assignment, which
        benchmarks compile beside the solution).

    Returns
    -------
    solution : Solution
        The last solve's; it runs no unmeasured transform.
    costs : dict
        Every transform measured or known that the graph's edges use, to ms.
    rounds : int
        Solves run.

    Examples
    --------
    See the module docstring.
    """
    cells = transform_cells(graph)
    where: dict[Pair, set[Edge]] = {}  # each transform -> the edges that run it somewhere
    for edge, grid in cells.items():
        for p in {p for row in grid for cell in row for p in cell}:
            where.setdefault(p, set()).add(edge)
    costs = {p: ms for p, ms in (known or {}).items() if p in where}
    base: dict[Edge, np.ndarray] = {}
    _set_costs(graph, cells, costs, cells, base)
    if adjust is not None:
        adjust(graph)
        base = {edge: graph.edge_cost(*edge) - _measured_part(cells[edge], costs) for edge in cells}

    def add(pairs: list[Pair]) -> None:
        costs.update(zip(pairs, (float(ms) for ms in measure(pairs))))
        _set_costs(graph, cells, costs, {e for p in pairs for e in where[p]}, base)

    rounds = 0
    while True:
        solution = solve(graph)
        rounds += 1
        pending = _pending(graph, cells, costs, solution.assignment)
        if not pending:
            break
        add(pending)
    for assign in also:
        pending = _pending(graph, cells, costs, assign(graph))
        if pending:
            add(pending)
    return solution, costs, rounds

