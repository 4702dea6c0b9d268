"""``auto``: exact simplifications first, then DP, LP branch and bound or CP-SAT on what is left.

1. R0/RI/RII remove every node of degree <= 2 (exact); CNN layout graphs
   (treewidth <= 2 once add/concat are join nodes) usually vanish here.
2. On what is left, dead-end elimination drops states that another state of
   the same node always beats, and R0/RI/RII run again (both exact).
3. A remainder whose min-fill elimination tables fit ``max_table`` is solved by
   :func:`~graphtune.solve.dp.solve_dp`.
4. Otherwise the local-polytope LP is solved; an integral LP solution is a
   proven optimum without search, a nearly integral one is usually proven by
   a few more LPs in :func:`~graphtune.solve.branch.solve_branch_and_bound`.
5. If that needs more than ``max_lps`` LPs, CP-SAT takes over, warm-started
   with the branch and bound's incumbent; the lower bound is the better of both.

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
from typing import Any

from .branch import solve_branch_and_bound
from .cpsat import solve_cpsat
from .dominance import eliminate_dominated
from .dp import MAX_TABLE, min_fill_order, solve_dp
from .pbqp import Reducer
from .problem import Problem
from .solution import Outcome

__all__ = ["solve_auto"]


def _solve_remainder(remainder: Problem, time_limit: float | None, max_table: int, max_lps: int,
                     num_workers: int, stats: dict[str, Any]) -> Outcome:
    """Exact solve of the irreducible core: dp, else LP branch and bound, else CP-SAT."""
    start = time.perf_counter()
    plan = min_fill_order(remainder.adjacency(), remainder.domain_sizes(), cap=max_table)
    if plan.complete:
        stats["solver"] = "dp"
        return solve_dp(remainder, max_table=max_table)
    # With a time limit, keep at least half of it for CP-SAT in case the LPs stay fractional.
    searched = solve_branch_and_bound(remainder, None if time_limit is None else time_limit / 2,
                                      max_lps=max_lps)
    stats.update(searched.stats)
    if searched.optimal:
        stats["solver"] = "lp" if searched.stats["bnb_lps"] == 1 else "lp-branch-and-bound"
        return searched
    stats["solver"] = "cpsat"
    left = None if time_limit is None else max(0.0, time_limit - (time.perf_counter() - start))
    exact = solve_cpsat(remainder, left, num_workers=num_workers, hint=searched.labels)
    labels = min((exact.labels, searched.labels), key=remainder.energy)
    bound = min(max(exact.lower_bound, searched.lower_bound), remainder.energy(labels))
    return Outcome(labels, bound, exact.optimal, exact.stats)


def solve_auto(problem: Problem, time_limit: float | None = None, max_table: int = MAX_TABLE,
               max_lps: int = 100, num_workers: int = 2) -> Outcome:
    """Reductions, dominance, reductions, then dp / LP branch and bound / CP-SAT on the remainder.

    Parameters
    ----------
    problem : Problem
    time_limit : float, optional
        Seconds for the search stages: half for the LP branch and bound, the
        rest for CP-SAT (the reductions, dominance and dp need none).
    max_table : int
        Largest DP table (entries) before switching to LP / CP-SAT.
    max_lps : int
        LPs the branch and bound may solve before handing over to CP-SAT.
    num_workers : int
        CP-SAT workers.

    Examples
    --------
    >>> import numpy as np
    >>> from graphtune.solve.problem import Problem
    >>> solve_auto(Problem(["a"], [np.array([1.0, 0.0])])).labels
    [1]
    """
    clock = [time.perf_counter()]

    def lap() -> float:
        clock.append(time.perf_counter())
        return round(clock[-1] - clock[-2], 6)

    outer = Reducer(problem)
    outer.reduce(allow_rn=False)
    core, core_ids = outer.remainder()
    seconds = {"reductions": lap()}
    smaller, kept = eliminate_dominated(core)
    inner = Reducer(smaller)
    inner.reduce(allow_rn=False)
    remainder, ids = inner.remainder()
    seconds["dominance"] = lap()
    stats: dict[str, Any] = {
        "stage_seconds": seconds,
        "reductions": {k: outer.counts[k] + inner.counts[k] for k in outer.counts},
        "dominated_states": sum(len(u) for u in core.unary) - sum(len(u) for u in smaller.unary),
        "remainder_nodes": len(remainder),
        "remainder_edges": len(remainder.pairs),
    }
    if len(remainder):
        result = _solve_remainder(remainder, time_limit, max_table, max_lps, num_workers, stats)
        stats.update(result.stats)
        fixed = {ids[k]: s for k, s in enumerate(result.labels)}
        bound, optimal = result.lower_bound, result.optimal
        seconds[stats["solver"]] = lap()
    else:
        stats["solver"] = "reductions"
        fixed, bound, optimal = {}, None, True
    core_labels = [int(kept[k][s]) for k, s in enumerate(inner.backpropagate(fixed))]
    labels = outer.backpropagate({core_ids[k]: s for k, s in enumerate(core_labels)})
    energy = problem.energy(labels)
    if bound is not None:
        bound = outer.offset + inner.offset + bound
    return Outcome(labels, energy if bound is None else min(bound, energy), optimal, stats)
