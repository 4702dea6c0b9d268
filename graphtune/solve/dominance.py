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
>>> p = Problem(["a", "b"], [np.array([1.0, 2.0, 0.5]), np.zeros(2)], {(0, 1): np.array([[0, 1], [0, 1], [0, 9.0]])})
>>> small, kept = eliminate_dominated(p)
>>> [k.tolist() for k in kept]
[[2], [0]]
"""

from __future__ import annotations

import numpy as np

from .problem import Problem

__all__ = ["eliminate_dominated"]


def _margins(cost: np.ndarray, neighbours: list[np.ndarray]) -> np.ndarray:
    """``D[s, t]`` = worst-case gain of switching from ``s`` to ``t`` (>= 0: ``s`` dominated)."""
    margin = cost[:, None] - cost[None, :]
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
    for _ in range(max_rounds):
        changed = False
        for i in range(len(unary)):
            if len(unary[i]) == 1:
                continue
            views = [pairs[e] if e[0] == i else pairs[e].T for e in incident[i]]
            margin = _margins(unary[i], views)
            alive = np.ones(len(unary[i]), dtype=bool)
            for s in range(len(alive)):
                others = alive.copy()
                others[s] = False
                if np.any(margin[s, others] >= 0):
                    alive[s] = False
            if alive.all():
                continue
            changed = True
            kept[i] = kept[i][alive]
            unary[i] = unary[i][alive]
            for e in incident[i]:
                pairs[e] = pairs[e][alive, :] if e[0] == i else pairs[e][:, alive]
        if not changed:
            break
    return Problem(list(problem.names), unary, pairs, problem.offset), kept
