"""Pad odd output-channel counts of convs whose output leaves the blocked layout anyway, and the
input channels of int8 convs that no int8 instruction divides.

A conv2d with ``O`` output channels runs in ``NCHW{oc_bn}c`` blocks that
divide ``O``; when no multiple of the vector width divides it (SSD's class
heads: ``4 * 81 = 324``, ``6 * 81 = 486`` channels) every block is a
partial vector and the kernel runs slower than the same conv with a few
more channels (``docs/candidates.md``). :func:`pad_output_channels` gives such a
conv zero weights (and zero bias) for ``ceil(O / multiple) * multiple``
channels and slices the real ones back out with an ONNX ``Slice`` right
after it. It does so only where the slice is free: when every consumer of the
conv is an op that needs plain ``NCHW`` anyway (``Transpose``, ``Reshape``,
``Flatten``), or reaches one through elementwise ops with constant operands (the
fake quantization of a quantized conv's output), so the layout transform the compiler
inserts there meets the slice, and only when padding adds at most a quarter of the channels.

:func:`pad_int8_input_channels` gives a quantized conv2d whose input channels are no multiple
of :data:`~graphtune.frontend.qdq.INT8_CHANNELS` (the RGB stem's 3) zero weights for the
missing channels and concatenates zero channels to its input, so that it runs on the int8
kernels (a zero channel quantizes to the zero point and meets zero weights: exact).

Examples
--------
>>> from graphtune import models
>>> model = pad_output_channels(models.get("ssd_resnet50_512", image_size=64))
>>> sorted(n.name for n in model.graph.node if n.op_type == "Slice")[:2]
['class_predictors.0.unpad', 'class_predictors.1.unpad']
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from .qdq import INT8_CHANNELS, QDQ_OPS, int8_nodes

__all__ = ["pad_output_channels", "pad_int8_input_channels", "PAD_MULTIPLE", "MAX_PAD_FRACTION"]

PAD_MULTIPLE = 16
"""Channel multiple to pad to: the fp32 lanes of AVX-512 (and two AVX2 vectors)."""

MAX_PAD_FRACTION = 0.25
"""Largest share of extra (zero) output channels padding may add."""

_LEAVES_BLOCKED_LAYOUT = frozenset({"Transpose", "Reshape", "Flatten"})
_ELEMENTWISE = QDQ_OPS | {"Add", "Sub", "Mul", "Div", "Round", "Clip", "Relu", "Cast", "Max", "Min"}


def pad_output_channels(model: onnx.ModelProto, multiple: int = PAD_MULTIPLE,
                        max_fraction: float = MAX_PAD_FRACTION) -> onnx.ModelProto:
    """``model`` with the odd output channels of eligible convs padded and sliced back.

    Parameters
    ----------
    model : onnx.ModelProto
        The model (not modified).
    multiple : int
        Pad output channels up to a multiple of this.
    max_fraction : float
        Pad only when it adds at most ``max_fraction * O`` channels.

    Returns
    -------
    onnx.ModelProto
        ``model`` itself when no conv qualifies, else a padded copy computing
        the same outputs. Each padded conv keeps its name; its ``Slice`` is
        named ``{conv}.unpad``.

    Raises
    ------
    ValueError
        ``multiple`` below 1 or ``max_fraction`` below 0.

    Examples
    --------
    >>> from graphtune import models
    >>> model = models.get("resnet18", image_size=32)
    >>> pad_output_channels(model) is model  # every conv's channels are multiples of 16
    True
    """
    if not isinstance(multiple, int) or multiple < 1:
        raise ValueError(f"multiple={multiple!r} must be a positive int (e.g. 16, the AVX-512 fp32 lanes)")
    if max_fraction < 0:
        raise ValueError(f"max_fraction={max_fraction!r} must be >= 0 "
                         "(0.25: at most a quarter more channels)")
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    inits = {t.name: t for t in model.graph.initializer}
    outputs = {o.name for o in model.graph.output}
    targets = {i: _padded_channels(node, inits, consumers, outputs, multiple, max_fraction)
               for i, node in enumerate(model.graph.node)}
    chosen = [i for i, target in targets.items() if target]
    if not chosen:
        return model
    padded = onnx.ModelProto()
    padded.CopyFrom(model)
    graph = padded.graph
    nodes = list(graph.node)
    for index in reversed(chosen):
        nodes.insert(index + 1, _pad(graph, nodes[index], inits, targets[index]))
    del graph.node[:]
    graph.node.extend(nodes)
    return padded


def _padded_channels(node: onnx.NodeProto, inits: dict, consumers: dict, outputs: set,
                     multiple: int, max_fraction: float) -> int:
    """The padded output-channel count of ``node``, or 0 when it is not padded."""
    if node.op_type != "Conv" or node.output[0] in outputs or len(node.input) < 2:
        return 0
    if any(a.name == "group" and a.i != 1 for a in node.attribute):
        return 0
    if any(name not in inits for name in node.input[1:] if name):
        return 0
    readers = _readers_past_elementwise(node.output[0], inits, consumers, outputs)
    if not readers or any(r.op_type not in _LEAVES_BLOCKED_LAYOUT for r in readers):
        return 0
    channels = int(inits[node.input[1]].dims[0])
    target = math.ceil(channels / multiple) * multiple
    if target == channels or target - channels > max_fraction * channels:
        return 0
    return target


def _readers_past_elementwise(name: str, inits: dict, consumers: dict, outputs: set) -> list[onnx.NodeProto]:
    """The readers of tensor ``name``, looking past a chain of elementwise ops with constant
    operands that each have one reader (a quantized conv's output quantization, a ReLU): the
    Slice after the conv moves the chain to the sliced channels, and the chain's end decides
    whether a layout transform is there anyway."""
    readers = consumers.get(name, [])
    while len(readers) == 1 and readers[0].op_type in _ELEMENTWISE and readers[0].output[0] not in outputs \
            and all(operand in inits for operand in readers[0].input[1:] if operand):
        readers = consumers.get(readers[0].output[0], [])
    return readers


def _pad(graph: onnx.GraphProto, conv: onnx.NodeProto, inits: dict, target: int) -> onnx.NodeProto:
    """Point ``conv`` at zero-padded weights and a new output; return the Slice restoring it."""
    base = conv.name or conv.output[0]
    channels = int(inits[conv.input[1]].dims[0])
    present = {t.name for t in graph.initializer}
    for position, name in enumerate(conv.input[1:], start=1):
        if not name:
            continue
        if f"{name}.padded" not in present:  # a weight shared by two padded convs is padded once
            value = numpy_helper.to_array(inits[name])
            widths = [(0, target - channels)] + [(0, 0)] * (value.ndim - 1)
            graph.initializer.append(numpy_helper.from_array(np.pad(value, widths), f"{name}.padded"))
        conv.input[position] = f"{name}.padded"
    real = conv.output[0]
    conv.output[0] = f"{real}.padded"
    bounds = {"starts": 0, "ends": channels, "axes": 1}
    for key, bound in bounds.items():
        graph.initializer.append(numpy_helper.from_array(np.array([bound], np.int64), f"{base}.unpad.{key}"))
    return helper.make_node("Slice", [conv.output[0], *(f"{base}.unpad.{k}" for k in bounds)], [real],
                            name=f"{base}.unpad")


def pad_int8_input_channels(model: onnx.ModelProto, multiple: int = INT8_CHANNELS) -> onnx.ModelProto:
    """``model`` with the input channels of its int8 convs (:func:`graphtune.frontend.qdq.int8_nodes`)
    padded to a multiple of ``multiple``: zero weights, and a ``Concat`` of zero channels (an
    ONNX constant: the conv's input must have a static shape, after
    :func:`~graphtune.frontend.fold.fold_constants`) before the conv; other convs as they are.

    Examples
    --------
    >>> import numpy as np
    >>> from graphtune import models, quantize
    >>> from graphtune.frontend import fold_constants, rewrite_qdq
    >>> data = [{"input": np.zeros((1, 3, 32, 32), np.float32)}]
    >>> qdq = rewrite_qdq(quantize("resnet18", data, image_size=32))
    >>> padded = pad_int8_input_channels(fold_constants(qdq, {"input": [1, 3, 32, 32]}))
    >>> stem = next(n for n in padded.graph.node if n.name == "conv1")
    >>> [n.op_type for n in padded.graph.node if n.output[0] == stem.input[0]]
    ['Concat']
    """
    convs = int8_nodes({p.key: p.value for p in model.metadata_props})
    inits = {t.name: t for t in model.graph.initializer}
    chosen = [n for n in model.graph.node if n.op_type == "Conv" and (n.name or n.output[0]) in convs
              and len(n.input) > 1 and n.input[1] in inits and int(inits[n.input[1]].dims[1]) % multiple
              and all(a.name != "group" or a.i == 1 for a in n.attribute)]
    if not chosen:
        return model
    inferred = shape_inference.infer_shapes(model).graph
    shapes = {v.name: [d.dim_value if d.HasField("dim_value") else 0 for d in v.type.tensor_type.shape.dim]
              for v in [*inferred.input, *inferred.value_info]}
    padded = onnx.ModelProto()
    padded.CopyFrom(model)
    graph = padded.graph
    targets = {n.output[0] for n in chosen if all(shapes.get(n.input[0], [0]))}
    nodes = []
    for node in graph.node:
        if node.output[0] in targets:
            nodes.append(_zero_channels(graph, node, inits, shapes[node.input[0]], multiple))
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return padded


def _zero_channels(graph: onnx.GraphProto, conv: onnx.NodeProto, inits: dict, shape: list[int],
                   multiple: int) -> onnx.NodeProto:
    """Point ``conv`` at weights with zero input channels and an input with zero channels
    concatenated; return that Concat."""
    base = conv.name or conv.output[0]
    weight = numpy_helper.to_array(inits[conv.input[1]])
    extra = -weight.shape[1] % multiple
    widths = [(0, 0), (0, extra)] + [(0, 0)] * (weight.ndim - 2)
    graph.initializer.append(numpy_helper.from_array(np.pad(weight, widths), f"{base}.w.padded_in"))
    zeros = np.zeros([shape[0], extra, *shape[2:]], np.float32)
    graph.initializer.append(numpy_helper.from_array(zeros, f"{base}.zero_channels"))
    concat = helper.make_node("Concat", [conv.input[0], f"{base}.zero_channels"], [f"{base}.padded_in"],
                              axis=1, name=f"{base}.pad_in")
    conv.input[0], conv.input[1] = concat.output[0], f"{base}.w.padded_in"
    return concat
