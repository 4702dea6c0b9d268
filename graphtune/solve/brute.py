"""Exhaustive search: the reference every other method is tested against.

Examples
--------
>>> import numpy as np
>>> from graphtune.solve.problem import Problem
>>> p = Problem(["x", "y"], [np.array([0.0, 1.0]), np.array([1.0, 0.0])],
...             {(0, 1): np.array([[3.0, 0.0], [0.0, 0.0]])})
>>> solve_brute(p).labels
[0, 1]
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import SolverError
from .problem import Problem
from .solution import Outcome

__all__ = ["solve_brute", "MAX_ASSIGNMENTS"]

MAX_ASSIGNMENTS = 2_000_000
"""Default cap on the number of assignments brute force enumerates."""

_CHUNK = 1 << 16


def solve_brute(problem: Problem, time_limit: float | None = None,
                max_assignments: int = MAX_ASSIGNMENTS) -> Outcome:
    """Enumerate every assignment (vectorised in chunks) and keep the best.

    Parameters
    ----------
    problem : Problem
    time_limit : float, optional
        Ignored (brute force always finishes or refuses up front).
    max_assignments : int
        Refuse when the product of domain sizes exceeds this.

    Raises
    ------
    SolverError
        When the instance has more than ``max_assignments`` assignments.

    Examples
    --------
    >>> from graphtune.solve.problem import Problem
    >>> solve_brute(Problem(["x"], [np.array([2.0, 1.0])])).lower_bound
    1.0
    """
    dims = problem.domain_sizes()
    total = math.prod(dims)
    if total > max_assignments:
        raise SolverError(
            f"brute: {total} assignments exceed max_assignments={max_assignments}; "
            "use method='dp', 'cpsat' or 'auto'"
        )
    best_energy, best_labels = math.inf, []
    for start in range(0, total, _CHUNK):
        flat = np.arange(start, min(start + _CHUNK, total))
        labels = np.stack(np.unravel_index(flat, dims), axis=1) if dims else np.zeros((1, 0), dtype=int)
        energy = np.full(len(labels), problem.offset)
        for i, u in enumerate(problem.unary):
            energy += u[labels[:, i]]
        for (i, j), m in problem.pairs.items():
            energy += m[labels[:, i], labels[:, j]]
        k = int(np.argmin(energy))
        if energy[k] < best_energy:
            best_energy, best_labels = float(energy[k]), [int(s) for s in labels[k]]
    return Outcome(best_labels, best_energy, True, {"assignments": total})
