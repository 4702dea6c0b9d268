"""A small U-Net for segmentation: base 32 channels, 4 levels, bilinear upsampling.

The encoder is ``inc`` and ``down1``-``down3`` (2x2 max pool, then a double
conv) with 32, 64, 128 and 256 channels; the decoder ``up1``-``up3`` upsamples
by 2 (``Resize``, bilinear, ``align_corners``), concatenates the encoder's
tensor of that level (skip first) and runs a double conv down to that level's
channels; ``outc`` is a 1x1 conv to :data:`CLASSES` classes. A double conv is
two (3x3 bias-free conv, batch norm, ReLU), named like the common PyTorch
U-Net (``down1.conv.0``, ``.1``, ``.2``, ``.3``...). Output ``[N, 2, H, W]``;
``H`` and ``W`` must be multiples of 8. 15 convs, 1.95M parameters
(1,948,322 with batch norm unfolded, 1,946,914 folded).

Examples
--------
>>> model = unet(image_size=16)
>>> ops = [n.op_type for n in model.graph.node]
>>> ops.count("Conv"), ops.count("Resize"), ops.count("Concat")
(15, 3, 3)
"""

from __future__ import annotations

import onnx

from ..errors import ModelError
from .builder import GraphBuilder

__all__ = ["unet", "CHANNELS", "CLASSES"]

CHANNELS = (32, 64, 128, 256)
"""Channels of the four levels, finest first."""

CLASSES = 2
"""Output classes (channels of ``outc``)."""


def _double(b: GraphBuilder, x: str, p: str, out: int) -> str:
    y = b.relu(b.conv_bn(x, f"{p}.0", f"{p}.1", out, 3, 1, 1), f"{p}.2")
    return b.relu(b.conv_bn(y, f"{p}.3", f"{p}.4", out, 3, 1, 1), f"{p}.5")


def unet(batch_size: int = 1, image_size: int = 256, fold_bn: bool = True) -> onnx.ModelProto:
    """The small U-Net: 15 convs, 1.95M parameters, output ``[N, 2, H, W]``.

    Examples
    --------
    >>> [d.dim_value for d in unet(image_size=16).graph.output[0].type.tensor_type.shape.dim]
    [1, 2, 16, 16]
    """
    levels = len(CHANNELS) - 1
    if image_size % 2 ** levels:
        raise ModelError(f"unet: image_size {image_size} must be a multiple of {2 ** levels}")
    b = GraphBuilder("unet", 9, batch_size, image_size, fold_bn=fold_bn)
    skips = [_double(b, b.input, "inc.conv", CHANNELS[0])]
    for i, out in enumerate(CHANNELS[1:], start=1):
        pooled = b.max_pool(skips[-1], f"down{i}.pool", 2, 2)
        skips.append(_double(b, pooled, f"down{i}.conv", out))
    x = skips.pop()
    for i, skip in enumerate(reversed(skips), start=1):
        x = b.concat([skip, b.resize(x, f"up{i}.up", 2)], f"up{i}.concat")
        x = _double(b, x, f"up{i}.conv", b.shape(skip)[1])
    return b.model([b.conv(x, "outc", CLASSES, 1, gain=0.7, output="output")])
