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

__all__ = ["edge_classes", "fold_terms", "group_rows"]


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
    row_of, rows = group_rows(matrix)
    col_of, cols = group_rows(np.ascontiguousarray(matrix.T))
    return row_of, col_of, matrix[np.ix_(rows, cols)]


def group_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class of each row (first-seen order) and the first row of each class.

    Examples
    --------
    >>> of, first = group_rows(np.array([[1.0, 2.0], [0.0, 0.0], [1.0, 2.0]]))
    >>> of.tolist(), first.tolist()
    ([0, 1, 0], [0, 1])
    """
    seen: dict[bytes, int] = {}
    of = np.empty(len(matrix), dtype=np.intp)
    first: list[int] = []
    for s, row in enumerate(matrix):
        k = seen.setdefault(row.tobytes(), len(first))
        if k == len(first):
            first.append(s)
        of[s] = k
    return of, np.array(first, dtype=np.intp)


def fold_terms(problem: Problem) -> tuple[list[np.ndarray], dict[tuple[int, int], np.ndarray], float]:
    """Fold separable edges into node costs and shift every term to minimum 0.

    Returns
    -------
    unary, pairs, constant
        ``E(x) = constant + sum unary + sum pairs`` for every assignment.

    Examples
    --------
    >>> p = Problem(["a", "b"], [np.array([1.0, 2.0]), np.zeros(2)],
    ...             {(0, 1): np.array([[1.0, 2.0], [1.0, 2.0]])})
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
