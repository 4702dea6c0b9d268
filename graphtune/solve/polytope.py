"""Shared pieces of the local-polytope formulation used by the LP and CP-SAT methods.

Examples
--------
>>> import numpy as np
>>> row_of, col_of, compact = edge_classes(np.array([[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]]))
>>> row_of.tolist(), col_of.tolist(), compact.tolist()
([0, 0], [0, 1, 1], [[0.0, 1.0]])
"""

from __future__ import annotations

import numpy as np

from .problem import Problem, separable

__all__ = ["edge_classes", "fold_terms"]


def edge_classes(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group identical rows and identical columns of an edge matrix.

    Returns
    -------
    row_of : ndarray
        Class of each row (state of the first node).
    col_of : ndarray
        Class of each column.
    compact : ndarray
        The matrix over classes: ``matrix[s, r] == compact[row_of[s], col_of[r]]``.

    Examples
    --------
    >>> edge_classes(np.eye(2))[2].tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    _, rows, row_of = np.unique(matrix, axis=0, return_index=True, return_inverse=True)
    _, cols, col_of = np.unique(matrix, axis=1, return_index=True, return_inverse=True)
    return row_of.reshape(-1), col_of.reshape(-1), matrix[np.ix_(rows, cols)]


def fold_terms(problem: Problem) -> tuple[list[np.ndarray], dict[tuple[int, int], np.ndarray], float]:
    """Fold separable edges into node costs and shift every term to minimum 0.

    Returns
    -------
    unary, pairs, constant
        ``E(x) = constant + sum unary + sum pairs`` for every assignment.

    Examples
    --------
    >>> p = Problem(["a", "b"], [np.array([1.0, 2.0]), np.zeros(2)], {(0, 1): np.array([[1.0, 2.0], [1.0, 2.0]])})
    >>> unary, pairs, constant = fold_terms(p)
    >>> [u.tolist() for u in unary], pairs, constant
    ([[0.0, 1.0], [0.0, 1.0]], {}, 2.0)
    """
    unary = [np.asarray(u, dtype=np.float64).copy() for u in problem.unary]
    pairs = {}
    constant = problem.offset
    for (i, j), m in problem.pairs.items():
        m = np.asarray(m, dtype=np.float64)
        if separable(m):
            unary[i] += m[:, 0] - m[0, 0]
            unary[j] += m[0, :]
            continue
        low = float(m.min())
        constant += low
        pairs[i, j] = m - low
    for k, u in enumerate(unary):
        low = float(u.min())
        constant += low
        unary[k] = u - low
    return unary, pairs, constant
