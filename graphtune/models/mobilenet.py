"""MobileNet-V2 (torchvision ``mobilenet_v2``, width 1.0).

Inverted residual blocks: 1x1 expansion -> 3x3 depthwise (a ``Conv`` with
``group == channels``) -> 1x1 linear projection, ReLU6 as ``Clip(0, 6)``,
batch norm folded. Node names follow torchvision's modules: ``features.0.0``
(stem conv), ``features.2.conv.0.0`` (expansion), ``features.2.conv.1.0``
(depthwise), ``features.2.conv.2`` (projection), ``features.18.0`` (last 1x1
to 1280 channels), ``classifier.1`` (the ``Gemm``; ``classifier.0`` is a
dropout). 52 convs (17 of them depthwise), 1 dense, 3.50M parameters.

Examples
--------
>>> model = mobilenet_v2(image_size=32)
>>> groups = [a.i for n in model.graph.node for a in n.attribute if a.name == "group"]
>>> len(groups), sum(g > 1 for g in groups)
(52, 17)
"""

from __future__ import annotations

import onnx

from .builder import GraphBuilder

__all__ = ["mobilenet_v2", "SETTINGS", "RESIDUAL_GAIN"]

SETTINGS: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
)
"""Inverted residual stages as (expansion t, output channels c, repeats n, first stride s)."""

RESIDUAL_GAIN = 0.5
"""He-gain of the projection conv of blocks with a residual connection."""


def _inverted_residual(b: GraphBuilder, x: str, index: int, expand: int, out: int,
                       stride: int) -> str:
    p = f"features.{index}.conv"
    cin = b.shape(x)[1]
    hidden = cin * expand
    residual = stride == 1 and cin == out
    y, layer = x, 0
    if expand != 1:
        y = b.relu6(b.conv(y, f"{p}.0.0", hidden, 1), f"{p}.0.2")
        layer = 1
    y = b.relu6(b.conv(y, f"{p}.{layer}.0", hidden, 3, stride, 1, groups=hidden), f"{p}.{layer}.2")
    y = b.conv(y, f"{p}.{layer + 1}", out, 1, gain=RESIDUAL_GAIN if residual else 0.7)
    return b.add(x, y, f"features.{index}.add") if residual else y


def mobilenet_v2(batch_size: int = 1, image_size: int = 224) -> onnx.ModelProto:
    """MobileNet-V2: 52 convs (17 depthwise), 1 dense, 3.50M parameters.

    Examples
    --------
    >>> mobilenet_v2(image_size=32).graph.output[0].name
    'output'
    """
    b = GraphBuilder("mobilenet_v2", 2, batch_size, image_size)
    x = b.relu6(b.conv(b.input, "features.0.0", 32, 3, 2, 1), "features.0.2")
    index = 1
    for expand, out, repeats, stride in SETTINGS:
        for i in range(repeats):
            x = _inverted_residual(b, x, index, expand, out, stride if i == 0 else 1)
            index += 1
    x = b.relu6(b.conv(x, f"features.{index}.0", 1280, 1), f"features.{index}.2")
    x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten")
    return b.model([b.dense(x, "classifier.1", 1000, output="output")])
