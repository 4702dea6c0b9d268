"""The numeric form every solver works on: unary cost vectors and pairwise matrices.

A :class:`Problem` is a pairwise energy over variables ``0..n-1``
(``E(x) = offset + sum_i unary[i][x_i] + sum_(i<j) pairs[i, j][x_i, x_j]``),
built from a validated :class:`~graphtune.graph.LayoutGraph`: kernel costs
become unary vectors, each edge's transform matrix a pairwise term, with
``u -> v`` and ``v -> u`` merged into one undirected term.

Examples
--------
>>> from graphtune.graph import LayoutGraph
>>> g = LayoutGraph()
>>> g.add_node("a", costs=[1.0, 2.0]); g.add_node("b", costs=[0.0, 0.0])
>>> g.add_edge("a", "b", cost=[[0.0, 4.0], [4.0, 0.0]])
>>> p = Problem.from_graph(g)
>>> p.energy([0, 0]), p.domain_sizes()
(1.0, [2, 2])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..graph import LayoutGraph

__all__ = ["Problem", "separable"]


def separable(matrix: np.ndarray) -> bool:
    """True when ``matrix[s, r] == a[s] + b[r]``: the edge adds nothing pairwise.

    Examples
    --------
    >>> separable(np.array([[1.0, 2.0], [3.0, 4.0]])), separable(np.eye(2))
    (True, False)
    """
    resid = matrix - matrix[:, :1] - matrix[:1, :] + matrix[0, 0]
    return bool(np.all(np.abs(resid) <= 1e-12 * (1.0 + np.abs(matrix).max())))


@dataclass
class Problem:
    """Pairwise energy minimisation problem on integer-indexed variables.

    Parameters
    ----------
    names : list of str
        Variable names (node names of the graph).
    unary : list of ndarray
        ``unary[i][s]``: cost of state ``s`` of variable ``i``.
    pairs : dict
        ``(i, j) -> matrix`` with ``i < j``, shape ``(len(unary[i]), len(unary[j]))``.
    offset : float
        Constant added to every energy.

    Examples
    --------
    >>> p = Problem(["x"], [np.array([2.0, 1.0])], {})
    >>> p.energy([1])
    1.0
    """

    names: list[str]
    unary: list[np.ndarray]
    pairs: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    offset: float = 0.0

    @classmethod
    def from_graph(cls, graph: LayoutGraph) -> "Problem":
        """Validate ``graph`` and convert it.

        Examples
        --------
        >>> from graphtune.graph import LayoutGraph
        >>> g = LayoutGraph(); g.add_node("a", costs=[3.0])
        >>> Problem.from_graph(g).unary[0].tolist()
        [3.0]
        """
        graph.validate()
        names = graph.nodes
        index = {n: i for i, n in enumerate(names)}
        unary = [np.array([c.cost for c in graph.candidates(n)], dtype=np.float64) for n in names]
        pairs: dict[tuple[int, int], np.ndarray] = {}
        for u, v in graph.edges:
            i, j = index[u], index[v]
            matrix = np.asarray(graph.edge_cost(u, v), dtype=np.float64)
            if i > j:
                i, j, matrix = j, i, matrix.T
            pairs[i, j] = pairs[i, j] + matrix if (i, j) in pairs else matrix.copy()
        return cls(names, unary, pairs)

    def __len__(self) -> int:
        return len(self.unary)

    def domain_sizes(self) -> list[int]:
        """Number of states of each variable."""
        return [len(u) for u in self.unary]

    def adjacency(self) -> list[set[int]]:
        """Neighbour sets of the interaction graph."""
        adj: list[set[int]] = [set() for _ in self.unary]
        for i, j in self.pairs:
            adj[i].add(j)
            adj[j].add(i)
        return adj

    def energy(self, labels: Sequence[int]) -> float:
        """Energy of a full labelling (sequence of state indices).

        Examples
        --------
        >>> p = Problem(["x", "y"], [np.zeros(2), np.zeros(2)], {(0, 1): np.eye(2)})
        >>> p.energy([1, 1])
        1.0
        """
        total = self.offset + sum(float(u[s]) for u, s in zip(self.unary, labels))
        return total + sum(float(m[labels[i], labels[j]]) for (i, j), m in self.pairs.items())

    def trivial_bound(self) -> float:
        """``offset + sum of unary minima + sum of pairwise minima``: a valid lower bound.

        Examples
        --------
        >>> Problem(["x"], [np.array([2.0, 1.0])], {}).trivial_bound()
        1.0
        """
        return (self.offset + sum(float(u.min()) for u in self.unary)
                + sum(float(m.min()) for m in self.pairs.values()))
