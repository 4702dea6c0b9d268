"""EfficientNet-B0 (torchvision ``efficientnet_b0``).

Stem ``features.0`` (3x3/2 to 32 channels, SiLU), seven stages of MBConv
blocks ``features.{1..7}.{i}.block`` — 1x1 expansion (not in stage 1), kxk
depthwise, squeeze-and-excitation (``SiLU`` / ``Sigmoid``, a quarter of the
block's input channels), 1x1 linear projection, residual add when the shape is
kept — then ``features.8`` (1x1 to 1280), ``GlobalAveragePool``, ``Flatten``,
the dropout as an ``Identity`` node (``classifier.0``) and the ``Gemm``
``classifier.1``. SiLU is ``Sigmoid`` + ``Mul``, as exported at opset 13. With
``fold_bn=False`` every conv is followed by a ``BatchNormalization``.
81 convs (16 depthwise, 32 in the squeeze-and-excitation blocks), 1 dense,
5.29M parameters.

Examples
--------
>>> model = efficientnet_b0(image_size=32)
>>> ops = [n.op_type for n in model.graph.node]
>>> ops.count("Conv"), ops.count("Gemm"), ops.count("Identity")
(81, 1, 1)
"""

from __future__ import annotations

import onnx

from .builder import GraphBuilder

__all__ = ["efficientnet_b0", "STAGES"]

STAGES: tuple[tuple[int, int, int, int, int], ...] = (
    (1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
    (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1),
)
"""Stages as (expansion, kernel, first stride, output channels, blocks)."""


def _mbconv(b: GraphBuilder, x: str, p: str, expand: int, kernel: int, stride: int,
            out: int) -> str:
    cin = b.shape(x)[1]
    hidden = cin * expand
    residual = stride == 1 and cin == out
    y, j = x, 0
    if expand != 1:
        y = b.silu(b.conv_bn(y, f"{p}.block.0.0", f"{p}.block.0.1", hidden, 1), f"{p}.block.0.2")
        j = 1
    y = b.conv_bn(y, f"{p}.block.{j}.0", f"{p}.block.{j}.1", hidden, kernel, stride, kernel // 2,
                  groups=hidden)
    y = b.silu(y, f"{p}.block.{j}.2")
    y = b.squeeze_excitation(y, f"{p}.block.{j + 1}", max(1, cin // 4), "silu", "sigmoid")
    y = b.conv_bn(y, f"{p}.block.{j + 2}.0", f"{p}.block.{j + 2}.1", out, 1,
                  gain=0.5 if residual else 0.7)
    return b.add(x, y, f"{p}.add") if residual else y


def efficientnet_b0(batch_size: int = 1, image_size: int = 224,
                    fold_bn: bool = True) -> onnx.ModelProto:
    """EfficientNet-B0: 81 convs, 1 dense, 5.29M parameters.

    Examples
    --------
    >>> efficientnet_b0(image_size=32).graph.output[0].name
    'output'
    """
    b = GraphBuilder("efficientnet_b0", 6, batch_size, image_size, fold_bn=fold_bn)
    x = b.silu(b.conv_bn(b.input, "features.0.0", "features.0.1", 32, 3, 2, 1), "features.0.2")
    for s, (expand, kernel, stride, out, blocks) in enumerate(STAGES, start=1):
        for i in range(blocks):
            x = _mbconv(b, x, f"features.{s}.{i}", expand, kernel, stride if i == 0 else 1, out)
    x = b.silu(b.conv_bn(x, "features.8.0", "features.8.1", 1280, 1), "features.8.2")
    x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten")
    x = b.unary("Identity", x, "classifier.0")
    return b.model([b.dense(x, "classifier.1", 1000, output="output")])
