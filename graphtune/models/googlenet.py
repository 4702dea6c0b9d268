"""GoogLeNet (torchvision ``googlenet``, without the training-only auxiliary classifiers).

Every conv is a torchvision ``BasicConv2d``: a bias-free conv, batch norm
(epsilon 0.001) and ReLU (``conv1.conv``, ``conv1.bn``). Stem ``conv1`` (7x7/2
to 64), ``maxpool1``, ``conv2`` (1x1), ``conv3`` (3x3 to 192), ``maxpool2``,
inception modules 3a-3b, ``maxpool3``, 4a-4e, ``maxpool4`` (2x2/2), 5a-5b,
``GlobalAveragePool``, ``Flatten`` and ``fc``; the max pools round up
(``ceil_mode``). An inception module concatenates four branches: 1x1
(``branch1``), 1x1 -> 3x3 (``branch2``), 1x1 -> 3x3 (``branch3``: torchvision
uses 3x3 where the paper has 5x5) and 3x3/1 max pool -> 1x1 (``branch4``).
57 convs, 1 dense, 6.62M parameters.

Examples
--------
>>> model = googlenet(image_size=32)
>>> ops = [n.op_type for n in model.graph.node]
>>> ops.count("Conv"), ops.count("Concat"), ops.count("MaxPool")
(57, 9, 13)
"""

from __future__ import annotations

import onnx

from .builder import GraphBuilder

__all__ = ["googlenet", "INCEPTIONS"]

INCEPTIONS: tuple[tuple[str, tuple[int, int, int, int, int, int]], ...] = (
    ("3a", (64, 96, 128, 16, 32, 32)), ("3b", (128, 128, 192, 32, 96, 64)),
    ("4a", (192, 96, 208, 16, 48, 64)), ("4b", (160, 112, 224, 24, 64, 64)),
    ("4c", (128, 128, 256, 24, 64, 64)), ("4d", (112, 144, 288, 32, 64, 64)),
    ("4e", (256, 160, 320, 32, 128, 128)),
    ("5a", (256, 160, 320, 32, 128, 128)), ("5b", (384, 192, 384, 48, 128, 128)),
)
"""Inception modules as (name, (1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5", pool projection))."""

_POOL_BEFORE = {"4a": ("maxpool3", 3), "5a": ("maxpool4", 2)}


def _basic(b: GraphBuilder, x: str, p: str, out: int, kernel: int, stride: int = 1,
           padding: int = 0) -> str:
    y = b.conv_bn(x, f"{p}.conv", f"{p}.bn", out, kernel, stride, padding, eps=1e-3)
    return b.relu(y, f"{p}.relu")


def _inception(b: GraphBuilder, x: str, p: str, widths: tuple[int, ...]) -> str:
    c1, c3r, c3, c5r, c5, proj = widths
    one = _basic(b, x, f"{p}.branch1", c1, 1)
    three = _basic(b, _basic(b, x, f"{p}.branch2.0", c3r, 1), f"{p}.branch2.1", c3, 3, 1, 1)
    five = _basic(b, _basic(b, x, f"{p}.branch3.0", c5r, 1), f"{p}.branch3.1", c5, 3, 1, 1)
    pool = _basic(b, b.max_pool(x, f"{p}.branch4.0", 3, 1, 1, ceil=True), f"{p}.branch4.1", proj, 1)
    return b.concat([one, three, five, pool], f"{p}.concat")


def googlenet(batch_size: int = 1, image_size: int = 224, fold_bn: bool = True) -> onnx.ModelProto:
    """GoogLeNet: 57 convs, 1 dense, 6.62M parameters.

    Examples
    --------
    >>> googlenet(image_size=32).graph.output[0].name
    'output'
    """
    b = GraphBuilder("googlenet", 8, batch_size, image_size, fold_bn=fold_bn)
    x = b.max_pool(_basic(b, b.input, "conv1", 64, 7, 2, 3), "maxpool1", 3, 2, ceil=True)
    x = _basic(b, _basic(b, x, "conv2", 64, 1), "conv3", 192, 3, 1, 1)
    x = b.max_pool(x, "maxpool2", 3, 2, ceil=True)
    for name, widths in INCEPTIONS:
        if name in _POOL_BEFORE:
            pool, kernel = _POOL_BEFORE[name]
            x = b.max_pool(x, pool, kernel, 2, ceil=True)
        x = _inception(b, x, f"inception{name}", widths)
    x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten")
    return b.model([b.dense(x, "fc", 1000, output="output")])
