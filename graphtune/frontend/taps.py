"""Drop the kernel taps of a conv that read only padding.

A dilated conv on a small map can have taps that never touch the input:
DeepLabV3's ASPP convs have 3x3 kernels with dilation 24 and 36 and pads of the same size,
and on the 14x14 map of a 224-pixel MobileNetV3 backbone every output reads the input at
its centre tap only; the other eight taps multiply zeros of the padding. Such a conv
computes exactly what a conv with the live taps alone computes, with the pads shortened by
the dropped taps' reach: a 1x1 conv here, with no padded copy of the input.

:func:`drop_dead_taps` keeps, per axis, the taps :func:`graphtune.taps.live_axis` keeps (the
rule: :mod:`graphtune.taps`), slices the weight to them and sets the conv's kernel shape,
pads and dilations. Only convs with explicit pads (``auto_pad`` ``NOTSET``), a constant
weight and a static input shape are looked at.

Examples
--------
>>> import numpy as np
>>> from onnx import helper, numpy_helper, TensorProto
>>> w = numpy_helper.from_array(np.ones((4, 8, 3, 3), np.float32), "w")
>>> conv = helper.make_node("Conv", ["x", "w"], ["y"], name="aspp", dilations=[36, 36],
...                         pads=[36, 36, 36, 36], kernel_shape=[3, 3])
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 14, 14])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 14, 14])
>>> graph = helper.make_graph([conv], "g", [x], [y], [w])
>>> slim = drop_dead_taps(helper.make_model(graph))
>>> node = slim.graph.node[0]
>>> [(a.name, list(a.ints)) for a in node.attribute]
[('dilations', [1, 1]), ('pads', [0, 0, 0, 0]), ('kernel_shape', [1, 1])]
>>> [list(t.dims) for t in slim.graph.initializer if t.name == node.input[1]]
[[4, 8, 1, 1]]
"""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper, shape_inference

from ..taps import LiveAxis, live_axis
from .fold import drop_dead

__all__ = ["drop_dead_taps"]


def drop_dead_taps(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every eligible conv's dead taps dropped (see the module docstring).

    Parameters
    ----------
    model : onnx.ModelProto
        The model, with static input shapes (after
        :func:`~graphtune.frontend.fold.fold_constants`); not modified.

    Returns
    -------
    onnx.ModelProto
        ``model`` itself when no conv has a dead tap, else a copy computing the same outputs
        whose slimmed convs keep their names and read a new weight ``{conv}.live_taps``.

    Examples
    --------
    >>> from graphtune import models
    >>> model = models.get("resnet18", image_size=64)
    >>> drop_dead_taps(model) is model  # every tap of every conv reads the input somewhere
    True
    >>> slim = drop_dead_taps(models.get("resnet18", image_size=32))  # 3x3 convs on 1x1 maps
    >>> sorted(n.name for n in slim.graph.node if n.input[1:2] == [f"{n.name}.live_taps"])[:2]
    ['layer4.0.conv1', 'layer4.0.conv2']
    """
    inits = {t.name: t for t in model.graph.initializer}
    convs = [n for n in model.graph.node if n.op_type == "Conv" and len(n.input) > 1 and n.input[1] in inits]
    if not convs:
        return model
    inferred = shape_inference.infer_shapes(model).graph
    shapes = {v.name: [d.dim_value if d.HasField("dim_value") else 0 for d in v.type.tensor_type.shape.dim]
              for v in [*inferred.input, *inferred.value_info]}
    plans = {}
    for node in convs:
        plan = _plan(node, list(inits[node.input[1]].dims), shapes.get(node.input[0], []))
        if plan:
            plans[node.output[0]] = plan
    if not plans:
        return model
    slim = onnx.ModelProto()
    slim.CopyFrom(model)
    for node in slim.graph.node:
        if node.op_type == "Conv" and node.output[0] in plans:
            _slim(slim.graph, node, inits[node.input[1]], plans[node.output[0]])
    drop_dead(slim.graph)  # the full weights, unless another node reads them
    return slim


def _plan(node: onnx.NodeProto, weight: list[int], data: list[int]) -> list[LiveAxis | None] | None:
    """Per spatial axis the slimmed axis (None: kept), or None when no axis changes."""
    spatial = len(weight) - 2
    if spatial < 1 or len(data) != spatial + 2 or not all(data[2:]):
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    strides = list(attrs.get("strides", [1] * spatial))
    dilations = list(attrs.get("dilations", [1] * spatial))
    pads = list(attrs.get("pads", [0] * 2 * spatial))
    axes = [live_axis(data[2 + i], weight[2 + i], strides[i], dilations[i], (pads[i], pads[spatial + i]))
            for i in range(spatial)]
    return axes if any(axes) else None


def _slim(graph: onnx.GraphProto, node: onnx.NodeProto, weight: onnx.TensorProto,
          axes: list[LiveAxis | None]) -> None:
    """Point ``node`` at its live taps' weight and set its kernel, dilations and pads."""
    value = numpy_helper.to_array(weight)
    spatial = len(axes)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    dilations = list(attrs.get("dilations", [1] * spatial))
    pads = list(attrs.get("pads", [0] * 2 * spatial))
    kernel = list(value.shape[2:])
    index: list[slice] = [slice(None), slice(None)]
    for i, axis in enumerate(axes):
        if axis is None:
            index.append(slice(None))
            continue
        index.append(slice(axis.first, axis.first + axis.taps))
        kernel[i], dilations[i] = axis.taps, axis.dilation
        pads[i], pads[spatial + i] = axis.pad_begin, axis.pad_end
    name = f"{node.name or node.output[0]}.live_taps"
    graph.initializer.append(numpy_helper.from_array(value[tuple(index)].copy(), name))
    node.input[1] = name
    kept = [a for a in node.attribute if a.name not in ("dilations", "pads", "kernel_shape")]
    del node.attribute[:]
    node.attribute.extend([*kept, helper.make_attribute("dilations", dilations),
                           helper.make_attribute("pads", pads),
                           helper.make_attribute("kernel_shape", kernel)])
