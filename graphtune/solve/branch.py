"""Best-first branch and bound on the local-polytope LP.

Layout graphs whose LP relaxation is *almost* tight (a few fractional nodes)
are proven optimal after a handful of LPs: each branch fixes the most
fractional node to its largest-LP state, or forbids that state. Every LP
solution is rounded and polished into an incumbent; subtrees whose LP bound
reaches the incumbent are pruned. The answer is optimal when the tree is
exhausted, else it carries the smallest open bound.

Examples
--------
>>> import numpy as np
>>> from graphtune.solve.problem import Problem
>>> anti = 1.0 - np.eye(2)  # a frustrated triangle: the LP alone is not tight
>>> p = Problem(["a", "b", "c"], [np.zeros(2), np.zeros(2), np.array([0.0, 0.1])],
...             {(0, 1): 1 - anti, (1, 2): 1 - anti, (0, 2): 1 - anti})
>>> out = solve_branch_and_bound(p)
>>> out.optimal, out.labels, round(out.lower_bound, 6)
(True, [1, 0, 0], 1.0)
"""

from __future__ import annotations

import heapq
import itertools
import time

import numpy as np

from .local import polish
from .lp import INTEGRALITY, relax
from .pbqp import solve_pbqp
from .problem import Problem
from .solution import Outcome

__all__ = ["solve_branch_and_bound"]


def _restrict(problem: Problem, allowed: list[np.ndarray]) -> Problem:
    """The problem with each variable limited to the states in ``allowed``."""
    return Problem(problem.names, [u[a] for u, a in zip(problem.unary, allowed)],
                   {(i, j): m[np.ix_(allowed[i], allowed[j])] for (i, j), m in problem.pairs.items()},
                   problem.offset)


def solve_branch_and_bound(problem: Problem, time_limit: float | None = None, max_lps: int = 500,
                           hint: list[int] | None = None) -> Outcome:
    """Minimise by LP-based branch and bound (best bound first).

    Parameters
    ----------
    problem : Problem
    time_limit : float, optional
        Seconds; stops with the incumbent and the smallest open bound.
    max_lps : int
        LPs solved at most, likewise.
    hint : list of int, optional
        Start incumbent; default the PBQP solution.

    Examples
    --------
    >>> from graphtune.solve.problem import Problem
    >>> solve_branch_and_bound(Problem(["a"], [np.array([1.0, 0.5])])).labels
    [1]
    """
    start = time.perf_counter()
    best = list(hint) if hint is not None else solve_pbqp(problem).labels
    best_energy = problem.energy(best)
    order = itertools.count()
    heap = [(problem.trivial_bound(), next(order), [np.arange(len(u)) for u in problem.unary])]
    lps = 0
    while heap:
        bound, _, allowed = heap[0]
        if bound >= best_energy:
            heap.clear()
            break
        left = None if time_limit is None else time_limit - (time.perf_counter() - start)
        if lps >= max_lps or (left is not None and left <= 0):
            break
        heapq.heappop(heap)
        relaxed = relax(_restrict(problem, allowed), left)
        lps += 1
        if relaxed is None:  # HiGHS gave up (time): keep the subtree open with its parent's bound
            heapq.heappush(heap, (bound, next(order), allowed))
            break
        value, marginals = relaxed
        if value >= best_energy:
            continue
        labels = polish(problem, [int(a[np.argmax(x)]) for a, x in zip(allowed, marginals)])
        energy = problem.energy(labels)
        if energy < best_energy:
            best, best_energy = labels, energy
        spread = [1.0 - float(x.max()) for x in marginals]
        i = int(np.argmax(spread)) if spread else 0
        if not spread or spread[i] <= INTEGRALITY:
            continue  # integral: this subtree's optimum is its rounded LP solution
        s = int(np.argmax(marginals[i]))
        fixed, rest = list(allowed), list(allowed)
        fixed[i], rest[i] = allowed[i][[s]], np.delete(allowed[i], s)
        heapq.heappush(heap, (value, next(order), fixed))
        heapq.heappush(heap, (value, next(order), rest))
    optimal = not heap
    bound = best_energy if optimal else min(best_energy, heap[0][0])
    return Outcome(best, bound, optimal, {"bnb_lps": lps, "bnb_open": len(heap)})
