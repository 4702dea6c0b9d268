"""Read a model the way a :class:`~graphtune.config.Config` names it, and check knobs with x86's rules.

:meth:`Config.check <graphtune.config.Config.check>` uses these two to
compare a config with a model; :mod:`graphtune.config` itself stays free of
TVM (it compares ``(name, op, workload)`` lists, :meth:`Config.check_nodes`).

Examples
--------
>>> from graphtune import models
>>> nodes, fingerprint = model_nodes(models.get("resnet18", image_size=32))
>>> nodes[0][:2], fingerprint
(('conv1', 'conv2d'), None)
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from . import frontend, x86
from .config import ModelNode, graph_workload
from .ops import NODE_OPS, Op

__all__ = ["model_nodes", "x86_knobs"]


def model_nodes(model: Any) -> tuple[list[ModelNode], str | None]:
    """``(name, op, workload)`` of every layout node of ``model``, and its fingerprint if known.

    Parameters
    ----------
    model : LayoutGraph, list of LayoutOp, tvm.IRModule, onnx.ModelProto or path
        A LayoutGraph also lists its joins and gives its fingerprint.
    """
    if hasattr(model, "fingerprint") and hasattr(model, "nodes"):
        nodes = [(name, model.op(name), graph_workload(model, name))
                 for name in model.nodes if model.op(name) in NODE_OPS]
        return nodes, model.fingerprint()
    if isinstance(model, Iterable) and not isinstance(model, (str, bytes, os.PathLike)) \
            and not hasattr(model, "graph") and not hasattr(model, "functions"):
        return [(op.name, op.op, op.workload) for op in model], None
    return [(op.name, op.op, op.workload)
            for op in frontend.layout_ops(frontend.import_model(model))], None


def x86_knobs(op: Op, workload: dict, knobs: dict) -> tuple:
    """Validate ``knobs`` for the x86 kernel of ``op``; return their ``(in_layout, out_layout)``.

    Examples
    --------
    >>> x86_knobs(Op.DENSE, {"data": [1, 8], "weight": [4, 8], "dtype": "float32"},
    ...           {"oc_bn": 4, "k_bn": 8})
    ('NC', 'NC')
    """
    return x86.layouts_of(workload, knobs, op=op)
