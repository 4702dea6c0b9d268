"""PBQP solving in the style of Scholz–Eckstein / LLVM's register allocator.

The reductions are pure functions on numpy arrays:

* :func:`reduce_r0` — a node without neighbours takes its cheapest state;
* :func:`reduce_ri` — a degree-1 node folds into its neighbour's costs;
* :func:`reduce_rii` — a degree-2 node becomes an edge between its neighbours;
* :func:`reduce_rn` — heuristic: a node of higher degree is fixed to the state
  that looks locally best and its edges are folded into the neighbours.

R0, RI and RII preserve the optimum exactly; a graph of treewidth <= 2
(series-parallel, e.g. every CNN with add/concat joins) reduces completely
without RN. :class:`Reducer` applies them to a :class:`Problem` and
back-propagates the choices in reverse order once the remaining nodes have
states. :func:`solve_pbqp` reports ``optimal=True`` only when no RN step was
taken; otherwise it polishes the result with single-node moves.

Examples
--------
>>> from graphtune.solve.problem import Problem
>>> p = Problem(["a", "b", "c"], [np.array([0.0, 1.0]), np.zeros(2), np.array([2.0, 0.0])],
...             {(0, 1): 5 * (1 - np.eye(2)), (1, 2): 5 * (1 - np.eye(2))})
>>> out = solve_pbqp(p)
>>> out.labels, out.optimal
([1, 1, 1], True)
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from .local import polish
from .problem import Problem, separable
from .solution import Outcome

__all__ = ["reduce_r0", "reduce_ri", "reduce_rii", "reduce_rn", "Reducer", "solve_pbqp"]


def reduce_r0(cost_x: np.ndarray) -> tuple[float, int]:
    """R0: an isolated node takes its cheapest state.

    Returns
    -------
    (float, int)
        The cost contributed and the chosen state.

    Examples
    --------
    >>> reduce_r0(np.array([3.0, 1.0, 2.0]))
    (1.0, 1)
    """
    s = int(np.argmin(cost_x))
    return float(cost_x[s]), s


def reduce_ri(cost_x: np.ndarray, c_xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RI: fold a degree-1 node ``x`` into its neighbour ``y``.

    Returns
    -------
    delta_y : ndarray
        ``delta_y[r] = min_s cost_x[s] + c_xy[s, r]``, to add to ``y``'s costs.
    choice : ndarray
        ``choice[r]``: best state of ``x`` when ``y`` takes ``r``.

    Examples
    --------
    >>> d, c = reduce_ri(np.array([0.0, 1.0]), np.array([[0.0, 4.0], [4.0, 0.0]]))
    >>> d.tolist(), c.tolist()
    ([0.0, 1.0], [0, 1])
    """
    total = cost_x[:, None] + c_xy
    choice = np.argmin(total, axis=0)
    return total[choice, np.arange(total.shape[1])], choice


def reduce_rii(cost_x: np.ndarray, c_xy: np.ndarray, c_xz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """RII: replace a degree-2 node ``x`` by an edge between its neighbours ``y`` and ``z``.

    Returns
    -------
    delta_yz : ndarray
        ``delta_yz[r, t] = min_s cost_x[s] + c_xy[s, r] + c_xz[s, t]``.
    choice : ndarray
        ``choice[r, t]``: best state of ``x`` for ``y = r, z = t``.

    Examples
    --------
    >>> d, c = reduce_rii(np.zeros(2), np.eye(2), np.eye(2))
    >>> d.tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """
    total = cost_x[:, None, None] + c_xy[:, :, None] + c_xz[:, None, :]
    choice = np.argmin(total, axis=0)
    return np.take_along_axis(total, choice[None], axis=0)[0], choice


def reduce_rn(cost_x: np.ndarray, neighbours: list[tuple[np.ndarray, np.ndarray]]) -> int:
    """RN heuristic: the state of ``x`` minimising its cost plus each neighbour's best response.

    Parameters
    ----------
    cost_x : ndarray
        Costs of ``x``.
    neighbours : list of (c_xy, cost_y)
        Edge matrix (``x`` first) and costs of each neighbour.

    Examples
    --------
    >>> reduce_rn(np.array([0.0, 0.5]), [(np.array([[2.0, 2.0], [0.0, 9.0]]), np.zeros(2))])
    1
    """
    total = cost_x.copy()
    for c_xy, cost_y in neighbours:
        total += (c_xy + cost_y[None, :]).min(axis=1)
    return int(np.argmin(total))


class Reducer:
    """Applies PBQP reductions to a copy of a problem and back-propagates choices.

    Parameters
    ----------
    problem : Problem
        Not modified.

    Examples
    --------
    >>> from graphtune.solve.problem import Problem
    >>> r = Reducer(Problem(["a"], [np.array([1.0, 0.0])]))
    >>> r.reduce(allow_rn=False)
    >>> r.remaining, r.backpropagate({})
    ([], [1])
    """

    def __init__(self, problem: Problem) -> None:
        self.n = len(problem)
        self.offset = problem.offset
        self.cost = {i: u.astype(np.float64, copy=True) for i, u in enumerate(problem.unary)}
        self.adj: dict[int, dict[int, np.ndarray]] = {i: {} for i in range(self.n)}
        self.stack: list[tuple[Any, ...]] = []  # (step, nodes..., choice), undone in reverse
        self.counts = {"R0": 0, "RI": 0, "RII": 0, "RN": 0, "independent_edges": 0}
        self.bound_at_first_rn: float | None = None
        for (i, j), m in problem.pairs.items():
            self._add_edge(i, j, np.asarray(m, dtype=np.float64))

    # -------------------------------------------------------------- graph edits
    def _add_edge(self, i: int, j: int, m: np.ndarray) -> None:
        if j in self.adj[i]:
            m = self.adj[i][j] + m
        if separable(m):
            # Fold a[s] + b[r] into the unaries and drop the edge.
            self.cost[i] += m[:, 0] - m[0, 0]
            self.cost[j] += m[0, :]
            self.counts["independent_edges"] += 1
            self._remove_edge(i, j)
            return
        self.adj[i][j] = m
        self.adj[j][i] = m.T

    def _remove_edge(self, i: int, j: int) -> None:
        self.adj[i].pop(j, None)
        self.adj[j].pop(i, None)

    def _remove_node(self, x: int) -> list[int]:
        neighbours = list(self.adj[x])
        for y in neighbours:
            self._remove_edge(x, y)
        del self.cost[x], self.adj[x]
        return neighbours

    # -------------------------------------------------------------- reducing
    @property
    def remaining(self) -> list[int]:
        """Variables not yet reduced, in increasing order."""
        return sorted(self.cost)

    def current_bound(self) -> float:
        """Lower bound on the original optimum from the current (reduced) problem."""
        return (self.offset + sum(float(c.min()) for c in self.cost.values())
                + sum(float(m.min()) for x in self.adj for y, m in self.adj[x].items() if x < y))

    def reduce(self, allow_rn: bool = True) -> None:
        """Reduce until no node is left (``allow_rn``) or every remaining node has degree >= 3.

        Examples
        --------
        >>> from graphtune.solve.problem import Problem
        >>> r = Reducer(Problem(["a", "b"], [np.zeros(2), np.zeros(2)], {(0, 1): np.eye(2)}))
        >>> r.reduce(); r.counts["RI"] + r.counts["R0"]
        2
        """
        queue = deque(x for x in sorted(self.cost) if len(self.adj[x]) <= 2)
        while True:
            while queue:
                x = queue.popleft()
                if x not in self.cost or len(self.adj[x]) > 2:
                    continue
                queue.extend(y for y in self._reduce_exact(x) if len(self.adj[y]) <= 2)
            if not self.cost or not allow_rn:
                return
            if self.bound_at_first_rn is None:
                self.bound_at_first_rn = self.current_bound()
            x = max(self.cost, key=lambda k: (len(self.adj[k]), -k))
            queue.extend(y for y in self._reduce_rn(x) if len(self.adj[y]) <= 2)

    def _reduce_exact(self, x: int) -> list[int]:
        neighbours = list(self.adj[x])
        if not neighbours:
            const, s = reduce_r0(self.cost[x])
            self.offset += const
            self.stack.append(("fix", x, s))
            self.counts["R0"] += 1
        elif len(neighbours) == 1:
            (y,) = neighbours
            delta, choice = reduce_ri(self.cost[x], self.adj[x][y])
            self.cost[y] = self.cost[y] + delta
            self.stack.append(("RI", x, y, choice))
            self.counts["RI"] += 1
        else:
            y, z = neighbours
            delta, choice = reduce_rii(self.cost[x], self.adj[x][y], self.adj[x][z])
            self.stack.append(("RII", x, y, z, choice))
            self.counts["RII"] += 1
        self._remove_node(x)
        if len(neighbours) == 2:
            self._add_edge(y, z, delta)
        return neighbours

    def _reduce_rn(self, x: int) -> list[int]:
        s = reduce_rn(self.cost[x], [(m, self.cost[y]) for y, m in self.adj[x].items()])
        self.offset += float(self.cost[x][s])
        for y, m in self.adj[x].items():
            self.cost[y] = self.cost[y] + m[s, :]
        self.stack.append(("fix", x, s))
        self.counts["RN"] += 1
        return self._remove_node(x)

    # -------------------------------------------------------------- remainder
    def remainder(self) -> tuple[Problem, list[int]]:
        """The unreduced part as a standalone problem (offset 0) and its variable ids.

        Examples
        --------
        >>> from graphtune.solve.problem import Problem
        >>> r = Reducer(Problem(["a"], [np.zeros(1)]))
        >>> len(r.remainder()[0])
        1
        """
        ids = self.remaining
        local = {x: k for k, x in enumerate(ids)}
        pairs = {(local[x], local[y]): m.copy() for x in ids for y, m in self.adj[x].items() if x < y}
        return Problem([str(x) for x in ids], [self.cost[x].copy() for x in ids], pairs), ids

    def backpropagate(self, fixed: dict[int, int]) -> list[int]:
        """Full labelling from the states of the remaining variables (``id -> state``).

        Examples
        --------
        >>> from graphtune.solve.problem import Problem
        >>> r = Reducer(Problem(["a"], [np.array([1.0, 0.0])])); r.reduce()
        >>> r.backpropagate({})
        [1]
        """
        labels = dict(fixed)
        for entry in reversed(self.stack):
            kind, x = entry[0], entry[1]
            if kind == "fix":
                labels[x] = entry[2]
            elif kind == "RI":
                labels[x] = int(entry[3][labels[entry[2]]])
            else:
                labels[x] = int(entry[4][labels[entry[2]], labels[entry[3]]])
        return [int(labels[i]) for i in range(self.n)]


def solve_pbqp(problem: Problem, time_limit: float | None = None) -> Outcome:
    """Solve with R0/RI/RII and the RN heuristic; optimal when no RN step was needed.

    After RN steps the assignment is polished by single-node moves
    (:func:`~graphtune.solve.local.polish`).

    Parameters
    ----------
    problem : Problem
    time_limit : float, optional
        Ignored: PBQP runs in (low-order) polynomial time.

    Examples
    --------
    >>> from graphtune.solve.problem import Problem
    >>> solve_pbqp(Problem(["a"], [np.array([1.0, 0.0])])).labels
    [1]
    """
    reducer = Reducer(problem)
    reducer.reduce(allow_rn=True)
    labels = reducer.backpropagate({})
    optimal = reducer.counts["RN"] == 0
    if not optimal:
        labels = polish(problem, labels)
    energy = problem.energy(labels)
    first_rn = reducer.bound_at_first_rn  # set by the first RN step, so whenever not optimal
    bound = energy if optimal or first_rn is None else min(first_rn, energy)
    return Outcome(labels, bound, optimal,
                   {"reductions": dict(reducer.counts), "rn_steps": reducer.counts["RN"]})
