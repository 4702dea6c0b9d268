"""VGG-16 and VGG-19 (configurations D and E, without batch norm, as torchvision).

Node names are torchvision's module indices: ``features.0`` (first conv),
``features.1`` (its ReLU), ``features.4`` (first max pool), ...,
``classifier.0``/``classifier.3``/``classifier.6`` (the three ``Gemm``; the
dropouts are identities at inference and omitted).

torchvision puts ``AdaptiveAvgPool2d((7, 7))`` before the classifier. At the
published 224x224 input the features are already 7x7, the pool is the
identity and is omitted, and the model is exactly torchvision's (138.36M /
143.67M parameters). At another ``image_size`` the features are
``(image_size // 32)`` squared and ``classifier.0`` takes ``512 * (image_size
// 32) ** 2`` inputs instead of 25088: the layer sizes follow the feature map
rather than resampling it, so small test sizes stay cheap.

Examples
--------
>>> model = vgg16(image_size=32)
>>> ops = [n.op_type for n in model.graph.node]
>>> ops.count("Conv"), ops.count("Gemm")
(13, 3)
"""

from __future__ import annotations

import onnx

from .builder import GraphBuilder

__all__ = ["vgg16", "vgg19", "CONFIGS"]

CONFIGS: dict[str, tuple[int | str, ...]] = {
    "vgg16": (64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
              512, 512, 512, "M", 512, 512, 512, "M"),
    "vgg19": (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M",
              512, 512, 512, 512, "M", 512, 512, 512, 512, "M"),
}
"""Output channels of each conv; ``"M"`` is a 2x2 stride-2 max pool."""


def _vgg(name: str, seed: int, batch_size: int, image_size: int) -> onnx.ModelProto:
    b = GraphBuilder(name, seed, batch_size, image_size)
    x = b.input
    index = 0
    for layer in CONFIGS[name]:
        if isinstance(layer, str):  # "M"
            x = b.max_pool(x, f"features.{index}", 2, 2)
            index += 1
        else:
            x = b.conv(x, f"features.{index}", layer, 3, 1, 1)
            x = b.relu(x, f"features.{index + 1}")
            index += 2
    x = b.flatten(x, "flatten")
    x = b.relu(b.dense(x, "classifier.0", 4096), "classifier.1")
    x = b.relu(b.dense(x, "classifier.3", 4096), "classifier.4")
    return b.model([b.dense(x, "classifier.6", 1000, gain=0.5, output="output")])


def vgg16(batch_size: int = 1, image_size: int = 224) -> onnx.ModelProto:
    """VGG-16 (13 convs, 3 dense), 138.36M parameters at 224x224.

    Examples
    --------
    >>> vgg16(image_size=32).graph.output[0].name
    'output'
    """
    return _vgg("vgg16", 16, batch_size, image_size)


def vgg19(batch_size: int = 1, image_size: int = 224) -> onnx.ModelProto:
    """VGG-19 (16 convs, 3 dense), 143.67M parameters at 224x224.

    Examples
    --------
    >>> sum(n.op_type == "Conv" for n in vgg19(image_size=32).graph.node)
    16
    """
    return _vgg("vgg19", 19, batch_size, image_size)
