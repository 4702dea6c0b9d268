"""DenseNet-121 and DenseNet-201 (torchvision: growth rate 32, bottleneck width 4 x 32).

DenseNet is pre-activation: each dense layer is ``norm1 -> relu1 -> conv1 (1x1)
-> norm2 -> relu2 -> conv2 (3x3)``. ``norm2`` (and the stem's ``norm0``) follow
a conv and are folded into it; ``norm1``, the transitions' ``norm`` and the
final ``norm5`` act on a channel concat before a ReLU and cannot be folded,
so they are per-channel ``Mul`` + ``Add`` (:meth:`GraphBuilder.affine`) named
after the batch norm (``features.denseblock1.denselayer1.norm1``), or with
``fold_bn=False`` the ``BatchNormalization`` nodes a PyTorch export keeps. ``conv2``
and the transition convs have no bias, as in torchvision. Every dense layer
ends with a ``Concat`` of the block input and all layer outputs so far
(``features.denseblock1.denselayer1.concat``).

Examples
--------
>>> model = densenet121(image_size=32)
>>> sum(n.op_type == "Conv" for n in model.graph.node)
120
"""

from __future__ import annotations

import onnx

from .builder import GraphBuilder

__all__ = ["densenet121", "densenet201"]

_GROWTH = 32
_BOTTLENECK = 4


def _densenet(name: str, seed: int, blocks: tuple[int, ...], batch_size: int,
              image_size: int, fold_bn: bool) -> onnx.ModelProto:
    b = GraphBuilder(name, seed, batch_size, image_size, fold_bn=fold_bn)
    x = b.relu(b.conv(b.input, "features.conv0", 64, 7, 2, 3), "features.relu0")
    x = b.max_pool(x, "features.pool0", 3, 2, 1)
    for i, count in enumerate(blocks, start=1):
        for j in range(1, count + 1):
            p = f"features.denseblock{i}.denselayer{j}"
            y = b.relu(b.norm(x, f"{p}.norm1"), f"{p}.relu1")
            y = b.relu(b.conv(y, f"{p}.conv1", _BOTTLENECK * _GROWTH, 1), f"{p}.relu2")
            y = b.conv(y, f"{p}.conv2", _GROWTH, 3, 1, 1, bias=False)
            x = b.concat([x, y], f"{p}.concat")
        if i < len(blocks):
            p = f"features.transition{i}"
            y = b.relu(b.norm(x, f"{p}.norm"), f"{p}.relu")
            y = b.conv(y, f"{p}.conv", b.shape(x)[1] // 2, 1, bias=False)
            x = b.avg_pool(y, f"{p}.pool", 2, 2)
    x = b.relu(b.norm(x, "features.norm5"), "features.relu5")
    x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten")
    return b.model([b.dense(x, "classifier", 1000, output="output")])


def densenet121(batch_size: int = 1, image_size: int = 224,
                fold_bn: bool = True) -> onnx.ModelProto:
    """DenseNet-121: blocks (6, 12, 24, 16), 120 convs, 1 dense, 7.98M parameters.

    Examples
    --------
    >>> densenet121(image_size=32).graph.output[0].name
    'output'
    """
    return _densenet("densenet121", 121, (6, 12, 24, 16), batch_size, image_size, fold_bn)


def densenet201(batch_size: int = 1, image_size: int = 224,
                fold_bn: bool = True) -> onnx.ModelProto:
    """DenseNet-201: blocks (6, 12, 48, 32), 200 convs, 1 dense, 20.01M parameters.

    Examples
    --------
    >>> sum(n.op_type == "Conv" for n in densenet201(image_size=32).graph.node)
    200
    """
    return _densenet("densenet201", 201, (6, 12, 48, 32), batch_size, image_size, fold_bn)
