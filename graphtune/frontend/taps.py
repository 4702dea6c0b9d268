"""Drop the kernel taps of a conv that read only padding; split a conv by band where most do.

A dilated conv on a small map can have taps that never touch the input:
DeepLabV3's ASPP convs have 3x3 kernels with dilation 24 and 36 and pads of the same size,
and on the 14x14 map of a 224-pixel MobileNetV3 backbone every output reads the input at
its centre tap only; the other eight taps multiply zeros of the padding. Such a conv
computes exactly what a conv with the live taps alone computes, with the pads shortened by
the dropped taps' reach: a 1x1 conv here, with no padded copy of the input.

:func:`drop_dead_taps` keeps, per axis, the taps :func:`graphtune.taps.live_axis` keeps (the
rule: :mod:`graphtune.taps`), slices the weight to them and sets the conv's kernel shape,
pads and dilations. :func:`split_by_band` rewrites a 2-D conv whose output splits into bands
of the same live taps (:func:`graphtune.taps.band_split`) into one conv per rectangle of a row
band and a column band, each reading its ``Slice`` of the input without padding, joined by
``Concat`` along the width, then the height (convs a QDQ model quantized stay whole, for the
int8 kernels). Only convs with explicit pads (``auto_pad``
``NOTSET``), a constant weight and a static input shape are looked at.

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

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from ..taps import MIN_MACS_PER_CALL, Band, LiveAxis, band_split, live_axis
from .fold import drop_dead
from .qdq import int8_nodes

__all__ = ["drop_dead_taps", "split_by_band"]


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
    plans = {}
    for node, data in _convs(model):
        plan = _plan(node, list(inits[node.input[1]].dims), data)
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


def _convs(model: onnx.ModelProto) -> list[tuple[onnx.NodeProto, list[int]]]:
    """The convs with a constant weight and explicit pads, with their static input shapes."""
    inits = {t.name for t in model.graph.initializer}
    convs = [n for n in model.graph.node if n.op_type == "Conv" and len(n.input) > 1 and n.input[1] in inits
             and _attrs(n).get("auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET")]
    if not convs:
        return []
    inferred = shape_inference.infer_shapes(model).graph
    shapes = {v.name: [d.dim_value if d.HasField("dim_value") else 0 for d in v.type.tensor_type.shape.dim]
              for v in [*inferred.input, *inferred.value_info]}
    found = []
    for node in convs:
        data = shapes.get(node.input[0], [])
        if len(data) >= 3 and all(data[2:]):
            found.append((node, data))
    return found


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _plan(node: onnx.NodeProto, weight: list[int], data: list[int]) -> list[LiveAxis | None] | None:
    """Per spatial axis the slimmed axis (None: kept), or None when no axis changes."""
    spatial = len(weight) - 2
    if spatial < 1 or len(data) != spatial + 2:
        return None
    attrs = _attrs(node)
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


def split_by_band(model: onnx.ModelProto, min_macs_per_call: float = MIN_MACS_PER_CALL) -> onnx.ModelProto:
    """``model`` with every 2-D conv worth it split by band (see the module docstring).

    Parameters
    ----------
    model : onnx.ModelProto
        The model, with static input shapes (after :func:`drop_dead_taps`); not modified.
    min_macs_per_call : float
        Multiply-adds a split must save per call it adds
        (:data:`graphtune.taps.MIN_MACS_PER_CALL`).

    Returns
    -------
    onnx.ModelProto
        ``model`` itself when no conv is split, else a copy computing the same outputs, where
        each split conv ``c`` became convs ``c.band{i}{j}`` (row band i, column band j)
        reading slices ``c.band{i}{j}.input`` and weights ``c.band{i}{j}.w``, joined by the
        concats ``c.band{i}`` (along the width) and ``c`` (along the height; its output is
        the conv's).

    Examples
    --------
    >>> import numpy as np
    >>> from onnx import helper, numpy_helper, TensorProto
    >>> w = numpy_helper.from_array(np.ones((4, 8, 3, 3), np.float32), "w")
    >>> conv = helper.make_node("Conv", ["x", "w"], ["y"], name="aspp", dilations=[12, 12],
    ...                         pads=[12, 12, 12, 12], kernel_shape=[3, 3])
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 14, 14])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 14, 14])
    >>> model = helper.make_model(helper.make_graph([conv], "g", [x], [y], [w]),
    ...                           opset_imports=[helper.make_opsetid("", 13)])
    >>> split = split_by_band(model, min_macs_per_call=0)  # a conv this small is not worth it
    >>> split_by_band(model) is model
    True
    >>> sorted(n.name for n in split.graph.node if n.op_type == "Conv")[:3]
    ['aspp.band00', 'aspp.band01', 'aspp.band02']
    >>> [n.name for n in split.graph.node if n.op_type == "Concat"]
    ['aspp.band0', 'aspp.band1', 'aspp.band2', 'aspp']
    """
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    if opset < 10:  # Slice reads its bounds from inputs from opset 10 on
        return model
    inits = {t.name: t for t in model.graph.initializer}
    quantized = int8_nodes({p.key: p.value for p in model.metadata_props})  # run whole on int8 kernels
    splits = {}
    for node, data in _convs(model):
        weight = list(inits[node.input[1]].dims)
        if len(weight) != 4 or len(data) != 4 or node.name in quantized:
            continue
        attrs = _attrs(node)
        workload = {"data": data, "kernel": weight, "strides": list(attrs.get("strides", [1, 1])),
                    "padding": list(attrs.get("pads", [0, 0, 0, 0])),
                    "dilation": list(attrs.get("dilations", [1, 1]))}
        found = band_split(workload, min_macs_per_call)
        if found is not None:
            splits[node.output[0]] = found
    if not splits:
        return model
    split = onnx.ModelProto()
    split.CopyFrom(model)
    nodes = []
    for node in split.graph.node:
        if node.op_type == "Conv" and node.output[0] in splits:
            nodes.extend(_pieces(split.graph, node, inits[node.input[1]], *splits[node.output[0]]))
        else:
            nodes.append(node)
    del split.graph.node[:]
    split.graph.node.extend(nodes)
    drop_dead(split.graph)  # the full weights, unless another node reads them
    return split


def _pieces(graph: onnx.GraphProto, node: onnx.NodeProto, weight: onnx.TensorProto,
            rows: list[Band], cols: list[Band]) -> list[onnx.NodeProto]:
    """The slices, convs and concats computing ``node`` band by band."""
    value = numpy_helper.to_array(weight)
    base = node.name or node.output[0]
    kept = [a for a in node.attribute if a.name not in ("dilations", "pads", "kernel_shape")]
    out: list[onnx.NodeProto] = []
    row_outputs = []
    for i, row in enumerate(rows):
        row_output = f"{base}.band{i}" if len(rows) > 1 else node.output[0]
        col_outputs = []
        for j, col in enumerate(cols):
            name = f"{base}.band{i}{j}"
            bounds = {"starts": [row.in_begin, col.in_begin], "ends": [row.in_end, col.in_end],
                      "axes": [2, 3]}
            for key, values in bounds.items():
                graph.initializer.append(numpy_helper.from_array(np.array(values, np.int64), f"{name}.{key}"))
            out.append(helper.make_node("Slice", [node.input[0], *(f"{name}.{k}" for k in bounds)],
                                        [f"{name}.input"], name=f"{name}.slice"))
            piece = value[:, :, row.first:row.first + row.taps, col.first:col.first + col.taps]
            graph.initializer.append(numpy_helper.from_array(piece.copy(), f"{name}.w"))
            output = name if len(cols) > 1 else row_output
            conv = helper.make_node("Conv", [f"{name}.input", f"{name}.w", *node.input[2:]], [output],
                                    name=name)
            conv.attribute.extend([*kept, helper.make_attribute("dilations", [row.dilation, col.dilation]),
                                   helper.make_attribute("pads", [0, 0, 0, 0]),
                                   helper.make_attribute("kernel_shape", [row.taps, col.taps])])
            out.append(conv)
            col_outputs.append(output)
        if len(cols) > 1:
            out.append(helper.make_node("Concat", col_outputs, [row_output], name=f"{base}.band{i}", axis=3))
        row_outputs.append(row_output)
    if len(rows) > 1:
        out.append(helper.make_node("Concat", row_outputs, [node.output[0]], name=base, axis=2))
    return out
