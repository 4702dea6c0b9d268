"""ShuffleNet-V2 x1.0 (torchvision ``shufflenet_v2_x1_0``), channel shuffle as torch exports it.

Stem ``conv1`` (3x3/2 to 24 channels) and a 3x3/2 max pool, then stages 2-4 of
(4, 8, 4) units with 116, 232 and 464 channels, ``conv5`` (1x1 to 1024), a
spatial ``ReduceMean`` and ``fc``. A stride-2 unit runs ``branch1`` (3x3/2
depthwise, 1x1) and ``branch2`` (1x1, 3x3/2 depthwise, 1x1) on its input; a
stride-1 unit splits its input in two channel halves (``Split``) and runs
``branch2`` on the second. Every unit ends with a channel ``Concat`` and the
channel shuffle exactly as ``torch.onnx.export`` traces
``x.view(n, 2, c // 2, h, w).transpose(1, 2).view(n, -1, h, w)``: ``Shape`` ->
``Gather`` per dimension, ``Div`` for ``c // 2``, ``Unsqueeze`` + ``Concat`` into
the target shapes of two ``Reshape`` nodes around a ``Transpose`` — shapes that
are static only once that subgraph is folded. Node names follow torchvision's
modules (``stage2.0.branch2.3`` is the depthwise conv of the first unit).
56 convs (19 of them depthwise), 1 dense, 2.28M parameters.

Examples
--------
>>> model = shufflenet_v2(image_size=32)
>>> ops = [n.op_type for n in model.graph.node]
>>> ops.count("Conv"), ops.count("Reshape"), ops.count("Shape")
(56, 32, 112)
"""

from __future__ import annotations

import numpy as np
import onnx

from .builder import GraphBuilder

__all__ = ["shufflenet_v2", "channel_shuffle", "floor_divide", "STAGES", "LINEAR_GAIN"]

STAGES: tuple[tuple[int, int], ...] = ((4, 116), (8, 232), (4, 464))
"""Stages 2-4 as (units, output channels)."""

LINEAR_GAIN = 0.5
"""He-gain of the depthwise convs, which feed no ReLU (keeps activations of order one)."""


def _int(value: int | list[int]) -> np.ndarray:
    return np.array(value, dtype=np.int64)


def floor_divide(b: GraphBuilder, a: str, d: str, name: str) -> str:
    """``a // d`` of int64 scalars as torch.onnx exports ``floor_divide``: a truncating ``Div``
    corrected by ``Where`` when the signs differ and the remainder is not zero.

    Examples
    --------
    >>> b = GraphBuilder("t", 0, 1, 4)
    >>> q = floor_divide(b, b.constant("a", _int(-7)), b.constant("d", _int(2)), "q")
    >>> [n.op_type for n in b.model([]).graph.node][-4:]
    ['Not', 'And', 'Sub', 'Where']
    """
    zero = b.constant(f"{name}.zero", _int(0))
    one = b.constant(f"{name}.one", _int(1))
    div = b.node("Div", [a, d], name, [])
    negative = b.node("Xor", [b.node("Less", [a, zero], f"{name}.less_a", []),
                              b.node("Less", [d, zero], f"{name}.less_d", [])],
                      f"{name}.negative", [])
    mod = b.node("Sub", [a, b.node("Mul", [div, d], f"{name}.mul", [])], f"{name}.mod", [])
    inexact = b.node("Not", [b.node("Equal", [mod, zero], f"{name}.exact", [])],
                     f"{name}.inexact", [])
    fixup = b.node("And", [negative, inexact], f"{name}.fixup_mask", [])
    lower = b.node("Sub", [div, one], f"{name}.lower", [])
    return b.node("Where", [fixup, lower, div], f"{name}.floor", [])


def channel_shuffle(b: GraphBuilder, x: str, name: str, groups: int = 2) -> str:
    """The channel shuffle of ``x`` as torch.onnx traces it (see the module docstring).

    Examples
    --------
    >>> b = GraphBuilder("t", 0, 1, 4)
    >>> b.shape(channel_shuffle(b, b.concat(["input", "input"], "cat"), "shuffle"))
    (1, 6, 4, 4)
    """
    n, c, h, w = b.shape(x)
    axes = b.constant(f"{name}.axes", _int([0]))

    def dim(i: int, tag: str) -> str:
        shape = b.node("Shape", [x], f"{name}.shape{i}.{tag}", [4])
        index = b.constant(f"{name}.index{i}.{tag}", _int(i))
        return b.node("Gather", [shape, index], f"{name}.gather{i}.{tag}", [], axis=0)

    def target(parts: list[str], tag: str, shape: list[int]) -> str:
        lists = [b.node("Unsqueeze", [p, axes], f"{name}.unsqueeze{k}.{tag}", [1])
                 if b.shape(p) == () else p for k, p in enumerate(parts)]
        return b.node("Concat", lists, f"{name}.target.{tag}", [len(shape)], axis=0)

    channels = dim(1, "view")
    per_group = floor_divide(b, channels, b.constant(f"{name}.groups", _int(groups)), f"{name}.div")
    split = target([dim(0, "view"), b.constant(f"{name}.groups1", _int([groups])), per_group,
                    dim(2, "view"), dim(3, "view")], "view", [n, groups, c // groups, h, w])
    y = b.node("Reshape", [x, split], f"{name}.view", [n, groups, c // groups, h, w])
    y = b.transpose(y, f"{name}.transpose", [0, 2, 1, 3, 4])
    merged = target([dim(0, "flat"), b.constant(f"{name}.minus1", _int([-1])), dim(2, "flat"),
                     dim(3, "flat")], "flat", [n, c, h, w])
    return b.node("Reshape", [y, merged], f"{name}.flat", [n, c, h, w])


def _unit(b: GraphBuilder, x: str, p: str, out: int, stride: int) -> str:
    half = out // 2

    def branch2(y: str) -> str:
        y = b.relu(b.conv_bn(y, f"{p}.branch2.0", f"{p}.branch2.1", half, 1), f"{p}.branch2.2")
        y = b.conv_bn(y, f"{p}.branch2.3", f"{p}.branch2.4", half, 3, stride, 1, groups=half,
                      gain=LINEAR_GAIN)
        return b.relu(b.conv_bn(y, f"{p}.branch2.5", f"{p}.branch2.6", half, 1),
                      f"{p}.branch2.7")

    if stride == 1:
        left, right = b.split(x, f"{p}.chunk", 2)
        parts = [left, branch2(right)]
    else:
        cin = b.shape(x)[1]
        y = b.conv_bn(x, f"{p}.branch1.0", f"{p}.branch1.1", cin, 3, stride, 1, groups=cin,
                      gain=LINEAR_GAIN)
        y = b.relu(b.conv_bn(y, f"{p}.branch1.2", f"{p}.branch1.3", half, 1), f"{p}.branch1.4")
        parts = [y, branch2(x)]
    return channel_shuffle(b, b.concat(parts, f"{p}.concat"), f"{p}.shuffle")


def shufflenet_v2(batch_size: int = 1, image_size: int = 224,
                  fold_bn: bool = True) -> onnx.ModelProto:
    """ShuffleNet-V2 x1.0: 56 convs (19 depthwise), 1 dense, 2.28M parameters.

    Examples
    --------
    >>> shufflenet_v2(image_size=32).graph.output[0].name
    'output'
    """
    b = GraphBuilder("shufflenet_v2", 5, batch_size, image_size, fold_bn=fold_bn)
    x = b.relu(b.conv_bn(b.input, "conv1.0", "conv1.1", 24, 3, 2, 1), "conv1.2")
    x = b.max_pool(x, "maxpool", 3, 2, 1)
    for stage, (units, out) in enumerate(STAGES, start=2):
        for i in range(units):
            x = _unit(b, x, f"stage{stage}.{i}", out, 2 if i == 0 else 1)
    x = b.relu(b.conv_bn(x, "conv5.0", "conv5.1", 1024, 1), "conv5.2")
    n, c = b.shape(x)[:2]
    x = b.node("ReduceMean", [x], "mean", [n, c], axes=[2, 3], keepdims=0)
    return b.model([b.dense(x, "fc", 1000, output="output")])
