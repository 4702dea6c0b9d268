"""SSD-512 with a ResNet-50 backbone, following GluonCV's ``ssd_512_resnet50_v1_coco``.

Design (GluonCV's, with 81 COCO classes including background; no NMS or box
decoding, the graph ends at the raw predictions):

- backbone: this zoo's ResNet-50 (torchvision v1.5, stride on the 3x3; GluonCV's
  ``resnet50_v1`` strides the 1x1 instead, which changes no shape or count).
  Features are the outputs of ``layer3`` (1024 channels, stride 16) and ``layer4``
  (2048 channels, stride 32);
- extra layers ``extras.{i}``, ``i = 0..3`` with ``f = 512, 512, 256, 256``: a 1x1 conv
  to ``f`` channels + ReLU, then a 3x3 stride-2 conv to ``f`` channels + ReLU (batch
  norm folded), giving strides 64, 128, 256, 512;
- per scale ``k``, a 3x3 conv ``box_predictors.{k}`` to ``A_k * 4`` channels and
  ``class_predictors.{k}`` to ``A_k * 81``, each ``Transpose``'d to NHWC,
  ``Reshape``'d to ``[N, H * W * A_k, 4 | 81]`` and concatenated along axis 1 into
  ``"loc"`` ``[N, A, 4]`` and ``"conf"`` ``[N, A, 81]``.

Anchors per position ``A_k`` = one per aspect ratio plus one extra square:

==== ======= ================ =========================== ===
k    stride  map at 512       sizes (pixels)              A_k
==== ======= ================ =========================== ===
0    16      32x32            51.2, sqrt(51.2*102.4)      4  (ratios 1, 2, 1/2)
1    32      16x16            102.4, sqrt(102.4*189.4)    6  (ratios 1, 2, 1/2, 3, 1/3)
2    64      8x8              189.4, sqrt(189.4*276.4)    6  (ratios 1, 2, 1/2, 3, 1/3)
3    128     4x4              276.4, sqrt(276.4*363.52)   6  (ratios 1, 2, 1/2, 3, 1/3)
4    256     2x2              363.52, sqrt(363.52*450.6)  4  (ratios 1, 2, 1/2)
5    512     1x1              450.6, sqrt(450.6*492)      4  (ratios 1, 2, 1/2)
==== ======= ================ =========================== ===

At 512x512 that is ``A = 4096 + 1536 + 384 + 96 + 16 + 4 = 6132`` anchors. The graph
has 53 + 8 + 12 = 73 convs and no dense layer; 49.69M parameters with BN folded.

Examples
--------
>>> model = ssd_resnet50_512(image_size=64)
>>> [[d.dim_value for d in o.type.tensor_type.shape.dim] for o in model.graph.output]
[[1, 108, 4], [1, 108, 81]]
"""

from __future__ import annotations

import onnx

from .builder import GraphBuilder
from .resnet import resnet_backbone

__all__ = ["ssd_resnet50_512", "NUM_CLASSES", "ANCHORS_PER_POSITION", "EXTRA_FILTERS"]

NUM_CLASSES = 81
"""COCO's 80 classes plus background."""

ANCHORS_PER_POSITION = (4, 6, 6, 6, 4, 4)
"""Anchors per feature-map position at each of the six scales."""

EXTRA_FILTERS = (512, 512, 256, 256)
"""Channels of the four extra feature layers."""

_HEAD_GAIN = 0.7


def _flat_predictions(b: GraphBuilder, x: str, name: str, anchors: int, width: int) -> str:
    y = b.conv(x, name, anchors * width, 3, 1, 1, gain=_HEAD_GAIN)
    y = b.transpose(y, f"{name}.transpose", [0, 2, 3, 1])
    n, h, w, _ = b.shape(y)
    return b.reshape(y, f"{name}.reshape", [n, h * w * anchors, width])


def ssd_resnet50_512(batch_size: int = 1, image_size: int = 512) -> onnx.ModelProto:
    """SSD-512 on ResNet-50 (GluonCV ``ssd_512_resnet50_v1`` heads, 81 classes, no NMS).

    Examples
    --------
    >>> [o.name for o in ssd_resnet50_512(image_size=64).graph.output]
    ['loc', 'conf']
    """
    b = GraphBuilder("ssd_resnet50_512", 512, batch_size, image_size)
    features = resnet_backbone(b, (3, 4, 6, 3), bottleneck=True)[2:]
    x = features[-1]
    for i, filters in enumerate(EXTRA_FILTERS):
        x = b.relu(b.conv(x, f"extras.{i}.0", filters, 1), f"extras.{i}.0.relu")
        x = b.relu(b.conv(x, f"extras.{i}.1", filters, 3, 2, 1), f"extras.{i}.1.relu")
        features.append(x)
    loc, conf = [], []
    for k, (feature, anchors) in enumerate(zip(features, ANCHORS_PER_POSITION)):
        loc.append(_flat_predictions(b, feature, f"box_predictors.{k}", anchors, 4))
        conf.append(_flat_predictions(b, feature, f"class_predictors.{k}", anchors, NUM_CLASSES))
    return b.model([b.concat(loc, "loc.concat", output="loc"),
                    b.concat(conf, "conf.concat", output="conf")])
