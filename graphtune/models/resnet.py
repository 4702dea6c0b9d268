"""ResNet-18, ResNet-50 and ResNeXt-50 32x4d (torchvision layout: v1.5, stride on the 3x3 conv).

Node names follow torchvision's modules: ``conv1``, ``layer1.0.conv1``,
``layer1.0.downsample.0``, ``fc``; batch norm is folded into every conv
(weight + bias). The classifier is ``GlobalAveragePool`` -> ``Flatten`` ->
``Gemm`` (``fc``). ResNet-18 has 20 convs, ResNet-50 and ResNeXt-50 53 convs
(ResNeXt's 16 ``conv2`` are group convs with 32 groups), plus one dense.

Examples
--------
>>> model = resnet18(image_size=32)
>>> sum(n.op_type == "Conv" for n in model.graph.node)
20
"""

from __future__ import annotations

import onnx

from .builder import GraphBuilder

__all__ = ["resnet18", "resnet50", "resnext50_32x4d", "resnet_backbone", "RESIDUAL_GAIN", "SHORTCUT_GAIN"]

RESIDUAL_GAIN = 0.3
"""He-gain of the last conv of each residual branch: keeps the residual stream of order one."""

SHORTCUT_GAIN = 0.7
"""He-gain of the projection shortcuts (``downsample.0``), which are not followed by a ReLU."""

_WIDTHS = (64, 128, 256, 512)


def _basic_block(b: GraphBuilder, x: str, prefix: str, width: int, stride: int) -> str:
    y = b.relu(b.conv(x, f"{prefix}.conv1", width, 3, stride, 1), f"{prefix}.relu1")
    y = b.conv(y, f"{prefix}.conv2", width, 3, 1, 1, gain=RESIDUAL_GAIN)
    if stride != 1 or b.shape(x)[1] != width:
        x = b.conv(x, f"{prefix}.downsample.0", width, 1, stride, gain=SHORTCUT_GAIN)
    return b.relu(b.add(y, x, f"{prefix}.add"), f"{prefix}.relu2")


def _bottleneck(b: GraphBuilder, x: str, prefix: str, width: int, stride: int,
                groups: int = 1, width_per_group: int = 64) -> str:
    out = width * 4
    inner = width * width_per_group // 64 * groups  # torchvision's Bottleneck width
    y = b.relu(b.conv(x, f"{prefix}.conv1", inner, 1), f"{prefix}.relu1")
    y = b.relu(b.conv(y, f"{prefix}.conv2", inner, 3, stride, 1, groups=groups), f"{prefix}.relu2")
    y = b.conv(y, f"{prefix}.conv3", out, 1, gain=RESIDUAL_GAIN)
    if stride != 1 or b.shape(x)[1] != out:
        x = b.conv(x, f"{prefix}.downsample.0", out, 1, stride, gain=SHORTCUT_GAIN)
    return b.relu(b.add(y, x, f"{prefix}.add"), f"{prefix}.relu3")


def resnet_backbone(b: GraphBuilder, blocks: tuple[int, ...], bottleneck: bool,
                    groups: int = 1, width_per_group: int = 64) -> list[str]:
    """Stem and the four stages of a ResNet on ``b.input``.

    Parameters
    ----------
    b : GraphBuilder
        Builder whose input is the image.
    blocks : tuple of int
        Blocks per stage, e.g. ``(3, 4, 6, 3)`` for ResNet-50.
    bottleneck : bool
        Bottleneck (1x1-3x3-1x1, expansion 4) blocks instead of basic (3x3-3x3) blocks.
    groups, width_per_group : int
        ResNeXt's cardinality and channels per group of the bottleneck 3x3 conv
        (torchvision's ``groups`` / ``width_per_group``; 1 / 64 is ResNet).

    Returns
    -------
    list of str
        Output tensors of ``layer1`` .. ``layer4`` (strides 4, 8, 16, 32).

    Examples
    --------
    >>> b = GraphBuilder("r", 0, 1, 64)
    >>> [b.shape(t)[1:] for t in resnet_backbone(b, (1, 1, 1, 1), False)]
    [(64, 16, 16), (128, 8, 8), (256, 4, 4), (512, 2, 2)]
    """
    if not bottleneck and (groups, width_per_group) != (1, 64):
        raise ValueError("groups / width_per_group need bottleneck blocks (as in torchvision)")
    x = b.relu(b.conv(b.input, "conv1", 64, 7, 2, 3), "relu")
    x = b.max_pool(x, "maxpool", 3, 2, 1)
    stages = []
    for stage, (count, width) in enumerate(zip(blocks, _WIDTHS), start=1):
        for i in range(count):
            stride = 2 if stage > 1 and i == 0 else 1
            if bottleneck:
                x = _bottleneck(b, x, f"layer{stage}.{i}", width, stride, groups, width_per_group)
            else:
                x = _basic_block(b, x, f"layer{stage}.{i}", width, stride)
        stages.append(x)
    return stages


def _resnet(name: str, seed: int, blocks: tuple[int, ...], bottleneck: bool,
            batch_size: int, image_size: int, **group_args: int) -> onnx.ModelProto:
    b = GraphBuilder(name, seed, batch_size, image_size)
    x = resnet_backbone(b, blocks, bottleneck, **group_args)[-1]
    x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten")
    return b.model([b.dense(x, "fc", 1000, output="output")])


def resnet18(batch_size: int = 1, image_size: int = 224) -> onnx.ModelProto:
    """ResNet-18: basic blocks (2, 2, 2, 2), 11.69M parameters (11.68M with BN folded).

    Examples
    --------
    >>> resnet18(image_size=32).graph.output[0].name
    'output'
    """
    return _resnet("resnet18", 18, (2, 2, 2, 2), False, batch_size, image_size)


def resnet50(batch_size: int = 1, image_size: int = 224) -> onnx.ModelProto:
    """ResNet-50: bottleneck blocks (3, 4, 6, 3), 25.56M parameters (25.53M with BN folded).

    Examples
    --------
    >>> sum(n.op_type == "Conv" for n in resnet50(image_size=32).graph.node)
    53
    """
    return _resnet("resnet50", 50, (3, 4, 6, 3), True, batch_size, image_size)


def resnext50_32x4d(batch_size: int = 1, image_size: int = 224) -> onnx.ModelProto:
    """ResNeXt-50 32x4d: ResNet-50 with 3x3 convs of 32 groups (4, 8, 16, 32 channels per
    group in the four stages), 25.03M parameters.

    Examples
    --------
    >>> convs = [n for n in resnext50_32x4d(image_size=32).graph.node if n.op_type == "Conv"]
    >>> [a.i for n in convs if n.name == "layer1.0.conv2" for a in n.attribute if a.name == "group"]
    [32]
    """
    return _resnet("resnext50_32x4d", 5032, (3, 4, 6, 3), True, batch_size, image_size,
                   groups=32, width_per_group=4)
