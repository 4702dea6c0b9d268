"""Exact dynamic programming: variable elimination along a min-fill order.

On a chain or tree the min-fill order eliminates leaves first (fill 0), which
is the classic leaf-to-root tree DP with tables of ``|D_leaf| x |D_parent|``;
on a general graph it is bucket elimination over the tree decomposition the
order induces, with tables as large as the product of the domain sizes of a
node and its neighbours at elimination time. Before computing anything the
order is planned symbolically and the method refuses (``SolverError`` with
the table size it would need) when the largest table exceeds ``max_table``.

Examples
--------
>>> import numpy as np
>>> from graphtune.solve.problem import Problem
>>> ring = {(0, 1): 1 - np.eye(2), (1, 2): 1 - np.eye(2), (0, 2): 1 - np.eye(2)}
>>> p = Problem(["a", "b", "c"], [np.array([0.0, 1.0]), np.zeros(2), np.array([1.0, 0.0])], ring)
>>> out = solve_dp(p)
>>> out.lower_bound, out.stats["treewidth"]
(1.0, 2)
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..errors import SolverError
from .problem import Problem
from .solution import Outcome

__all__ = ["MAX_TABLE", "EliminationPlan", "min_fill_order", "solve_dp"]

MAX_TABLE = 20_000_000
"""Default cap on the entries of the largest elimination table (float64: 160 MB)."""


@dataclass
class EliminationPlan:
    """An elimination order with its induced width and largest table.

    Parameters
    ----------
    order : list of int
        Variables in elimination order (a prefix when planning stopped early).
    width : int
        Induced width (largest neighbourhood at elimination) = treewidth upper bound.
    max_table : int
        Entries of the largest table (product of domain sizes of a node and its neighbours).
    complete : bool
        False when planning stopped because every remaining table exceeded the cap.
    worst : int or None
        Variable whose elimination needs the largest table.

    Examples
    --------
    >>> EliminationPlan([0], 0, 2, True, 0).width
    0
    """

    order: list[int]
    width: int
    max_table: int
    complete: bool
    worst: int | None


def min_fill_order(adjacency: list[set[int]], dims: list[int], cap: int | None = None) -> EliminationPlan:
    """Greedy min-fill elimination order (ties: smaller table, then lower index).

    With a ``cap``, nodes whose table would exceed it come last, so planning
    stops only when no node can be eliminated within the cap.

    Parameters
    ----------
    adjacency : list of set of int
        Neighbour sets (not modified).
    dims : list of int
        Domain size of each variable.
    cap : int, optional
        Stop planning when every remaining node's table would exceed this many entries.

    Examples
    --------
    >>> plan = min_fill_order([{1}, {0, 2}, {1}], [4, 4, 4])
    >>> plan.order, plan.width, plan.max_table
    ([0, 1, 2], 1, 16)
    """
    adj = [set(a) for a in adjacency]
    alive = set(range(len(adj)))

    def score(v: int) -> tuple[bool, float, int, int]:
        nbrs = list(adj[v])
        table = math.prod(dims[u] for u in nbrs) * dims[v]
        if cap is not None and table > cap:
            return True, math.inf, table, v  # cannot be eliminated within the cap: skip counting fill
        fill = sum(1 for a in range(len(nbrs)) for b in range(a + 1, len(nbrs))
                   if nbrs[b] not in adj[nbrs[a]])
        return False, fill, table, v

    scores = {v: score(v) for v in alive}
    order: list[int] = []
    width, biggest, worst = 0, 0, None
    while alive:
        v = min(alive, key=scores.__getitem__)
        table = scores[v][2]
        width = max(width, len(adj[v]))
        if table > biggest:
            biggest, worst = table, v
        if cap is not None and table > cap:
            return EliminationPlan(order, width, biggest, False, worst)
        order.append(v)
        nbrs = adj[v]
        for a in nbrs:
            adj[a] |= nbrs
            adj[a].discard(a)
            adj[a].discard(v)
        alive.discard(v)
        del scores[v]
        touched = set(nbrs)
        for a in nbrs:
            touched |= adj[a]
        for u in touched:
            scores[u] = score(u)
    return EliminationPlan(order, width, biggest, True, worst)


def _expand(scope: tuple[int, ...], table: np.ndarray, target: tuple[int, ...],
            dims: list[int]) -> np.ndarray:
    """View ``table`` over ``scope`` as a broadcastable array over ``target``."""
    position = {t: k for k, t in enumerate(target)}
    perm = sorted(range(len(scope)), key=lambda k: position[scope[k]])
    table = table.transpose(perm)
    present = set(scope)
    return table.reshape([dims[t] if t in present else 1 for t in target])


def solve_dp(problem: Problem, time_limit: float | None = None, max_table: int = MAX_TABLE) -> Outcome:
    """Exact minimum by variable elimination along a min-fill order.

    Parameters
    ----------
    problem : Problem
    time_limit : float, optional
        Ignored: dp refuses up front (by table size) instead of running out of time.
    max_table : int
        Largest elimination table allowed, in entries.

    Raises
    ------
    SolverError
        When the largest table would exceed ``max_table``; the message gives its size.

    Examples
    --------
    >>> from graphtune.solve.problem import Problem
    >>> chain = Problem(["a", "b"], [np.array([0.0, 3.0]), np.array([2.0, 0.0])],
    ...                 {(0, 1): 5 * (1 - np.eye(2))})
    >>> solve_dp(chain).labels
    [0, 0]
    """
    dims = problem.domain_sizes()
    plan = min_fill_order(problem.adjacency(), dims, cap=max_table)
    if not plan.complete:
        assert plan.worst is not None  # an incomplete plan names the node it stopped at
        name = problem.names[plan.worst]
        raise SolverError(
            f"dp: eliminating node {name!r} needs a table of {plan.max_table:.3g} entries "
            f"({plan.max_table * 8 / 2**20:.3g} MiB) with induced width >= {plan.width}, above "
            f"max_table={max_table}; use method='cpsat' (or 'auto'), or raise max_table"
        )
    factors: dict[int, tuple[tuple[int, ...], np.ndarray]] = {}
    by_var: list[set[int]] = [set() for _ in dims]
    ids = itertools.count()

    def add_factor(scope: tuple[int, ...], table: np.ndarray) -> None:
        fid = next(ids)
        factors[fid] = (scope, table)
        for v in scope:
            by_var[v].add(fid)

    trace: list[tuple[int, tuple[int, ...], np.ndarray]] = []
    constant = problem.offset
    for i, unary in enumerate(problem.unary):
        add_factor((i,), np.asarray(unary, dtype=np.float64))
    for (i, j), m in problem.pairs.items():
        add_factor((i, j), np.asarray(m, dtype=np.float64))
    for v in plan.order:
        fids = list(by_var[v])
        others = sorted({u for f in fids for u in factors[f][0]} - {v})
        target = (v, *others)
        total = np.zeros([dims[t] for t in target])
        for f in fids:
            scope, table = factors.pop(f)
            for u in scope:
                by_var[u].discard(f)
            total = total + _expand(scope, table, target, dims)
        choice = np.argmin(total, axis=0)
        reduced = np.take_along_axis(total, choice[None], axis=0)[0]
        trace.append((v, tuple(others), choice))
        if others:
            add_factor(tuple(others), reduced)
        else:
            constant += float(reduced)
    labels = [0] * len(dims)
    for v, others, choice in reversed(trace):
        labels[v] = int(choice[tuple(labels[u] for u in others)])
    return Outcome(labels, constant, True, {"treewidth": plan.width, "max_table": plan.max_table})
