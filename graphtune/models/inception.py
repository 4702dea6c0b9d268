"""Inception-v3 (torchvision's ``inception_v3``, inference graph, 299x299 default).

The auxiliary classifier only runs in training, so it is not built: the
model has 23.83M parameters (torchvision's 27.16M includes the 3.33M of
``AuxLogits``). Every ``BasicConv2d`` (conv + BN + ReLU) is one conv with
the folded bias and a ReLU, named like torchvision's module
(``Mixed_5b.branch5x5_1``). Branch average pools use ``count_include_pad=1``
as PyTorch does. 94 convs, 1 dense (``fc``); the smallest input is 75x75.

Examples
--------
>>> model = inception_v3(image_size=75)
>>> sum(n.op_type == "Conv" for n in model.graph.node)
94
"""

from __future__ import annotations

import onnx

from .builder import GraphBuilder

__all__ = ["inception_v3"]


def _conv(b: GraphBuilder, x: str, name: str, out: int, kernel: int | tuple[int, int],
          stride: int = 1, padding: int | tuple[int, int] = 0) -> str:
    return b.relu(b.conv(x, name, out, kernel, stride, padding), f"{name}.relu")


def _pool_branch(b: GraphBuilder, x: str, prefix: str, out: int) -> str:
    pooled = b.avg_pool(x, f"{prefix}.avg_pool", 3, 1, 1)
    return _conv(b, pooled, f"{prefix}.branch_pool", out, 1)


def _inception_a(b: GraphBuilder, x: str, prefix: str, pool_features: int) -> str:
    branch1x1 = _conv(b, x, f"{prefix}.branch1x1", 64, 1)
    branch5x5 = _conv(b, x, f"{prefix}.branch5x5_1", 48, 1)
    branch5x5 = _conv(b, branch5x5, f"{prefix}.branch5x5_2", 64, 5, padding=2)
    dbl = _conv(b, x, f"{prefix}.branch3x3dbl_1", 64, 1)
    dbl = _conv(b, dbl, f"{prefix}.branch3x3dbl_2", 96, 3, padding=1)
    dbl = _conv(b, dbl, f"{prefix}.branch3x3dbl_3", 96, 3, padding=1)
    pool = _pool_branch(b, x, prefix, pool_features)
    return b.concat([branch1x1, branch5x5, dbl, pool], f"{prefix}.concat")


def _inception_b(b: GraphBuilder, x: str, prefix: str) -> str:
    branch3x3 = _conv(b, x, f"{prefix}.branch3x3", 384, 3, stride=2)
    dbl = _conv(b, x, f"{prefix}.branch3x3dbl_1", 64, 1)
    dbl = _conv(b, dbl, f"{prefix}.branch3x3dbl_2", 96, 3, padding=1)
    dbl = _conv(b, dbl, f"{prefix}.branch3x3dbl_3", 96, 3, stride=2)
    pool = b.max_pool(x, f"{prefix}.max_pool", 3, 2)
    return b.concat([branch3x3, dbl, pool], f"{prefix}.concat")


def _inception_c(b: GraphBuilder, x: str, prefix: str, c7: int) -> str:
    branch1x1 = _conv(b, x, f"{prefix}.branch1x1", 192, 1)
    b7 = _conv(b, x, f"{prefix}.branch7x7_1", c7, 1)
    b7 = _conv(b, b7, f"{prefix}.branch7x7_2", c7, (1, 7), padding=(0, 3))
    b7 = _conv(b, b7, f"{prefix}.branch7x7_3", 192, (7, 1), padding=(3, 0))
    dbl = _conv(b, x, f"{prefix}.branch7x7dbl_1", c7, 1)
    dbl = _conv(b, dbl, f"{prefix}.branch7x7dbl_2", c7, (7, 1), padding=(3, 0))
    dbl = _conv(b, dbl, f"{prefix}.branch7x7dbl_3", c7, (1, 7), padding=(0, 3))
    dbl = _conv(b, dbl, f"{prefix}.branch7x7dbl_4", c7, (7, 1), padding=(3, 0))
    dbl = _conv(b, dbl, f"{prefix}.branch7x7dbl_5", 192, (1, 7), padding=(0, 3))
    pool = _pool_branch(b, x, prefix, 192)
    return b.concat([branch1x1, b7, dbl, pool], f"{prefix}.concat")


def _inception_d(b: GraphBuilder, x: str, prefix: str) -> str:
    b3 = _conv(b, x, f"{prefix}.branch3x3_1", 192, 1)
    b3 = _conv(b, b3, f"{prefix}.branch3x3_2", 320, 3, stride=2)
    b7 = _conv(b, x, f"{prefix}.branch7x7x3_1", 192, 1)
    b7 = _conv(b, b7, f"{prefix}.branch7x7x3_2", 192, (1, 7), padding=(0, 3))
    b7 = _conv(b, b7, f"{prefix}.branch7x7x3_3", 192, (7, 1), padding=(3, 0))
    b7 = _conv(b, b7, f"{prefix}.branch7x7x3_4", 192, 3, stride=2)
    pool = b.max_pool(x, f"{prefix}.max_pool", 3, 2)
    return b.concat([b3, b7, pool], f"{prefix}.concat")


def _inception_e(b: GraphBuilder, x: str, prefix: str) -> str:
    branch1x1 = _conv(b, x, f"{prefix}.branch1x1", 320, 1)
    b3 = _conv(b, x, f"{prefix}.branch3x3_1", 384, 1)
    b3 = b.concat([_conv(b, b3, f"{prefix}.branch3x3_2a", 384, (1, 3), padding=(0, 1)),
                   _conv(b, b3, f"{prefix}.branch3x3_2b", 384, (3, 1), padding=(1, 0))],
                  f"{prefix}.branch3x3.concat")
    dbl = _conv(b, x, f"{prefix}.branch3x3dbl_1", 448, 1)
    dbl = _conv(b, dbl, f"{prefix}.branch3x3dbl_2", 384, 3, padding=1)
    dbl = b.concat([_conv(b, dbl, f"{prefix}.branch3x3dbl_3a", 384, (1, 3), padding=(0, 1)),
                    _conv(b, dbl, f"{prefix}.branch3x3dbl_3b", 384, (3, 1), padding=(1, 0))],
                   f"{prefix}.branch3x3dbl.concat")
    pool = _pool_branch(b, x, prefix, 192)
    return b.concat([branch1x1, b3, dbl, pool], f"{prefix}.concat")


def inception_v3(batch_size: int = 1, image_size: int = 299) -> onnx.ModelProto:
    """Inception-v3 without the auxiliary classifier: 94 convs, 1 dense, 23.83M parameters.

    Examples
    --------
    >>> output = inception_v3(image_size=75).graph.output[0]
    >>> [d.dim_value for d in output.type.tensor_type.shape.dim]
    [1, 1000]
    """
    b = GraphBuilder("inception_v3", 3, batch_size, image_size)
    x = _conv(b, b.input, "Conv2d_1a_3x3", 32, 3, stride=2)
    x = _conv(b, x, "Conv2d_2a_3x3", 32, 3)
    x = _conv(b, x, "Conv2d_2b_3x3", 64, 3, padding=1)
    x = b.max_pool(x, "maxpool1", 3, 2)
    x = _conv(b, x, "Conv2d_3b_1x1", 80, 1)
    x = _conv(b, x, "Conv2d_4a_3x3", 192, 3)
    x = b.max_pool(x, "maxpool2", 3, 2)
    x = _inception_a(b, x, "Mixed_5b", 32)
    x = _inception_a(b, x, "Mixed_5c", 64)
    x = _inception_a(b, x, "Mixed_5d", 64)
    x = _inception_b(b, x, "Mixed_6a")
    for prefix, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = _inception_c(b, x, prefix, c7)
    x = _inception_d(b, x, "Mixed_7a")
    x = _inception_e(b, x, "Mixed_7b")
    x = _inception_e(b, x, "Mixed_7c")
    x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten")
    return b.model([b.dense(x, "fc", 1000, output="output")])
