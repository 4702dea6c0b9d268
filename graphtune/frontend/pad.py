"""Pad odd output-channel counts of convs whose output leaves the blocked layout anyway, narrow
channel counts passed from conv to conv, and the input channels of int8 convs that no int8
instruction divides.

A conv2d with ``O`` output channels runs in ``NCHW{oc_bn}c`` blocks that
divide ``O``; when no multiple of the vector width divides it (SSD's class
heads: ``4 * 81 = 324``, ``6 * 81 = 486`` channels) every block is a
partial vector and the kernel runs slower than the same conv with a few
more channels (``docs/candidates.md``). :func:`pad_output_channels` gives such a
conv zero weights (and zero bias) for ``ceil(O / multiple) * multiple``
channels and slices the real ones back out with an ONNX ``Slice`` right
after it. It does so only where the slice is free: when every consumer of the
conv is an op that needs plain ``NCHW`` anyway (``Transpose``, ``Reshape``,
``Flatten``, or a ``Concat`` that such ops read: ShuffleNetV2's concat before its channel
shuffle), or reaches one through elementwise ops with constant operands (the
fake quantization of a quantized conv's output), so the layout transform the compiler
inserts there meets the slice, and only when padding adds at most a quarter of the channels.

:func:`pad_channel_chains` pads channels that only convs read, where no block of
:data:`NARROW_BLOCK` divides them, with no slice at all: zero output weights in the conv that
computes them, zero filters in the depthwise convs they pass, zero input weights in the convs
that read them (ShuffleNetV2's ``1x1 -> depthwise -> 1x1`` branches of 58 and 116 channels).

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

__all__ = ["pad_output_channels", "pad_channel_chains", "pad_int8_input_channels", "PAD_MULTIPLE",
           "MAX_PAD_FRACTION", "NARROW_BLOCK"]

PAD_MULTIPLE = 16
"""Channel multiple to pad to: the fp32 lanes of AVX-512 (and two AVX2 vectors)."""

MAX_PAD_FRACTION = 0.25
"""Largest share of extra (zero) output channels padding may add."""

NARROW_BLOCK = 8
"""A channel count this does not divide has no block wider than 4 (a quarter of an AVX-512
vector): :func:`pad_channel_chains` pads such counts."""

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
    _check_limits(multiple, max_fraction)
    consumers = _consumers(model.graph)
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
    if not readers or not all(_leaves_blocked_layout(r, inits, consumers, outputs) for r in readers):
        return 0
    channels = int(inits[node.input[1]].dims[0])
    target = math.ceil(channels / multiple) * multiple
    if target == channels or target - channels > max_fraction * channels:
        return 0
    return target


def _leaves_blocked_layout(reader: onnx.NodeProto, inits: dict, consumers: dict, outputs: set) -> bool:
    """Whether ``reader`` needs plain ``NCHW``: a Transpose, Reshape or Flatten, or a Concat whose
    own readers (past elementwise ops) all are (ShuffleNet's branch concat before its shuffle)."""
    if reader.op_type in _LEAVES_BLOCKED_LAYOUT:
        return True
    if reader.op_type != "Concat" or reader.output[0] in outputs:
        return False
    later = _readers_past_elementwise(reader.output[0], inits, consumers, outputs)
    return bool(later) and all(r.op_type in _LEAVES_BLOCKED_LAYOUT for r in later)


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


def pad_channel_chains(model: onnx.ModelProto, multiple: int = PAD_MULTIPLE,
                       max_fraction: float = MAX_PAD_FRACTION) -> onnx.ModelProto:
    """``model`` with the channels that pass from a conv to the convs reading them padded with
    zeros where :data:`NARROW_BLOCK` does not divide them (ShuffleNetV2's 58- and 116-channel
    branches): ``conv -> [depthwise conv ->]* conv``, the links elementwise ops with scalar
    constant operands (a fake quantization, a ReLU). The first conv gets zero output weights and
    bias, each depthwise conv zero filters and bias, the reading convs zero input weights: the
    padded channels hold zeros (their quantization's zero point) and meet zero weights, so every
    output is exact, and every conv of the chain runs in blocks of 16 channels instead of 4.

    Parameters
    ----------
    model : onnx.ModelProto
        The model (not modified).
    multiple : int
        Pad the channels up to a multiple of this.
    max_fraction : float
        Pad only when it adds at most ``max_fraction`` of the channels.

    Returns
    -------
    onnx.ModelProto
        ``model`` itself when no chain qualifies, else a padded copy computing the same outputs;
        node names are kept, padded weights are new initializers ``{conv}.weight.padded`` (and
        ``{conv}.bias.padded``).

    Raises
    ------
    ValueError
        ``multiple`` below 1 or ``max_fraction`` below 0.

    Examples
    --------
    >>> from onnx import helper, numpy_helper, TensorProto
    >>> weights = [numpy_helper.from_array(np.ones(shape, np.float32), name) for name, shape in
    ...            [("w1", (58, 16, 1, 1)), ("dw", (58, 1, 3, 3)), ("w2", (32, 58, 1, 1))]]
    >>> nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="expand"),
    ...          helper.make_node("Relu", ["a"], ["r"], name="relu"),
    ...          helper.make_node("Conv", ["r", "dw"], ["d"], name="dw", group=58, pads=[1, 1, 1, 1]),
    ...          helper.make_node("Conv", ["d", "w2"], ["y"], name="project")]
    >>> io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
    ...       for n, s in [("x", [1, 16, 8, 8]), ("y", [1, 32, 8, 8])]]
    >>> model = helper.make_model(helper.make_graph(nodes, "chain", io[:1], io[1:], weights))
    >>> padded = pad_channel_chains(model)
    >>> sorted((t.name, list(t.dims)) for t in padded.graph.initializer)
    [('dw.weight.padded', [64, 1, 3, 3]), ('expand.weight.padded', [64, 16, 1, 1]), \
('project.weight.padded', [32, 64, 1, 1])]
    """
    _check_limits(multiple, max_fraction)
    consumers = _consumers(model.graph)
    inits = {t.name: t for t in model.graph.initializer}
    outputs = {o.name for o in model.graph.output}
    chains = []
    for node in model.graph.node:
        chain = _channel_chain(node, inits, consumers, outputs)
        if chain is None:
            continue
        channels = int(inits[node.input[1]].dims[0])
        target = math.ceil(channels / multiple) * multiple
        if channels % NARROW_BLOCK and target - channels <= max_fraction * channels:
            chains.append((node, *chain, target))
    if not chains:
        return model
    padded = onnx.ModelProto()
    padded.CopyFrom(model)
    graph = padded.graph
    convs = {n.name or n.output[0]: n for n in graph.node}
    weights: dict[str, list[np.ndarray | None]] = {}  # conv name -> [weight, bias], padded so far
    resized: set[str] = set()
    for head, depthwise, readers, tensors, target in chains:
        for conv in [head, *depthwise]:
            arrays = _conv_arrays(convs[conv.name or conv.output[0]], inits, weights)
            for i, array in enumerate(arrays):
                if array is not None:
                    arrays[i] = np.pad(array, [(0, target - array.shape[0])] + [(0, 0)] * (array.ndim - 1))
        for conv in depthwise:
            next(a for a in convs[conv.name or conv.output[0]].attribute if a.name == "group").i = target
        for conv in readers:
            arrays = _conv_arrays(convs[conv.name or conv.output[0]], inits, weights)
            w = arrays[0]
            assert w is not None
            arrays[0] = np.pad(w, [(0, 0), (0, target - w.shape[1])] + [(0, 0)] * (w.ndim - 2))
        resized.update(tensors)
    for name, arrays in weights.items():
        conv = convs[name]
        for position, (array, part) in enumerate(zip(arrays, ("weight", "bias")), start=1):
            if array is not None and list(array.shape) != list(inits[conv.input[position]].dims):
                conv.input[position] = f"{name}.{part}.padded"
                graph.initializer.append(numpy_helper.from_array(array, conv.input[position]))
    read = {name for node in graph.node for name in node.input}
    used = [t for t in graph.initializer if t.name in read]
    del graph.initializer[:]
    graph.initializer.extend(used)
    kept = [v for v in graph.value_info if v.name not in resized]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    return padded


def _channel_chain(head: onnx.NodeProto, inits: dict, consumers: dict,
                   outputs: set) -> tuple[list, list, list] | None:
    """``(depthwise convs, reading convs, tensors)`` of the chain :func:`pad_channel_chains` pads
    from conv ``head`` (the tensors: those whose channels it pads), or None when ``head`` starts
    none: it is no group-1 conv with constant weights, or something other than a conv reads its
    channels."""
    if not _constant_conv(head, inits) or _group(head) != 1:
        return None
    channels = int(inits[head.input[1]].dims[0])
    depthwise: list[onnx.NodeProto] = []
    readers: list[onnx.NodeProto] = []
    tensors: list[str] = []
    pending = [head.output[0]]
    while pending:
        links = _scalar_links(pending.pop(), inits, consumers, outputs)
        if links is None:
            return None
        chain, ends = links
        tensors += chain
        for end in ends:
            if not _constant_conv(end, inits) or end.input[0] != chain[-1]:
                return None
            dims = list(inits[end.input[1]].dims)
            if _group(end) == channels and dims[:2] == [channels, 1]:
                depthwise.append(end)
                pending.append(end.output[0])
            elif _group(end) == 1 and dims[1] == channels:
                readers.append(end)
            else:
                return None
    return (depthwise, readers, tensors) if readers else None


def _scalar_links(name: str, inits: dict, consumers: dict, outputs: set) -> tuple[list, list] | None:
    """``(tensors, readers)``: tensor ``name`` and those a chain of single-reader elementwise ops
    with scalar constant operands computes from it, and the readers of the last; None when one of
    them is a graph output or nothing reads it."""
    tensors = [name]
    readers = consumers.get(name, [])
    while len(readers) == 1 and readers[0].op_type in _ELEMENTWISE:
        others = [i for i in readers[0].input if i and i != tensors[-1]]
        if not all(i in inits and math.prod(inits[i].dims) == 1 for i in others):
            break
        tensors.append(readers[0].output[0])
        readers = consumers.get(tensors[-1], [])
    if not readers or outputs.intersection(tensors):
        return None
    return tensors, readers


def _constant_conv(node: onnx.NodeProto, inits: dict) -> bool:
    return node.op_type == "Conv" and len(node.input) > 1 and all(
        name in inits for name in node.input[1:] if name)


def _group(node: onnx.NodeProto) -> int:
    return next((a.i for a in node.attribute if a.name == "group"), 1)


def _conv_arrays(conv: onnx.NodeProto, inits: dict, weights: dict) -> list:
    """``[weight, bias]`` of ``conv`` as padded so far (bias None when it has none)."""
    name = conv.name or conv.output[0]
    if name not in weights:
        bias = numpy_helper.to_array(inits[conv.input[2]]) if len(conv.input) > 2 and conv.input[2] else None
        weights[name] = [numpy_helper.to_array(inits[conv.input[1]]), bias]
    return weights[name]


def _consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    return consumers


def _check_limits(multiple: int, max_fraction: float) -> None:
    if not isinstance(multiple, int) or multiple < 1:
        raise ValueError(f"multiple={multiple!r} must be a positive int (e.g. 16, the AVX-512 fp32 lanes)")
    if max_fraction < 0:
        raise ValueError(f"max_fraction={max_fraction!r} must be >= 0 "
                         "(0.25: at most a quarter more channels)")


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
