"""MobileNet-V3-Large (torchvision ``mobilenet_v3_large``, width 1.0).

Stem ``features.0`` (3x3/2 to 16 channels, hardswish), 15 inverted residual
blocks ``features.{1..15}.block`` (1x1 expansion when it widens, kxk
depthwise, squeeze-and-excitation with ``ReLU`` / hardsigmoid in some, 1x1
linear projection, residual add when the shape is kept), ``features.16``
(1x1 to 960, hardswish), ``GlobalAveragePool``, ``Flatten`` and the classifier
``Gemm`` ``classifier.0`` (to 1280) -> hardswish -> ``Gemm`` ``classifier.3``.
Hardswish is ``HardSigmoid`` + ``Mul`` and hardsigmoid ``HardSigmoid``, as
exported at opset 13. 62 convs (15 depthwise, 16 in the squeeze-and-excitation
blocks), 2 dense, 5.48M parameters.

Examples
--------
>>> model = mobilenet_v3_large(image_size=32)
>>> ops = [n.op_type for n in model.graph.node]
>>> ops.count("Conv"), ops.count("Gemm"), ops.count("HardSigmoid")
(62, 2, 29)
"""

from __future__ import annotations

import onnx

from .builder import GraphBuilder

__all__ = ["mobilenet_v3_large", "BLOCKS", "make_divisible"]

BLOCKS: tuple[tuple[int, int, int, bool, bool, int], ...] = (
    (3, 16, 16, False, False, 1), (3, 64, 24, False, False, 2), (3, 72, 24, False, False, 1),
    (5, 72, 40, True, False, 2), (5, 120, 40, True, False, 1), (5, 120, 40, True, False, 1),
    (3, 240, 80, False, True, 2), (3, 200, 80, False, True, 1), (3, 184, 80, False, True, 1),
    (3, 184, 80, False, True, 1), (3, 480, 112, True, True, 1), (3, 672, 112, True, True, 1),
    (5, 672, 160, True, True, 2), (5, 960, 160, True, True, 1), (5, 960, 160, True, True, 1),
)
"""Blocks as (kernel, expanded channels, output channels, squeeze-excitation, hardswish, stride)."""


def make_divisible(value: float, divisor: int = 8) -> int:
    """torchvision's ``_make_divisible``: round to a multiple of ``divisor``, at most 10% down.

    Examples
    --------
    >>> make_divisible(72 // 4), make_divisible(960 // 4)
    (24, 240)
    """
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _block(b: GraphBuilder, x: str, p: str, kernel: int, hidden: int, out: int, se: bool,
           hswish: bool, stride: int) -> str:
    act = b.hardswish if hswish else b.relu
    cin = b.shape(x)[1]
    residual = stride == 1 and cin == out
    y, j = x, 0
    if hidden != cin:
        y = act(b.conv_bn(y, f"{p}.block.0.0", f"{p}.block.0.1", hidden, 1), f"{p}.block.0.2")
        j = 1
    y = b.conv_bn(y, f"{p}.block.{j}.0", f"{p}.block.{j}.1", hidden, kernel, stride, kernel // 2,
                  groups=hidden)
    y = act(y, f"{p}.block.{j}.2")
    if se:
        j += 1
        y = b.squeeze_excitation(y, f"{p}.block.{j}", make_divisible(hidden // 4), "relu",
                                 "hardsigmoid")
    y = b.conv_bn(y, f"{p}.block.{j + 1}.0", f"{p}.block.{j + 1}.1", out, 1,
                  gain=0.5 if residual else 0.7)
    return b.add(x, y, f"{p}.add") if residual else y


def mobilenet_v3_large(batch_size: int = 1, image_size: int = 224,
                       fold_bn: bool = True) -> onnx.ModelProto:
    """MobileNet-V3-Large: 62 convs, 2 dense, 5.48M parameters.

    Examples
    --------
    >>> mobilenet_v3_large(image_size=32).graph.output[0].name
    'output'
    """
    b = GraphBuilder("mobilenet_v3_large", 7, batch_size, image_size, fold_bn=fold_bn)
    x = b.hardswish(b.conv_bn(b.input, "features.0.0", "features.0.1", 16, 3, 2, 1),
                    "features.0.2")
    for i, spec in enumerate(BLOCKS, start=1):
        x = _block(b, x, f"features.{i}", *spec)
    x = b.hardswish(b.conv_bn(x, "features.16.0", "features.16.1", 960, 1), "features.16.2")
    x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten")
    x = b.hardswish(b.dense(x, "classifier.0", 1280), "classifier.1")
    return b.model([b.dense(x, "classifier.3", 1000, output="output")])
