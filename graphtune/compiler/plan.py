"""What the compiler does with one layout node (:class:`NodePlan`), and how its kernel is tagged
(:data:`NODE_ATTR`).

Examples
--------
>>> NODE_ATTR
'graphtune.node'
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["NodePlan", "NODE_ATTR"]

NODE_ATTR = "graphtune.node"
"""PrimFunc attribute naming the layout node whose kernel the function computes."""


@dataclass(frozen=True)
class NodePlan:
    """What to do with one layout node: its name, workload, knobs and layouts (and, for an int8
    conv, its quantization: ``LayoutOp.quant``).

    Examples
    --------
    >>> NodePlan("conv1", "conv2d", {}, {"ic_bn": 3, "oc_bn": 16}, "NCHW3c", "NCHW16c").out_layout
    'NCHW16c'
    """

    name: str
    op: str
    workload: dict
    knobs: dict
    in_layout: str
    out_layout: str
    quant: dict | None = field(default=None, hash=False, compare=False)
