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

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from .polytope import edge_classes, fold_terms
from .problem import Problem
from .solution import Outcome

__all__ = ["solve_lp", "INTEGRALITY"]

INTEGRALITY = 1e-6
"""Node variables within this of 0 or 1 count as integral."""


def _build(unary: list[np.ndarray], pairs: dict[tuple[int, int], np.ndarray]):
    """Objective, equality matrix and right-hand side of the local polytope."""
    offsets = np.cumsum([0] + [len(u) for u in unary])
    cost = [np.concatenate(unary)] if unary else [np.zeros(0)]
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
        the LP optimum (or the trivial bound if HiGHS did not finish).

    Examples
    --------
    >>> from graphtune.solve.problem import Problem
    >>> solve_lp(Problem(["a"], [np.array([1.0, 0.5])])).lower_bound
    0.5
    """
    unary, pairs, constant = fold_terms(problem)
    cost, matrix, rhs, offsets = _build(unary, pairs)
    options = {} if time_limit is None else {"time_limit": float(time_limit)}
    result = linprog(cost, A_eq=matrix, b_eq=rhs, bounds=(0.0, 1.0), method="highs", options=options)
    if result.status != 0 or result.x is None:
        labels = [int(np.argmin(u)) for u in problem.unary]
        return Outcome(labels, problem.trivial_bound(), False, {"lp_status": result.message})
    x = result.x[: offsets[-1]]
    labels = [int(np.argmax(x[offsets[i]:offsets[i + 1]])) for i in range(len(unary))]
    fractional = int(np.sum((x > INTEGRALITY) & (x < 1 - INTEGRALITY)))
    bound = float(result.fun) + constant
    energy = problem.energy(labels)
    tight = fractional == 0 and energy - bound <= 1e-9 * max(1.0, abs(energy))
    stats = {"lp_status": "optimal", "lp_bound": bound, "lp_fractional": fractional, "lp_tight": tight}
    return Outcome(labels, min(bound, energy), tight, stats)
