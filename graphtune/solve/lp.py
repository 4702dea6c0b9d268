"""The local-polytope LP relaxation, solved with HiGHS (scipy).

Same variables as the CP-SAT model (node states, pairs of row/column classes
of each edge, marginal constraints) but continuous in ``[0, 1]``. Its optimum
is a lower bound on the energy; when the LP solution is integral it *is* an
optimal assignment, proven without search. Layout graphs are often LP-tight.

Examples
--------
>>> import numpy as np
>>> from graphtune.solve.problem import Problem
>>> p = Problem(["a", "b"], [np.array([0.0, 3.0]), np.array([2.0, 0.0])], {(0, 1): 5 * (1 - np.eye(2))})
>>> out = solve_lp(p)
>>> out.labels, out.optimal
([0, 0], True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .polytope import edge_classes, fold_terms
from .problem import Problem
from .solution import Outcome

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["relax", "solve_lp", "INTEGRALITY", "TOLERANCE"]

INTEGRALITY = 1e-6
"""Node variables within this of 0 or 1 count as integral."""

TOLERANCE = 1e-7
"""Relative slack for HiGHS' feasibility tolerances: the LP value minus this is the reported bound."""


def _build(unary: list[np.ndarray], pairs: dict[tuple[int, int], np.ndarray],
           ) -> tuple[np.ndarray, sp.csr_matrix, np.ndarray, np.ndarray]:
    """Objective, equality matrix and right-hand side of the local polytope."""
    import scipy.sparse as sp  # imported on use (with linprog): `import graphtune` stays light

    offsets = np.cumsum([0] + [len(u) for u in unary])
    cost = [np.concatenate(unary)]
    rows, cols, vals = [], [], []
    n_rows = len(unary)
    node_of = np.repeat(np.arange(len(unary)), [len(u) for u in unary])
    rows.append(node_of)
    cols.append(np.arange(offsets[-1]))
    vals.append(np.ones(offsets[-1]))
    n_cols = int(offsets[-1])
    for (i, j), m in pairs.items():
        row_of, col_of, compact = edge_classes(m)
        k, t = compact.shape
        cost.append(compact.ravel())
        y = n_cols + np.arange(k * t).reshape(k, t)
        n_cols += k * t
        # sum_t y[k, t] - sum_{s in class k} x_i[s] = 0
        rows += [n_rows + np.repeat(np.arange(k), t), n_rows + row_of]
        cols += [y.ravel(), offsets[i] + np.arange(len(row_of))]
        vals += [np.ones(k * t), -np.ones(len(row_of))]
        n_rows += k
        # sum_k y[k, t] - sum_{r in class t} x_j[r] = 0
        rows += [n_rows + np.tile(np.arange(t), k), n_rows + col_of]
        cols += [y.ravel(), offsets[j] + np.arange(len(col_of))]
        vals += [np.ones(k * t), -np.ones(len(col_of))]
        n_rows += t
    matrix = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                           shape=(n_rows, n_cols))
    rhs = np.zeros(n_rows)
    rhs[: len(unary)] = 1.0
    return np.concatenate(cost), matrix, rhs, offsets


def relax(problem: Problem, time_limit: float | None = None) -> tuple[float, list[np.ndarray]] | None:
    """Solve the local-polytope LP: (valid lower bound, per-node state marginals), None if HiGHS fails.

    The bound is the LP optimum less :data:`TOLERANCE` (relative).

    Examples
    --------
    >>> from graphtune.solve.problem import Problem
    >>> bound, marginals = relax(Problem(["a"], [np.array([1.0, 0.5])]))
    >>> round(bound, 6), marginals[0].round(6).tolist()
    (0.5, [0.0, 1.0])
    """
    unary, pairs, constant = fold_terms(problem)
    if not unary:
        return constant, []
    cost, matrix, rhs, offsets = _build(unary, pairs)
    # HiGHS presolve costs 5-10x more than it saves on these LPs (measured on DenseNet all-pairs).
    options: dict[str, bool | float] = {"presolve": False}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
    from scipy.optimize import linprog

    result = linprog(cost, A_eq=matrix, b_eq=rhs, bounds=(0.0, 1.0), method="highs", options=options)
    if result.status != 0 or result.x is None:
        return None
    value = float(result.fun) + constant
    x = result.x[: offsets[-1]]
    return value - TOLERANCE * max(1.0, abs(value)), [x[offsets[i]:offsets[i + 1]] for i in range(len(unary))]


def solve_lp(problem: Problem, time_limit: float | None = None) -> Outcome:
    """Solve the LP relaxation; optimal when its solution is integral.

    Parameters
    ----------
    problem : Problem
    time_limit : float, optional
        Seconds for HiGHS.

    Returns
    -------
    Outcome
        ``labels`` rounds each node to its largest LP value; ``lower_bound`` is
        the LP optimum less :data:`TOLERANCE` (relative), or the trivial bound
        if HiGHS did not finish. ``optimal`` when the LP solution is integral.

    Examples
    --------
    >>> from graphtune.solve.problem import Problem
    >>> out = solve_lp(Problem(["a"], [np.array([1.0, 0.5])]))
    >>> out.labels, out.optimal, round(out.lower_bound, 6)
    ([1], True, 0.5)
    """
    relaxed = relax(problem, time_limit)
    if relaxed is None:
        labels = [int(np.argmin(u)) for u in problem.unary]
        return Outcome(labels, problem.trivial_bound(), False, {"lp_status": "failed", "lp_tight": False})
    bound, marginals = relaxed
    labels = [int(np.argmax(x)) for x in marginals]
    fractional = sum(int(np.sum((x > INTEGRALITY) & (x < 1 - INTEGRALITY))) for x in marginals)
    energy = problem.energy(labels)
    tight = fractional == 0 and energy <= bound + 2 * TOLERANCE * max(1.0, abs(bound))
    stats = {"lp_status": "optimal", "lp_bound": bound, "lp_fractional": fractional, "lp_tight": tight}
    return Outcome(labels, min(bound, energy), tight, stats)
