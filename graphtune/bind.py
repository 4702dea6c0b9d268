"""What a :class:`~graphtune.config.Config` needs from TVM, as plain data.

:mod:`graphtune.config` is a TVM-free file format: :meth:`Config.check
<graphtune.config.Config.check>`, :meth:`Config.uniform
<graphtune.config.Config.uniform>` and :meth:`Config.random
<graphtune.config.Config.random>` import this module when called. It reads a
model's layout nodes through the frontend (:func:`model_nodes`), checks knobs
with x86's rules (:func:`x86_knobs`) and picks the baselines' knobs per node
(:func:`uniform_nodes`, :func:`random_nodes`), and answers with what a config
file stores, never a ``Config``: this module does not import the config.

Examples
--------
>>> from graphtune import models
>>> nodes = model_nodes(models.get("resnet18", image_size=32))
>>> nodes[0][:2]
('conv1', 'conv2d')
"""

from __future__ import annotations

import os
import random as _random
from collections.abc import Iterable
from typing import Any, Callable

from . import frontend, x86
from .errors import ConfigError
from .frontend.cut import PARTITION_KEY, import_tvm_part
from .ops import LAYOUT_OPS, ModelNode, Op

__all__ = ["model_nodes", "x86_knobs", "uniform_nodes", "random_nodes"]


def model_nodes(model: Any) -> list[ModelNode]:
    """``(name, op, workload)`` of every layout node of ``model``, read by the frontend.

    Parameters
    ----------
    model : list of LayoutOp, tvm.IRModule, onnx.ModelProto or path
        A list of :class:`~graphtune.frontend.LayoutOp` is taken as the model's nodes.
    """
    if isinstance(model, Iterable) and not isinstance(model, (str, bytes, os.PathLike)) \
            and not hasattr(model, "graph") and not hasattr(model, "functions"):
        return [(op.name, op.op, op.workload) for op in model]
    return [(op.name, op.op, op.workload) for op in _layout_ops(model)[0]]


def _layout_ops(model: Any) -> tuple[list, dict | None]:
    """The frontend's layout ops of ``model`` and None; for a model TVM imports only in part
    (``docs/partition.md``), those of its TVM part and the partition's record: the nodes
    :func:`graphtune.tune` tunes and :func:`graphtune.compile` compiles."""
    mod, part = import_tvm_part(model)
    return frontend.layout_ops(mod), None if part is None else part.record()


def x86_knobs(op: Op, workload: dict, knobs: dict) -> tuple:
    """Validate ``knobs`` for the x86 kernel of ``op``; return their ``(in_layout, out_layout)``.

    Examples
    --------
    >>> x86_knobs(Op.DENSE, {"data": [1, 8], "weight": [4, 8], "dtype": "float32"},
    ...           {"oc_bn": 4, "k_bn": 8})
    ('NC', 'NC')
    """
    return x86.layouts_of(workload, knobs, op=op)


def uniform_nodes(model: Any, block: int = 16, target: Any = None) -> dict:
    """Every layout node with the same channel block and default knobs (:meth:`Config.uniform
    <graphtune.config.Config.uniform>`), as the ``target``, ``model`` and ``nodes`` of a config
    document.

    Examples
    --------
    >>> from graphtune import models
    >>> parts = uniform_nodes(models.get("resnet18", image_size=32), block=8)
    >>> parts["nodes"]["layer1.0.conv1"]["in_layout"], sorted(parts)
    ('NCHW8c', ['model', 'nodes', 'target'])
    """
    if not isinstance(block, int) or isinstance(block, bool) or block < 1:
        raise ConfigError(f"block: expected a positive int, got {block!r}")
    return _per_node(model, target, lambda op, workload, tgt: x86.default_knobs(
        workload, block=block, target=tgt, op=op))


def random_nodes(model: Any, seed: int = 0, target: Any = None) -> dict:
    """A random candidate of :func:`graphtune.x86.candidates` per layout node
    (:meth:`Config.random <graphtune.config.Config.random>`), as :func:`uniform_nodes` gives them.

    Examples
    --------
    >>> from graphtune import models
    >>> model = models.get("resnet18", image_size=32)
    >>> random_nodes(model, seed=1) == random_nodes(model, seed=1)
    True
    """
    rng = _random.Random(seed)
    return _per_node(model, target,
                     lambda op, workload, tgt: rng.choice(x86.candidates(workload, tgt, op=op)))


def _per_node(model: Any, target: Any, choose: Callable[[Op, dict, Any], dict]) -> dict:
    """Config document parts with ``choose(op, workload, target)`` knobs for every layout node
    x86 can run; for a model TVM imports only in part, the nodes of its TVM part, and the
    partition recorded in the ``model`` part (as :func:`graphtune.tune` records it, without the
    ONNX Runtime part's time: nothing is measured)."""
    tgt = x86.host_target(target)
    nodes = {}
    ops, partition = _layout_ops(model)
    for op in ops:
        if op.op not in LAYOUT_OPS:
            continue
        knobs = choose(Op(op.op), op.workload, tgt)
        in_layout, out_layout = x86.layouts_of(op.workload, knobs, op=op.op)
        nodes[op.name] = {"op": op.op, "workload": op.workload, "in_layout": in_layout,
                          "out_layout": out_layout, "knobs": knobs}
    about: dict[str, Any] = {"name": _model_name(model), "fingerprint": None}
    if partition is not None:
        about[PARTITION_KEY] = partition
    return {"target": x86.target_key(tgt), "model": about, "nodes": nodes}


def _model_name(model: Any) -> str | None:
    """Best-effort human name of a model argument (file stem or graph name)."""
    if isinstance(model, (str, os.PathLike)):
        base = os.path.basename(os.fspath(model))
        return base[:-5] if base.endswith(".onnx") else base
    graph = getattr(model, "graph", None)
    return getattr(graph, "name", None) or None
