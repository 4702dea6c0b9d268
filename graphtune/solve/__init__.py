"""Choose one candidate per node of a :class:`~graphtune.graph.LayoutGraph` at minimum total cost.

``solve(graph, method=...)`` dispatches to one method family:

========  ===================================================================================
auto      reductions + dominance, then dp, LP branch and bound or CP-SAT on the rest
dp        variable elimination along a min-fill order (exact, memory-capped)
pbqp      Scholz–Eckstein reductions + RN heuristic (fast; exact if no RN)
cpsat     OR-Tools CP-SAT, local polytope (exact with proof, or gap at time limit)
lp        local-polytope LP relaxation (HiGHS): exact when the LP is tight, else bound
brute     exhaustive search (tests; size-capped)
========  ===================================================================================

Examples
--------
>>> from graphtune.graph import LayoutGraph
>>> g = LayoutGraph()
>>> g.add_node("a", costs=[1.0, 2.0]); g.add_node("b", costs=[3.0, 1.0])
>>> g.add_edge("a", "b", cost=[[0.0, 5.0], [5.0, 0.0]])
>>> sol = solve(g)
>>> sol.assignment, sol.energy, sol.optimal
({'a': 1, 'b': 1}, 3.0, True)
"""

from __future__ import annotations

import inspect
import time
from typing import Any, Callable

from ..errors import ArgumentError
from ..graph import LayoutGraph
from .auto import solve_auto
from .brute import solve_brute
from .cpsat import solve_cpsat
from .dp import solve_dp
from .lp import solve_lp
from .pbqp import solve_pbqp
from .problem import Problem
from .solution import Outcome, Solution

__all__ = ["solve", "METHODS", "Solution", "Problem"]

METHODS: dict[str, Callable[..., Outcome]] = {
    "auto": solve_auto,
    "dp": solve_dp,
    "pbqp": solve_pbqp,
    "cpsat": solve_cpsat,
    "lp": solve_lp,
    "brute": solve_brute,
}
"""Method name -> function ``(problem, time_limit, **limits) -> Outcome``."""


def _limits_of(func: Callable[..., Outcome]) -> list[str]:
    params = list(inspect.signature(func).parameters)
    return [p for p in params if p not in ("problem", "time_limit")]


def solve(graph: LayoutGraph, method: str = "auto", time_limit: float | None = None,
          **limits: Any) -> Solution:
    """Minimise kernel + transform cost over all candidate assignments.

    Parameters
    ----------
    graph : LayoutGraph
        Validated first (``GraphError`` on missing/NaN/negative costs).
    method : str
        One of ``auto``, ``dp``, ``pbqp``, ``cpsat``, ``lp``, ``brute``.
    time_limit : float, optional
        Seconds for the methods that search (``cpsat``, ``lp``, ``auto``'s LP/CP-SAT part).
    **limits
        Method limits: ``max_table`` (dp, auto), ``max_lps`` (auto),
        ``max_assignments`` (brute), ``num_workers`` (cpsat, auto), ``max_lp``,
        ``linearization_level``, ``scale_bits``, ``hint`` (cpsat).

    Returns
    -------
    Solution
        ``energy`` is re-evaluated with ``graph.energy``; ``lower_bound <= optimum``.

    Raises
    ------
    ValueError
        Unknown method or a limit the method does not take (lists the valid ones).
    SolverError
        The method refuses the instance (dp table / brute size above its cap).

    Examples
    --------
    >>> from graphtune.graph import LayoutGraph
    >>> g = LayoutGraph(); g.add_node("a", costs=[2.0, 1.0])
    >>> solve(g, method="dp").assignment
    {'a': 1}
    >>> solve(g, method="magic")
    Traceback (most recent call last):
    ...
    graphtune.errors.ArgumentError: unknown solve method 'magic';
        valid methods are: auto, brute, cpsat, dp, lp, pbqp
    """
    if method not in METHODS:
        raise ArgumentError(
            f"unknown solve method {method!r}; valid methods are: {', '.join(sorted(METHODS))}")
    func = METHODS[method]
    allowed = _limits_of(func)
    unknown = sorted(set(limits) - set(allowed))
    if unknown:
        raise ValueError(
            f"solve method {method!r} does not take {', '.join(unknown)}; its limits are: "
            f"{', '.join(allowed) or 'none'}"
        )
    start = time.perf_counter()
    problem = Problem.from_graph(graph)
    outcome = func(problem, time_limit, **limits)
    seconds = time.perf_counter() - start
    assignment = {name: int(s) for name, s in zip(problem.names, outcome.labels)}
    energy = graph.energy(assignment)
    return Solution(assignment, energy, min(outcome.lower_bound, energy), outcome.optimal, method, seconds,
                    outcome.stats)
