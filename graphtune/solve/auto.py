"""``auto``: exact simplifications first, then DP, the LP relaxation or CP-SAT on what is left.

1. R0/RI/RII remove every node of degree <= 2 (exact); CNN layout graphs
   (treewidth <= 2 once add/concat are join nodes) usually vanish here.
2. On what is left, dead-end elimination drops states that another state of
   the same node always beats, and R0/RI/RII run again (both exact).
3. A remainder whose min-fill elimination tables fit ``max_table`` is solved by
   :func:`~graphtune.solve.dp.solve_dp`.
4. Otherwise the local-polytope LP is solved; an integral LP solution is a
   proven optimum without search.
5. Otherwise CP-SAT, warm-started with the better of the rounded LP and the
   PBQP solution; the lower bound is the better of LP and CP-SAT bounds.

The answer is a proven optimum or carries an explicit lower bound.

Examples
--------
>>> import numpy as np
>>> from graphtune.solve.problem import Problem
>>> p = Problem(["a", "b"], [np.array([0.0, 3.0]), np.array([2.0, 0.0])], {(0, 1): 5 * (1 - np.eye(2))})
>>> out = solve_auto(p)
>>> out.labels, out.optimal, out.stats["solver"]
([0, 0], True, 'reductions')
"""

from __future__ import annotations

import time

from .cpsat import solve_cpsat
from .dominance import eliminate_dominated
from .dp import MAX_TABLE, min_fill_order, solve_dp
from .lp import solve_lp
from .pbqp import Reducer, solve_pbqp
from .problem import Problem
from .solution import Outcome

__all__ = ["solve_auto"]


def _solve_remainder(remainder: Problem, time_limit: float | None, max_table: int, num_workers: int,
                     stats: dict) -> Outcome:
    """Exact solve of the irreducible core: dp, else LP, else CP-SAT."""
    start = time.perf_counter()
    plan = min_fill_order(remainder.adjacency(), remainder.domain_sizes(), cap=max_table)
    if plan.complete:
        stats["solver"] = "dp"
        return solve_dp(remainder, max_table=max_table)
    relaxed = solve_lp(remainder, time_limit)
    stats.update(relaxed.stats)
    if relaxed.optimal:
        stats["solver"] = "lp"
        return relaxed
    stats["solver"] = "cpsat"
    hint = min((relaxed.labels, solve_pbqp(remainder).labels), key=remainder.energy)
    left = None if time_limit is None else max(0.0, time_limit - (time.perf_counter() - start))
    exact = solve_cpsat(remainder, left, num_workers=num_workers, hint=hint)
    exact.lower_bound = max(exact.lower_bound, min(relaxed.lower_bound, remainder.energy(exact.labels)))
    return exact


def solve_auto(problem: Problem, time_limit: float | None = None, max_table: int = MAX_TABLE,
               num_workers: int = 2) -> Outcome:
    """Reductions, dominance, reductions, then dp / LP / CP-SAT on the remainder (see module doc).

    Parameters
    ----------
    problem : Problem
    time_limit : float, optional
        Seconds for the LP and CP-SAT stages (the rest needs none).
    max_table : int
        Largest DP table (entries) before switching to LP / CP-SAT.
    num_workers : int
        CP-SAT workers.

    Examples
    --------
    >>> import numpy as np
    >>> from graphtune.solve.problem import Problem
    >>> solve_auto(Problem(["a"], [np.array([1.0, 0.0])])).labels
    [1]
    """
    outer = Reducer(problem)
    outer.reduce(allow_rn=False)
    core, core_ids = outer.remainder()
    smaller, kept = eliminate_dominated(core)
    inner = Reducer(smaller)
    inner.reduce(allow_rn=False)
    remainder, ids = inner.remainder()
    stats = {
        "reductions": {k: outer.counts[k] + inner.counts[k] for k in outer.counts},
        "dominated_states": sum(len(u) for u in core.unary) - sum(len(u) for u in smaller.unary),
        "remainder_nodes": len(remainder),
        "remainder_edges": len(remainder.pairs),
    }
    if len(remainder):
        result = _solve_remainder(remainder, time_limit, max_table, num_workers, stats)
        stats.update(result.stats)
        fixed = {ids[k]: s for k, s in enumerate(result.labels)}
        bound, optimal = result.lower_bound, result.optimal
    else:
        stats["solver"] = "reductions"
        fixed, bound, optimal = {}, None, True
    core_labels = [int(kept[k][s]) for k, s in enumerate(inner.backpropagate(fixed))]
    labels = outer.backpropagate({core_ids[k]: s for k, s in enumerate(core_labels)})
    energy = problem.energy(labels)
    if bound is not None:
        bound = outer.offset + inner.offset + bound
    return Outcome(labels, energy if bound is None else min(bound, energy), optimal, stats)
