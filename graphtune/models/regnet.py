"""RegNetY-800MF (torchvision ``regnet_y_800mf``): group convs of width 16 with squeeze-excitation.

Stem ``stem.0`` (3x3/2, 32 channels) + ReLU, then four stages of widths
(64, 144, 320, 784) and depths (1, 3, 8, 2), every stage starting with stride
2. Each block ``trunk_output.block{s}.block{s}-{i}`` is torchvision's
``ResBottleneckBlock``: ``f.a`` 1x1 + ReLU, ``f.b`` 3x3 group conv (16
channels per group) + ReLU, ``f.se`` squeeze-excitation (global average pool
-> ``fc1`` 1x1 -> ReLU -> ``fc2`` 1x1 -> Sigmoid -> Mul; ``fc1`` has a quarter
of the block's *input* channels), ``f.c`` 1x1, plus a ``proj`` 1x1 shortcut
when the shape changes, add and ReLU. 75 convs (14 group convs, 28 SE), 1 dense,
6.43M parameters.

Examples
--------
>>> model = regnet_y_800mf(image_size=32)
>>> sum(n.op_type == "Conv" for n in model.graph.node)
75
"""

from __future__ import annotations

import onnx

from .builder import GraphBuilder

__all__ = ["regnet_y_800mf", "STAGES", "GROUP_WIDTH"]

STAGES: tuple[tuple[int, int], ...] = ((64, 1), (144, 3), (320, 8), (784, 2))
"""(width, depth) per stage, as torchvision derives them from w_0=56, w_a=38.84, w_m=2.4."""

GROUP_WIDTH = 16
"""Channels per group of every block's 3x3 conv."""

SE_RATIO = 0.25
"""Squeeze channels per block input channel."""

RESIDUAL_GAIN = 0.3
"""He-gain of ``f.c``, the last conv of the residual branch."""


def _block(b: GraphBuilder, x: str, prefix: str, width: int, stride: int) -> str:
    cin = b.shape(x)[1]
    f = f"{prefix}.f"
    y = b.relu(b.conv(x, f"{f}.a.0", width, 1), f"{f}.a.2")
    y = b.relu(b.conv(y, f"{f}.b.0", width, 3, stride, 1, groups=width // GROUP_WIDTH), f"{f}.b.2")
    squeeze = b.global_avg_pool(y, f"{f}.se.avgpool")
    squeeze = b.relu(b.conv(squeeze, f"{f}.se.fc1", int(round(SE_RATIO * cin)), 1), f"{f}.se.activation")
    gate = b.sigmoid(b.conv(squeeze, f"{f}.se.fc2", width, 1), f"{f}.se.scale_activation")
    y = b.scale(y, gate, f"{f}.se.mul")
    y = b.conv(y, f"{f}.c.0", width, 1, gain=RESIDUAL_GAIN)
    if stride != 1 or cin != width:
        x = b.conv(x, f"{prefix}.proj.0", width, 1, stride, gain=0.7)
    return b.relu(b.add(x, y, f"{prefix}.add"), f"{prefix}.activation")


def regnet_y_800mf(batch_size: int = 1, image_size: int = 224) -> onnx.ModelProto:
    """RegNetY-800MF: 14 blocks with group width 16 and squeeze-excitation, 6.43M parameters.

    Examples
    --------
    >>> model = regnet_y_800mf(image_size=32)
    >>> [n.name for n in model.graph.node if n.op_type == "Sigmoid"][:1]
    ['trunk_output.block1.block1-0.f.se.scale_activation']
    """
    b = GraphBuilder("regnet_y_800mf", 800, batch_size, image_size)
    x = b.relu(b.conv(b.input, "stem.0", 32, 3, 2, 1), "stem.2")
    for stage, (width, depth) in enumerate(STAGES, start=1):
        for i in range(depth):
            x = _block(b, x, f"trunk_output.block{stage}.block{stage}-{i}", width, 2 if i == 0 else 1)
    x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten")
    return b.model([b.dense(x, "fc", 1000, output="output")])
