"""Baseline configs and solutions, to compare graph tuning with (and to compile without tuning).

- :func:`uniform`: every layout node the same channel block, default knobs;
- :func:`random`: a random candidate per node (many layout transforms);
- :func:`kernel_best_solution`: every node its fastest kernel, transforms
  ignored (the old "history best").

``uniform`` and ``random`` are ``Config.uniform`` and ``Config.random`` (which
take their knobs from :mod:`graphtune.bind`); ``graphtune.pipeline.kernel_best_solution``
is this module's.

Examples
--------
>>> from graphtune import models
>>> cfg = uniform(models.get("resnet18", image_size=32), block=8)
>>> cfg.nodes["layer1.0.conv1"].in_layout, cfg.solution
('NCHW8c', {'method': 'uniform', 'block': 8})
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import networkx as nx

from .config import Config
from .graph import LayoutGraph
from .ops import Op
from .solve import Solution

__all__ = ["uniform", "random", "kernel_best_solution"]


def uniform(model: Any, block: int = 16, target: Any = None) -> Config:
    """Config giving every layout node the same channel block and default knobs: :meth:`Config.uniform`
    (example: the module's)."""
    return Config.uniform(model, block, target)


def random(model: Any, seed: int = 0, target: Any = None) -> Config:
    """Config picking a random candidate per node (many layout transforms): :meth:`Config.random`.

    Examples
    --------
    >>> from graphtune import models
    >>> random(models.get("resnet18", image_size=32), seed=1).solution
    {'method': 'random', 'seed': 1}
    """
    return Config.random(model, seed, target)


def kernel_best_solution(graph: LayoutGraph) -> Solution:
    """Give every node its fastest kernel, ignoring transforms (the old "history best").

    This is what per-op tuning without a graph tuner picks; each join then
    takes the layout most of its producers chose. Benchmarks compile it to
    show what graph-level tuning adds. ``lower_bound`` is the sum of every
    node's cheapest candidate, a valid bound on any assignment.

    Examples
    --------
    >>> g = LayoutGraph()
    >>> g.add_node("a", costs=[1.0, 2.0], layouts=["NCHW8c", "NCHW16c"])
    >>> g.add_node("b", costs=[3.0, 1.0], layouts=["NCHW8c", "NCHW16c"])
    >>> g.add_edge("a", "b", shape=[1, 16, 4, 4])
    >>> g.fill_edge_costs(lambda shape, src, dst: 5.0)
    >>> sol = kernel_best_solution(g)
    >>> sol.assignment, sol.energy
    ({'a': 0, 'b': 1}, 7.0)
    """
    choice: dict[str, int] = {}
    for node in nx.topological_sort(graph.nx):
        cands = graph.candidates(node)
        if graph.op(node) != Op.JOIN:
            choice[node] = min(range(len(cands)), key=lambda i: cands[i].cost)
            continue
        votes = Counter(graph.candidates(p)[choice[p]].out_layout
                        for p in graph.nx.predecessors(node))
        choice[node] = max(range(len(cands)), key=lambda i: votes[cands[i].in_layout])
    bound = sum(min(c.cost for c in graph.candidates(n)) for n in graph.nodes)
    energy = graph.energy(choice)
    return Solution(choice, energy, min(bound, energy), False, "kernel-best", 0.0)
