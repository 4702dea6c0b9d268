"""Baseline configs and solutions, to compare graph tuning with (and to compile without tuning).

- :func:`uniform`: every layout node the same channel block, default knobs;
- :func:`random`: a random candidate per node (many layout transforms);
- :func:`kernel_best_solution`: every node its fastest kernel, transforms
  ignored (the old "history best").

``Config.uniform``, ``Config.random`` and
``graphtune.pipeline.kernel_best_solution`` are these functions.

Examples
--------
>>> from graphtune import models
>>> cfg = uniform(models.get("resnet18", image_size=32), block=8)
>>> cfg.nodes["layer1.0.conv1"].in_layout, cfg.solution
('NCHW8c', {'method': 'uniform', 'block': 8})
"""

from __future__ import annotations

import os
import random as _random
from collections import Counter
from typing import Any, Callable

import networkx as nx

from . import frontend, x86
from .config import Config, NodeConfig, _plain
from .errors import ConfigError
from .graph import LayoutGraph
from .ops import LAYOUT_OPS, Op
from .solve import Solution

__all__ = ["uniform", "random", "kernel_best_solution"]


def uniform(model: Any, block: int = 16, target: Any = None) -> Config:
    """Config giving every layout node the same channel block and default knobs.

    A node whose channel counts ``block`` does not divide gets the divisor of
    its channels nearest to ``block`` instead (the stem conv's 3 input
    channels get block 3; see :func:`graphtune.x86.default_knobs`). Joins are
    left to the compiler, which keeps their inputs' common block.

    Parameters
    ----------
    model : onnx.ModelProto, str, path or tvm.IRModule
        The model (anything :func:`graphtune.frontend.import_model` accepts).
    block : int, default 16
        The channel block ``x`` of ``NCHW{x}c``.
    target : tvm.target.Target or dict, optional
        Target to tune for (default: this host, :func:`graphtune.x86.host_target`).

    Examples
    --------
    >>> from graphtune import models
    >>> cfg = uniform(models.get("resnet18", image_size=32))
    >>> cfg.nodes["conv1"].in_layout, cfg.nodes["conv1"].out_layout
    ('NCHW3c', 'NCHW16c')
    """
    if not isinstance(block, int) or isinstance(block, bool) or block < 1:
        raise ConfigError(f"block: expected a positive int, got {block!r}")
    return _per_node(
        model, target, {"method": "uniform", "block": block},
        lambda op, workload, tgt: x86.default_knobs(workload, block=block, target=tgt, op=op))


def random(model: Any, seed: int = 0, target: Any = None) -> Config:
    """Config picking a random candidate of :func:`graphtune.x86.candidates` per node.

    Neighbouring nodes then rarely agree on a layout, so the compiled model
    is full of layout transforms: a contrast for benchmarks and a stress
    test for the compiler.

    Parameters
    ----------
    model : onnx.ModelProto, str, path or tvm.IRModule
        The model.
    seed : int, default 0
        Seed of the random choices.
    target : tvm.target.Target or dict, optional
        Target whose candidate space is sampled (default: this host).

    Examples
    --------
    >>> from graphtune import models
    >>> random(models.get("resnet18", image_size=32), seed=1).solution
    {'method': 'random', 'seed': 1}
    """
    rng = _random.Random(seed)
    return _per_node(
        model, target, {"method": "random", "seed": seed},
        lambda op, workload, tgt: rng.choice(x86.candidates(workload, tgt, op=op)))


def _per_node(model: Any, target: Any, solution: dict, choose: Callable[[Op, dict, Any], dict]) -> Config:
    """Config with ``choose(op, workload, target)`` knobs for every layout node x86 can run."""
    tgt = x86.host_target(target)
    nodes = {}
    for op in frontend.layout_ops(frontend.import_model(model)):
        if op.op not in LAYOUT_OPS:
            continue
        knobs = choose(Op(op.op), op.workload, tgt)
        in_layout, out_layout = x86.layouts_of(op.workload, knobs, op=op.op)
        nodes[op.name] = NodeConfig(op.op, _plain(op.workload), in_layout, out_layout, _plain(knobs))
    return Config(nodes, target=x86.target_key(tgt),
                  model={"name": _model_name(model), "fingerprint": None}, solution=solution)


def _model_name(model: Any) -> str | None:
    """Best-effort human name of a model argument (file stem or graph name)."""
    if isinstance(model, (str, os.PathLike)):
        base = os.path.basename(os.fspath(model))
        return base[:-5] if base.endswith(".onnx") else base
    graph = getattr(model, "graph", None)
    return getattr(graph, "name", None) or None


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
