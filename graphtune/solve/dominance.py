"""Dead-end elimination: drop states that can never beat another state of the same node.

State ``s`` of node ``i`` is dominated by ``t`` (Goldstein's criterion) when
``unary[i][s] - unary[i][t] + sum_j min_r (C_ij[s, r] - C_ij[t, r]) >= 0``:
switching any assignment from ``s`` to ``t`` never raises its energy, so some
optimum avoids ``s``. Removing dominated states keeps the optimum exactly. For
layout graphs this removes every candidate that is slower than another one
with the same layouts, and more.

Examples
--------
>>> import numpy as np
>>> from graphtune.solve.problem import Problem
>>> p = Problem(["a", "b"], [np.array([1.0, 2.0, 0.5]), np.zeros(2)],
...             {(0, 1): np.array([[0, 1], [0, 1], [0, 9.0]])})
>>> small, kept = eliminate_dominated(p)
>>> [k.tolist() for k in kept]
[[2], [0]]
"""

from __future__ import annotations

import numpy as np

from .polytope import group_rows
from .problem import Problem

__all__ = ["eliminate_dominated"]


def _margins(cost: np.ndarray, neighbours: list[np.ndarray]) -> np.ndarray:
    """``D[s, t]`` = worst-case gain of switching from ``s`` to ``t`` (>= 0: ``s`` dominated).

    ``neighbours`` are edge matrices with this node's states as rows; duplicate
    columns may be dropped beforehand (they give identical minima).
    """
    margin: np.ndarray = cost[:, None] - cost[None, :]
    for m in neighbours:
        margin = margin + (m[:, None, :] - m[None, :, :]).min(axis=2)
    return margin


def eliminate_dominated(problem: Problem, max_rounds: int = 10) -> tuple[Problem, list[np.ndarray]]:
    """Remove dominated states until none is left (or ``max_rounds`` passes).

    Returns
    -------
    Problem
        Same variables, smaller domains (at least one state each).
    list of ndarray
        ``kept[i]``: original state indices of variable ``i``'s remaining states.

    Examples
    --------
    >>> import numpy as np
    >>> from graphtune.solve.problem import Problem
    >>> eliminate_dominated(Problem(["a"], [np.array([2.0, 1.0])]))[1][0].tolist()
    [1]
    """
    kept = [np.arange(len(u)) for u in problem.unary]
    unary = [np.asarray(u, dtype=np.float64) for u in problem.unary]
    pairs = {key: np.asarray(m, dtype=np.float64) for key, m in problem.pairs.items()}
    incident: list[list[tuple[int, int]]] = [[] for _ in unary]
    for i, j in pairs:
        incident[i].append((i, j))
        incident[j].append((i, j))
    # (edge, node) -> (class of each column, the edge seen from node with one column per class)
    views: dict[tuple[tuple[int, int], int], tuple[np.ndarray, np.ndarray]] = {}

    def oriented(e: tuple[int, int], i: int) -> np.ndarray:
        return pairs[e] if e[0] == i else pairs[e].T

    def view(e: tuple[int, int], i: int) -> np.ndarray:
        """Edge ``e`` with ``i``'s states as rows and duplicate columns dropped (cached)."""
        if (e, i) not in views:
            m = oriented(e, i)
            of, first = group_rows(np.ascontiguousarray(m.T))
            views[e, i] = (of, m[:, first])
        return views[e, i][1]

    dirty = set(range(len(unary)))
    for _ in range(max_rounds):
        if not dirty:
            break
        changed = set()
        for i in sorted(dirty):
            if len(unary[i]) == 1:
                continue
            dominated = _margins(unary[i], [view(e, i) for e in incident[i]]) >= 0
            np.fill_diagonal(dominated, False)
            alive = np.ones(len(unary[i]), dtype=bool)
            for s in np.flatnonzero(dominated.any(axis=1)):
                if (dominated[s] & alive).any():
                    alive[s] = False
            if alive.all():
                continue
            changed.add(i)
            kept[i] = kept[i][alive]
            unary[i] = unary[i][alive]
            for e in incident[i]:
                pairs[e] = pairs[e][alive, :] if e[0] == i else pairs[e][:, alive]
                j = e[1] if e[0] == i else e[0]
                if (e, i) in views:  # rows shrink; column classes unchanged
                    of, v = views[e, i]
                    views[e, i] = (of, v[alive, :])
                if (e, j) in views:  # columns shrink; keep one representative per surviving class
                    of = views[e, j][0][alive]
                    first = np.unique(of, return_index=True)[1]
                    views[e, j] = (of, oriented(e, j)[:, first])
        # only neighbours of shrunk nodes can lose more states
        dirty = {j for i in changed for e in incident[i] for j in e if j != i}
    return Problem(list(problem.names), unary, pairs, problem.offset), kept
