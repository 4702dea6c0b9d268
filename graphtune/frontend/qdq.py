"""Rewrite an ONNX model's quantization nodes into the fp32 graph graphtune compiles.

A QDQ model (``onnxruntime.quantization.quantize_static(..., quant_format=QuantFormat.QDQ)``,
:func:`graphtune.quantize`) keeps its weights as integers behind ``DequantizeLinear``
(DQ) nodes and rounds its activations through ``QuantizeLinear`` (Q) -> DQ pairs.
graphtune computes in fp32 between the pairs and keeps the model's rounding; its quantized
convs run on the int8 kernels. :func:`rewrite_qdq` applies, in order:

1. **Operator forms become QDQ form.** ``QLinearConv`` / ``QLinearMatMul`` become
   DQ -> ``Conv`` / ``MatMul`` -> Q (``QLinearConv``'s int32 bias dequantized with
   ``x_scale * w_scale``); ``ConvInteger`` / ``MatMulInteger`` (constant zero points) become
   DQ (scale 1) -> ``Conv`` / ``MatMul`` -> ``Round`` -> ``Cast`` to int32, or, when every
   reader casts the int32 result to float, the float result itself (the ``Cast`` an
   ``Identity``). The float op keeps the node's name. Other quantized operator forms
   (``QLinearAdd``, ``QGemm``...) and ``DynamicQuantizeLinear`` (dynamic quantization:
   runtime scales) raise :class:`~graphtune.errors.ModelError` naming the node and the fix.
2. **Constant DQs become fp32 initializers**: a DQ of a constant is
   ``(q - zero_point) * scale`` (per tensor, or per channel along ``axis``), a DQ of a Q
   of a constant (weights exported unquantized, as QAT exporters do) that value
   quantized and dequantized, so convs and matmuls see constant fp32 weights.
3. **Ops that commute with quantization run on the integers**: ``DQ -> MaxPool -> Q``,
   ``DQ -> AveragePool -> Q`` and ``DQ, DQ, ... -> Concat -> Q`` of uint8 activations
   (constant scalar scales and zero points) read the DQs' uint8 inputs and write the Q's
   uint8 output, as ONNX Runtime's QDQ transformer does; an input whose parameters differ
   from the Q's is requantized (``Q(DQ(.))`` before a Concat, fused into its producer's
   epilogue; after a MaxPool, whose DQ is increasing). An average pool runs on the integers
   when its DQ and Q share scale and zero point (what ONNX Runtime's quantizer writes) and it
   is 2-D, floor mode, undilated, and counts padding only at zero point 0 (post-ReLU
   tensors): the integer mean rounded half to even (:func:`graphtune.x86.pools.avg_pool2d`).
   Each output value is the one the model computes, and no fp32 tensor is stored
   between the convs and a pool or concat (GoogLeNet-int8, DenseNet-121-int8: 1.13x).
4. **Activation quantization becomes elementwise fp32 ops** (fake quantization). A uint8 Q or
   DQ with constant scalar parameters (what ``graphtune.quantize`` writes for activations)
   becomes its storage form (but see the pair below)::

       q = Cast<uint8>(Clip(Round(x / s) + z, 0, 255));   y = (Cast<float>(q) - z) * s

   so that the compiled model passes ``q`` between its functions, one byte per value: an
   int8 conv reads ``q`` itself (:func:`graphtune.compiler.int8.stored_uint8`), an op of
   rule 3 reads it, an fp32 reader (a residual add) dequantizes it in its own epilogue.
   Another Q -> DQ pair with constant scales and zero points, and a storage-form pair whose
   integers nothing else reads and whose DQ only ``Add`` nodes read (a residual branch: the
   uint8 would be converted straight back) -- except the second of two such branches of one
   ``Add`` (ResNet's downsample), whose Q takes the storage form and whose ``DequantizeLinear``
   stays, for the compiler to fuse into the conv writing the first -- becomes::

       y = min(max(round(x / s_q), q_min - z_q), q_max - z_q) * s_d      (+ z_q - z_d before * s_d
                                                                            when the zero points differ)

   which is ONNX's ``(saturate(round(x / s_q) + z_q) - z_d) * s_d`` (``round`` half to
   even, ``[q_min, q_max]`` the range of the quantized type: the saturation also does the
   work of a ReLU the quantizer removed). ``Div``, ``Round``, ``Clip`` and ``Mul`` by
   scalars run in any channel layout and fuse into the producing conv's epilogue;
   per-channel scales become ``[C, 1, 1]``-shaped constants along their axis (zero points
   that differ by channel stay: ``Clip`` takes scalar bounds).
5. **What is left** -- a Q or DQ of another form whose partner is no DQ or Q (an op on the
   integers between them), non-constant scales, blocked or float8 quantization -- stays as
   TVM imports it (``relax.quantize`` / ``relax.dequantize``, fp32 arithmetic in plain
   ``NCHW``, a layout boundary). One warning names these nodes, once per process however
   often the model is imported (``tune`` imports it several times).

Between rules 1 and 2 it records every conv and dense layer the int8 kernels can run --
``DQ(x) -> Conv(., DQ(w))``, ``DQ(x) -> Gemm(., DQ(w))`` or ``DQ(x) -> MatMul(., DQ(w))`` of
uint8 activations (constant scalar scale and zero point) and constant symmetric int8 weights
(one scale or one per output channel) -- with its quantization, as JSON in the model's
``metadata_props`` under :data:`INT8_NODES` (read back by :func:`int8_nodes`; the importer
hands it to :func:`graphtune.frontend.walk`, which makes those convs ``conv2d_int8`` /
``depthwise_conv2d_int8`` nodes and the batch-1 dense layers ``dense_int8`` ones, and
:mod:`graphtune.compiler.int8` recovers the integers from the fp32 operands exactly).

Examples
--------
>>> import numpy as np
>>> from onnx import TensorProto, helper, numpy_helper
>>> inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
...          numpy_helper.from_array(np.array(0, np.uint8), "z"),
...          numpy_helper.from_array(np.ones((4, 3, 1, 1), np.int8), "wq"),
...          numpy_helper.from_array(np.full(4, 0.1, np.float32), "ws"),
...          numpy_helper.from_array(np.zeros(4, np.int8), "wz")]
>>> nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
...          helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq"),
...          helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0, name="wdq"),
...          helper.make_node("Conv", ["xd", "w"], ["y"], name="conv")]
>>> graph = helper.make_graph(
...     nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
>>> rewritten = rewrite_qdq(model)
>>> [n.op_type for n in rewritten.graph.node]
['Div', 'Round', 'Clip', 'Cast', 'Cast', 'Mul', 'Conv']
>>> numpy_helper.to_array(next(t for t in rewritten.graph.initializer if t.name == "w"))[:, 0, 0, 0]
array([0.1, 0.1, 0.1, 0.1], dtype=float32)
"""

from __future__ import annotations

import json
import warnings
from collections import defaultdict
from collections.abc import Mapping
from typing import TypeVar

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

from ..errors import ModelError
from .fold import drop_dead

_T = TypeVar("_T")

__all__ = ["rewrite_qdq", "QDQ_OPS", "INT8_NODES", "INT8_CHANNELS", "int8_nodes", "weight_pair_max"]

_LAYERS = ("Conv", "Gemm", "MatMul")
"""The ONNX ops whose ``DQ(x), DQ(w)`` form may run on the int8 kernels (:func:`_output_axis`)."""

INT8_NODES = "graphtune.int8_nodes"
"""Metadata key (ONNX ``metadata_props``; Relax module attribute after import) of the JSON
:func:`int8_nodes` reads: the quantization of every conv and dense the int8 kernels can run."""

QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
"""Quantization ops that may be left in the graph (rule 5); TVM imports them."""

_RANGES: dict[int, tuple[int, int]] = {
    TensorProto.UINT8: (0, 255), TensorProto.INT8: (-128, 127),
    TensorProto.UINT16: (0, 65535), TensorProto.INT16: (-32768, 32767),
    TensorProto.UINT4: (0, 15), TensorProto.INT4: (-8, 7),
}
"""Saturation range of each integer type QuantizeLinear can produce."""

INT8_CHANNELS = 4
"""Input channels of an int8 conv2d must be a multiple of this, the widest int8 instruction's
``dot`` (``graphtune.x86.ISAS``), for every target to have candidates: fewer are padded with
zero weights (:func:`graphtune.frontend.pad.pad_int8_input_channels`)."""

_INTEGER_FORMS = frozenset({"ConvInteger", "MatMulInteger"})
_OTHER_FORMS = frozenset({"QGemm", "QAttention", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"})
_FIX = ("re-export the model in QDQ form (onnxruntime.quantization.quantize_static(..., "
        "quant_format=QuantFormat.QDQ), or graphtune.quantize)")


def rewrite_qdq(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its quantization nodes rewritten into fp32 (see the module docstring).

    Parameters
    ----------
    model : onnx.ModelProto
        Any ONNX model; one without quantization nodes is returned as is.

    Returns
    -------
    onnx.ModelProto
        A rewritten copy computing what ``model`` computes, up to the fp32 rounding of
        the ops between the quantization points.

    Raises
    ------
    ModelError
        For a quantized operator form graphtune cannot rewrite (names the node and the fix).

    Warns
    -----
    UserWarning
        Once per process, naming the quantization nodes left as TVM imports them (rule 5), and
        once naming the quantized convs and dense layers the int8 kernels cannot run (int8
        activations, asymmetric weights...): they run in fp32 on their dequantized operands.

    Examples
    --------
    >>> from graphtune import models
    >>> model = models.get("resnet18", image_size=32)
    >>> rewrite_qdq(model) is model
    True
    """
    if not any(_is_quantized(node) for node in model.graph.node):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rewriter = _Rewriter(out)
    _apply(out.graph, rewriter.operator_form)
    quantized = rewriter.quantized_nodes()  # every quantized conv / dense is DQ -> Conv / Gemm / MatMul now
    rewriter.integer_ops()
    rewriter.readers = _readers(out.graph)
    rewriter.makers = {output: node for node in out.graph.node for output in node.output}
    _apply(out.graph, rewriter.dequantize)
    out.graph.initializer.extend(rewriter.new_inits)
    drop_dead(out.graph)
    _warn_left(out.graph, rewriter.in_readers)
    if quantized:
        out.metadata_props.add(key=INT8_NODES, value=json.dumps(quantized, sort_keys=True))
    return out


def _readers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    """The nodes reading each tensor of ``graph`` (once per node)."""
    readers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        for name in dict.fromkeys(node.input):
            readers[name].append(node)
    return readers


def _apply(graph: onnx.GraphProto, rule) -> None:
    """Replace every node of ``graph`` by the nodes ``rule(node)`` returns, in order."""
    nodes = [new for node in graph.node for new in rule(node)]
    del graph.node[:]
    graph.node.extend(nodes)


def int8_nodes(metadata: Mapping[str, str]) -> dict[str, dict]:
    """The quantized convs and dense layers :func:`rewrite_qdq` found, by ONNX node name:
    ``{"x_scale": float, "x_zero_point": int, "w_scale": [float, ...], "weight_pair_max": int}``
    (one scale, or one per output channel; :func:`weight_pair_max` of the int8 weights, absent
    in records of older graphtune versions).

    Their rewritten fp32 graph computes ``(x_q - x_zero_point) * x_scale`` into the conv (dense)
    and weights ``w_q * w_scale``: the compiler recovers ``x_q`` and ``w_q`` exactly by rounding
    and runs the node on the int8 kernels (:mod:`graphtune.compiler.int8`).

    Examples
    --------
    >>> int8_nodes({INT8_NODES: '{"c": {"w_scale": [0.5], "x_scale": 0.1, "x_zero_point": 3}}'})
    {'c': {'w_scale': [0.5], 'x_scale': 0.1, 'x_zero_point': 3}}
    >>> int8_nodes({})
    {}
    """
    text = metadata.get(INT8_NODES)
    return dict(json.loads(str(text))) if text else {}


def _is_quantized(node: onnx.NodeProto) -> bool:
    return (node.op_type in QDQ_OPS or node.op_type in _INTEGER_FORMS or node.op_type in _OTHER_FORMS
            or node.op_type.startswith("QLinear") or node.op_type == "DynamicQuantizeLinear")


def _warn_left(graph: onnx.GraphProto, kept: set[str]) -> None:
    """One warning naming the quantization nodes TVM runs as it imports them (but the ``kept``
    dequantizations, which run in their readers)."""
    left: dict[str, list[str]] = defaultdict(list)
    for node in graph.node:
        if node.op_type in QDQ_OPS and node.output[0] not in kept:
            left[node.op_type].append(node.name or node.output[0])
    if not left:
        return
    listed = "; ".join(f"{kind} ({len(names)}x: {', '.join(names[:3])}"
                       f"{', ...' if len(names) > 3 else ''})" for kind, names in sorted(left.items()))
    message = (f"graphtune.frontend: quantization nodes run in fp32 as TVM imports them, each a "
               f"plain-NCHW layout boundary: {listed}. Only Q -> DQ pairs with constant scales and "
               "zero points (and DQs of constants) become layout-free fp32 ops")
    _warn_once(message, stacklevel=4)


def _warn_fp32(reasons: dict[str, str]) -> None:
    """One warning naming the quantized conv / dense nodes that run in fp32 (``{name: reason}``)."""
    if not reasons:
        return
    listed = "; ".join(f"{name} ({reason})" for name, reason in list(reasons.items())[:5])
    more = f"; and {len(reasons) - 5} more" if len(reasons) > 5 else ""
    message = (f"graphtune.frontend: {len(reasons)} quantized node(s) run in fp32 on their dequantized "
               f"operands, as the QDQ model defines them: {listed}{more}. The int8 kernels run uint8 "
               "activations and symmetric int8 weights (graphtune.quantize writes those)")
    _warn_once(message, stacklevel=5)


def _warn_once(message: str, stacklevel: int) -> None:
    """``warnings.warn(message)`` unless this process has issued it (:data:`_WARNED`)."""
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, UserWarning, stacklevel=stacklevel)


_WARNED: set[str] = set()
"""Warnings :func:`_warn_once` has issued in this process, each issued once: ``tune`` imports a
model several times, and Python's once-per-location filter forgets what it showed whenever
filters change (the importer silences TVM's own warnings with ``catch_warnings``)."""


class _Rewriter:
    """Constants, producers and fresh names of one model being rewritten."""

    def __init__(self, model: onnx.ModelProto) -> None:
        graph = model.graph
        self.model = model
        self.tensors: dict[str, TensorProto] = {t.name: t for t in graph.initializer}
        for node in graph.node:
            if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
                self.tensors[node.output[0]] = node.attribute[0].t
        self.arrays: dict[str, np.ndarray] = {}
        self.producer: dict[str, onnx.NodeProto] = {}
        self.consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        self.readers: dict[str, list[onnx.NodeProto]] = {}  # of the graph rule 4 rewrites
        self.makers: dict[str, onnx.NodeProto] = {}  # its producers
        self.in_readers: set[str] = set()  # outputs of the DQs kept for their readers
        for node in graph.node:
            for name in set(node.input):
                self.consumers[name].append(node)
        self.outputs = {o.name for o in graph.output}
        self.in_fp32: dict[str, str] = {}
        self.new_inits: list[TensorProto] = []
        self.taken = ({t.name for t in graph.initializer} | {i.name for i in graph.input}
                      | {o for n in graph.node for o in n.output} | {n.name for n in graph.node})
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        self._ranks: dict[str, int] | None = None

    # ---------------------------------------------------------------- helpers
    def const(self, name: str) -> np.ndarray | None:
        """The value of a constant tensor, None for activations (and absent inputs)."""
        if name not in self.tensors:
            return None
        if name not in self.arrays:
            self.arrays[name] = numpy_helper.to_array(self.tensors[name])
        return self.arrays[name]

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    def add_const(self, base: str, value: np.ndarray, name: str | None = None) -> str:
        name = name or self.fresh(base)
        tensor = numpy_helper.from_array(np.asarray(value), name)
        self.tensors[name], self.arrays[name] = tensor, np.asarray(value)
        self.new_inits.append(tensor)
        return name

    def rank(self, name: str) -> int | None:
        """Rank of an activation from ONNX shape inference (run once, when first needed)."""
        if self._ranks is None:
            graph = shape_inference.infer_shapes(self.model).graph
            self._ranks = {v.name: len(v.type.tensor_type.shape.dim)
                           for v in [*graph.input, *graph.value_info, *graph.output]
                           if v.type.tensor_type.HasField("shape")}
        return self._ranks.get(name)

    def quantized_nodes(self) -> dict[str, dict]:
        """``{node name: quantization}`` of the ``DQ(x) -> Conv / Gemm / MatMul(., DQ(w))`` the int8
        kernels run (:func:`_output_axis`): uint8 activations with constant scalar scale and zero
        point, constant int8 weights with zero points 0 and one scale or one per output channel
        (see :func:`int8_nodes`). The others run in fp32 on their dequantized operands, named in
        one warning with the reason (:func:`_warn_fp32`)."""
        dqs = {n.output[0]: n for n in self.model.graph.node if n.op_type == "DequantizeLinear"}
        found: dict[str, dict] = {}
        fp32: dict[str, str] = {}
        for node in self.model.graph.node:
            if node.op_type not in _LAYERS or node.input[0] not in dqs or node.input[1] not in dqs:
                continue
            quantization = self._quantization(node, dqs[node.input[0]], dqs[node.input[1]])
            if isinstance(quantization, dict):
                found[node.name or node.output[0]] = quantization
            else:
                fp32[node.name or node.output[0]] = quantization
        _warn_fp32(fp32)
        return found

    def _quantization(self, node: onnx.NodeProto, x_dq: onnx.NodeProto, w_dq: onnx.NodeProto) -> dict | str:
        """The quantization of ``node`` reading ``x_dq`` and ``w_dq``'s outputs if the int8 kernels
        run it, else why they cannot."""
        x, w = self._params(x_dq), self._params(w_dq)
        w_q = self.const(w_dq.input[0])
        if x is None or x[0].size != 1:
            return "its input's scale and zero point are not constant scalars"
        if _quantized_type(x_dq, self.tensors) != TensorProto.UINT8:
            return "its input is not uint8 (the int8 kernels read uint8 activations)"
        if w is None or w_q is None:
            return "its weight, scales or zero points are not constants"
        if w_q.dtype != np.int8:
            return f"its weight is {w_q.dtype}, not int8"
        if np.any(w[1]):
            return "its weight zero points are not 0"
        axis = _output_axis(node, w_q)
        if axis is None:
            return (f"a {node.op_type} the int8 dense does not read (a Gemm needs transA 0 and "
                    "alpha 1, a MatMul a 2-D weight)")
        if w[0].size not in (1, w_q.shape[axis]) or (w[0].size > 1 and w[2] % w_q.ndim != axis):
            return "its weight is quantized neither per tensor nor per output channel"
        return {"x_scale": float(x[0].reshape(())), "x_zero_point": int(x[1].reshape(-1)[0]),
                "w_scale": [float(v) for v in w[0].astype(np.float32).reshape(-1)],
                "weight_pair_max": weight_pair_max(w_q, 1 - axis)}

    # ---------------------------------------------------------- rule 1: forms
    def operator_form(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        """``node``, or the DQ -> float op -> Q nodes of a quantized operator form."""
        kind = node.op_type
        if kind in ("QLinearConv", "QLinearMatMul"):
            return self._qlinear(node)
        if kind in _INTEGER_FORMS:
            return self._integer(node)
        if kind == "Cast" and node.input[0] in self.in_fp32:
            return [helper.make_node("Identity", [self.in_fp32[node.input[0]]], list(node.output),
                                     name=node.name)]
        if kind == "DynamicQuantizeLinear":
            raise ModelError(f"ONNX node {node.name or node.output[0]!r} (DynamicQuantizeLinear): "
                             "graphtune compiles statically quantized models, whose scales are "
                             "constants; quantize with calibration data instead (graphtune.quantize)")
        if kind.startswith("QLinear") or kind in _OTHER_FORMS:
            raise ModelError(f"ONNX node {node.name or node.output[0]!r} ({kind}) is a quantized "
                             f"operator form graphtune cannot import; {_FIX}")
        return [node]

    def _qlinear(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        ins = list(node.input) + [""] * (9 - len(node.input))
        x, xs, xz, w, ws, wz, ys, yz, bias = ins
        name = node.name or node.output[0]
        conv = node.op_type == "QLinearConv"
        dq_x = self._dq(name, "x", [x, xs, xz], axis=-2 if self._vector(xs) else None)
        dq_w = self._dq(name, "w", [w, ws, wz], axis=(0 if conv else -1) if self._vector(ws) else None)
        nodes = [dq_x, dq_w]
        inputs = [dq_x.output[0], dq_w.output[0]]
        if bias:
            x_scale, w_scale = self.const(xs), self.const(ws)
            if x_scale is None or w_scale is None:
                raise ModelError(f"ONNX node {name!r} (QLinearConv) has a bias but non-constant "
                                 f"input or weight scales; {_FIX}")
            scale = self.add_const(f"{name}/bias_scale",
                                   (x_scale.astype(np.float32) * w_scale.astype(np.float32)).ravel())
            dq_b = self._dq(name, "bias", [bias, scale], axis=0)
            nodes.append(dq_b)
            inputs.append(dq_b.output[0])
        float_out = self.fresh(f"{node.output[0]}/fp32")
        nodes.append(helper.make_node("Conv" if conv else "MatMul", inputs, [float_out], name=name))
        nodes[-1].attribute.extend(node.attribute)
        nodes.append(helper.make_node("QuantizeLinear", [float_out, ys, yz] if yz else [float_out, ys],
                                      list(node.output), name=self.fresh(f"{name}/quantize")))
        return nodes

    def _integer(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        ins = list(node.input) + [""] * (4 - len(node.input))
        x, w, xz, wz = ins
        name = node.name or node.output[0]
        conv = node.op_type == "ConvInteger"
        nodes = []
        for role, data, zero_name, axis in (("x", x, xz, -2), ("w", w, wz, 0 if conv else -1)):
            zero = self.const(zero_name) if zero_name else np.zeros((), np.int8)
            if zero is None or zero.ndim > 1:
                raise ModelError(f"ONNX node {name!r} ({node.op_type}) has a non-constant or "
                                 f"multi-dimensional zero point; {_FIX}")
            if zero.size == 1 and zero_name:
                zero = zero.reshape(())
                zero_name = self.add_const(f"{name}/{role}_zero_point", zero)
            scale = self.add_const(f"{name}/{role}_unit_scale", np.ones(zero.shape, np.float32))
            nodes.append(self._dq(name, role, [data, scale, zero_name], axis=axis if zero.ndim else None))
        out = node.output[0]
        float_out = self.fresh(f"{out}/fp32")
        nodes.append(helper.make_node("Conv" if conv else "MatMul",
                                      [nodes[0].output[0], nodes[1].output[0]], [float_out], name=name))
        nodes[-1].attribute.extend(node.attribute)
        readers = self.consumers.get(out, [])
        if out not in self.outputs and readers and all(
                r.op_type == "Cast" and _attr(r, "to", 0) == TensorProto.FLOAT for r in readers):
            self.in_fp32[out] = float_out  # only cast back to fp32: those Casts become Identity
            return nodes
        rounded = self.fresh(f"{out}/round")
        nodes.append(helper.make_node("Round", [float_out], [rounded], name=self.fresh(f"{name}/round")))
        nodes.append(helper.make_node("Cast", [rounded], [out], to=TensorProto.INT32,
                                      name=self.fresh(f"{name}/cast")))
        return nodes

    def _vector(self, name: str) -> bool:
        """A scale with more than one element: per-channel (per-row, per-column)."""
        value = self.const(name)
        return value is not None and value.size > 1

    def _dq(self, name: str, role: str, inputs: list[str], axis: int | None) -> onnx.NodeProto:
        while inputs and not inputs[-1]:
            inputs = inputs[:-1]
        node = helper.make_node("DequantizeLinear", inputs, [self.fresh(f"{name}/{role}")],
                                name=self.fresh(f"{name}/{role}_dequantize"))
        if axis is not None:
            node.attribute.append(helper.make_attribute("axis", axis))
        return node

    # --------------------------------------------- rule 3: ops on the integers
    def integer_ops(self) -> None:
        """Rule 3: ``DQ -> MaxPool -> Q`` and ``DQ, DQ... -> Concat -> Q`` of uint8 storage forms
        (:meth:`_stored_params`) run on the integers: the op reads the DQs' uint8 inputs and writes
        the Q's output. An input whose scale or zero point differ from the Q's is requantized
        first (``Q(DQ(q))``, a Concat input) or after (a MaxPool's output: its DQ is increasing, so
        the max commutes with it); the values are the model's, computed as it computes them."""
        graph = self.model.graph
        producer = {out: node for node in graph.node for out in node.output}  # as rule 1 left it
        readers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        for node in graph.node:
            for name in node.input:
                readers[name].append(node)
        outputs = {o.name for o in graph.output}
        nodes: list[onnx.NodeProto] = []
        absorbed: set[int] = set()  # the Qs whose output an op on the integers now writes
        for node in graph.node:
            if id(node) in absorbed:
                continue
            site = None
            if node.op_type in ("MaxPool", "AveragePool", "Concat") and node.output[0] not in outputs \
                    and not any(node.output[1:]) and len(readers[node.output[0]]) == 1:
                site = self._integer_site(node, readers[node.output[0]][0],
                                          [producer.get(name) for name in node.input])
            if site is None:
                nodes.append(node)
                continue
            quantize, dqs = site
            nodes.extend(self._on_integers(node, quantize, dqs))
            if quantize.output[0] in node.output:
                absorbed.add(id(quantize))
        del graph.node[:]
        graph.node.extend(nodes)

    def _integer_site(self, node: onnx.NodeProto, quantize: onnx.NodeProto,
                      dqs: list[onnx.NodeProto | None]) -> tuple[onnx.NodeProto, list[onnx.NodeProto]] | None:
        """``(quantize, dqs)`` when rule 3 applies to ``node``: its only reader ``quantize`` is a Q
        of the storage form and each input a DQ of it (of a positive scale before a MaxPool)."""
        target = self._stored_params(quantize) if quantize.op_type == "QuantizeLinear" else None
        if target is None:
            return None
        found = []
        for dq in dqs:
            params = None if dq is None or dq.op_type != "DequantizeLinear" else self._stored_params(dq)
            if dq is None or params is None:
                return None
            found.append((dq, params))
        if node.op_type == "MaxPool" and found[0][1][0] <= 0:
            return None
        if node.op_type == "AveragePool" and (
                found[0][1] != target or not _integer_average(node, self.rank(node.input[0]), target[1])):
            return None
        return quantize, [dq for dq, _ in found]

    def _on_integers(self, node: onnx.NodeProto, quantize: onnx.NodeProto,
                     dqs: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
        """Rule 3 on ``node``: the nodes replacing it (``quantize`` rewired or absorbed)."""
        target, nodes, inputs = self._stored_params(quantize), [], []
        for dq in dqs:
            if self._stored_params(dq) == target or node.op_type == "MaxPool":
                inputs.append(dq.input[0])
                continue
            dequantized = self._copy(dq, dq.input[0], self.fresh(f"{node.name}/{dq.output[0]}"))
            requantized = self._copy(quantize, dequantized.output[0],
                                     self.fresh(f"{dequantized.output[0]}/requantized"))
            nodes += [dequantized, requantized]
            inputs.append(requantized.output[0])
        del node.input[:]
        node.input.extend(inputs)
        if node.op_type == "MaxPool" and self._stored_params(dqs[0]) != target:
            node.output[0] = self.fresh(f"{node.output[0]}/uint8")
            dequantized = self._copy(dqs[0], node.output[0], self.fresh(f"{node.output[0]}/dequantized"))
            quantize.input[0] = dequantized.output[0]
            return [*nodes, node, dequantized]
        node.output[0] = quantize.output[0]
        return [*nodes, node]

    def _copy(self, node: onnx.NodeProto, data: str, output: str) -> onnx.NodeProto:
        """A Q / DQ with ``node``'s parameters and attributes from ``data`` to ``output``."""
        copy = helper.make_node(node.op_type, [data, *node.input[1:]], [output], name=self.fresh(output))
        copy.attribute.extend(node.attribute)
        return copy

    def _stored_params(self, node: onnx.NodeProto) -> tuple[float, int] | None:
        """``(scale, zero_point)`` of a Q / DQ of the uint8 storage form, else None. The form: an
        activation (no constant input), constant scalar float32 scale and zero point, uint8
        integers, and ``Round`` in the opset (11)."""
        if node.op_type not in QDQ_OPS or self.const(node.input[0]) is not None or self.opset < 11:
            return None
        params = self._params(node)
        if params is None or params[0].size != 1 or params[1].size != 1 or params[0].dtype != np.float32 \
                or _quantized_type(node, self.tensors) != TensorProto.UINT8:
            return None
        return float(params[0].reshape(())), int(params[1].reshape(()))

    # ------------------------------------------------- rules 2 and 4: Q, DQ nodes
    def dequantize(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        """``node``'s replacement: nothing for a folded DQ, the storage form's ops for a Q or DQ
        of that form, the fake-quant ops of another Q -> DQ pair."""
        for output in node.output:
            self.producer[output] = node
        stored = self._stored_params(node)
        source = self.producer.get(node.input[0])
        only_added = stored is not None and self._only_added(node, source)
        if only_added and self._second_branch(node):
            self.in_readers.add(node.output[0])
            return [node]
        if stored is not None and not only_added:
            return self._storage(node, *stored)
        params = self._params(node) if node.op_type == "DequantizeLinear" else None
        if params is None:
            return [node]
        data = self.const(node.input[0])
        if data is None and source is not None and source.op_type == "QuantizeLinear":
            q_params = self._params(source)
            bounds = _RANGES.get(_quantized_type(source, self.tensors))
            if q_params is None or bounds is None:
                return [node]
            x = self.const(source.input[0])
            if x is None:
                return self._fake_quantize(node, source, q_params, bounds, params)
            data = _quantized(x, *q_params, bounds)
        if data is None:
            return [node]
        self.add_const("", _dequantized(data, *params).astype(params[0].dtype), name=node.output[0])
        return []

    def _only_added(self, dq: onnx.NodeProto, source: onnx.NodeProto | None) -> bool:
        """Whether the uint8 storage form's DQ ``dq`` is better computed as fake quantization:
        it dequantizes a storage-form Q that nothing else reads (no int8 conv, pool or concat
        reads its integers) and only ``Add`` nodes (a residual branch) read ``dq`` (a ``Mul``
        reader is a SiLU or gate, which the uint8 chain turns into a table lookup,
        :mod:`graphtune.compiler.lut`).
        The epilogue computing the Q's input then rounds and clips in fp32 (``min(max(round(x /
        s), -z), 255 - z) * s``: the same values) instead of storing uint8 and converting back,
        4 fewer vector instructions per 16 values in ResNet's residual epilogues."""
        if dq.op_type != "DequantizeLinear" or source is None or source.op_type != "QuantizeLinear":
            return False
        integers, values = dq.input[0], dq.output[0]
        return (self._stored_params(source) is not None and self.readers.get(integers) == [dq]
                and not {integers, values} & self.outputs and bool(self.readers.get(values))
                and all(r.op_type == "Add" for r in self.readers[values]))

    def _second_branch(self, dq: onnx.NodeProto) -> bool:
        """Whether the :meth:`_only_added` ``dq`` is the second of two such branches of one
        ``Add`` (ResNet's downsample beside ``conv3``): one of them can fuse into the conv
        writing the other, this one then crosses memory as the uint8 ``q`` and stays a
        ``DequantizeLinear``, which the compiler fuses into its reader
        (:func:`graphtune.compiler.legalize.legalize`)."""
        adds = self.readers[dq.output[0]]
        if len(adds) != 1:
            return False
        add = adds[0]
        if len(add.input) != 2 or add.input[1] != dq.output[0] or add.input[0] == add.input[1]:
            return False
        first = self.makers.get(add.input[0])
        return first is not None and self._only_added(first, self.makers.get(first.input[0]))

    def _params(self, node: onnx.NodeProto) -> tuple[np.ndarray, np.ndarray, int] | None:
        """``(scale, zero_point, axis)`` of a Q / DQ whose parameters are constants, else None
        (and for blocked quantization and non-default precision)."""
        scale = self.const(node.input[1])
        zero_name = node.input[2] if len(node.input) > 2 else ""
        zero = self.const(zero_name) if zero_name else np.zeros((), np.int64)
        if scale is None or zero is None or _attr(node, "block_size", 0) or _attr(node, "precision", 0):
            return None
        return scale, zero.astype(np.int64), _attr(node, "axis", 1)

    def _storage(self, node: onnx.NodeProto, scale: float, zero: int) -> list[onnx.NodeProto]:
        """The storage form of a Q (``Cast<uint8>(Clip(Round(x / s) + z, 0, 255))``) or a DQ
        (``(Cast<float>(q) - z) * s``) writing its output: the uint8 tensor between them is
        what the model stores, one byte per value, read by int8 convs and integer ops."""
        base = node.name or node.output[0]
        if node.op_type == "QuantizeLinear":
            steps = [("Div", (scale,), None), ("Round", (), None), ("Add", (zero,), None),
                     ("Clip", (0.0, 255.0), None), ("Cast", (), TensorProto.UINT8)]
        else:
            steps = [("Cast", (), TensorProto.FLOAT), ("Sub", (zero,), None), ("Mul", (scale,), None)]
        steps = [step for step in steps if step[0] not in ("Add", "Sub") or zero]
        nodes: list[onnx.NodeProto] = []
        for index, (kind, operands, to) in enumerate(steps):
            name = self.fresh(f"{base}/{kind.lower()}")
            inputs = [nodes[-1].output[0] if nodes else node.input[0]] + [
                self.add_const(f"{name}_{k}", np.array(value, np.float32))
                for k, value in enumerate(operands)]
            output = node.output[0] if index == len(steps) - 1 else name
            nodes.append(helper.make_node(kind, inputs, [output], name=name))
            if to is not None:  # a Cast's element type
                nodes[-1].attribute.append(helper.make_attribute("to", to))
        return nodes

    def _fake_quantize(self, dq: onnx.NodeProto, q: onnx.NodeProto,
                       q_params: tuple[np.ndarray, np.ndarray, int], bounds: tuple[int, int],
                       dq_params: tuple[np.ndarray, np.ndarray, int]) -> list[onnx.NodeProto]:
        """Rule 4: elementwise fp32 ops computing ``dq(q(x))`` for an activation ``x``."""
        x = q.input[0]
        rank = self.rank(x)
        (s_q, z_q, axis_q), (s_d, z_d, axis_d), (q_min, q_max) = q_params, dq_params, bounds
        if self.opset < 11 or ((s_q.size > 1 or s_d.size > 1) and rank is None):  # Round: opset 11
            return [dq]
        base = dq.name or dq.output[0]
        rank = rank or 0  # per-tensor parameters only: scalars
        lo, hi = (_along(bound - z_q, axis_q, rank) for bound in (q_min, q_max))
        if np.ptp(lo) or np.ptp(hi):  # zero points differing by channel: Clip's bounds are scalars
            return [dq]
        lo, hi = lo.reshape(-1)[:1].reshape(()), hi.reshape(-1)[:1].reshape(())
        nodes: list[onnx.NodeProto] = []

        def op(kind: str, *operands: np.ndarray, output: str | None = None, to: int | None = None) -> None:
            name = self.fresh(f"{base}/{kind.lower()}")
            inputs = [nodes[-1].output[0] if nodes else x] + [
                self.add_const(f"{name}_{k}", value.astype(s_d.dtype)) for k, value in enumerate(operands)]
            nodes.append(helper.make_node(kind, inputs, [output or name], name=name))
            if to is not None:  # a Cast's element type
                nodes[-1].attribute.append(helper.make_attribute("to", to))

        op("Div", _along(s_q, axis_q, rank))
        op("Round")
        op("Clip", lo, hi)
        shift = _along(z_q, axis_q, rank) - _along(z_d, axis_d, rank)
        if np.any(shift):
            op("Add", shift)
        op("Mul", _along(s_d, axis_d, rank), output=dq.output[0])
        return nodes


def _quantized_type(node: onnx.NodeProto, tensors: dict[str, TensorProto]) -> int:
    """The ONNX element type a QuantizeLinear produces (uint8 by default)."""
    zero_name = node.input[2] if len(node.input) > 2 else ""
    return _attr(node, "output_dtype", 0) or (
        tensors[zero_name].data_type if zero_name else TensorProto.UINT8)


def weight_pair_max(w_q: np.ndarray, axis: int = 1) -> int:
    """The largest ``|w[..., 2j, ...]| + |w[..., 2j + 1, ...]|`` of int8 weights over the input
    channels along ``axis`` (a conv's ``OIHW`` and a dense's ``[M, K]``: 1; an odd last channel
    pairs with a zero one, as channel padding makes it) — the ``weight_pair_max`` of the node's
    workload (:data:`graphtune.ops.WEIGHT_PAIR_MAX`): ``vpmaddubsw`` sums these pairs in int16,
    exactly iff ``255 * weight_pair_max <= 32767``.

    Examples
    --------
    >>> w = np.array([[64, -64, 5], [-1, 2, -120]], np.int8)
    >>> weight_pair_max(w), weight_pair_max(w, 0)
    (128, 125)
    """
    magnitude = np.abs(np.moveaxis(w_q.astype(np.int64), axis, 0))
    if magnitude.shape[0] % 2:
        magnitude = np.concatenate([magnitude, np.zeros_like(magnitude[:1])])
    return int((magnitude[0::2] + magnitude[1::2]).max(initial=0))


def _output_axis(node: onnx.NodeProto, weight: np.ndarray) -> int | None:
    """The axis of ``weight`` holding ``node``'s output channels if the int8 kernels may run it:
    a Conv's 0; a Gemm's (``transA`` 0, ``alpha`` 1) 0 with ``transB`` (``[M, K]``), else 1
    (``[K, M]``); a MatMul's of a 2-D weight ``[K, M]`` 1 (ONNX Runtime quantizes it per tensor or
    per column). None for other nodes.

    Examples
    --------
    >>> gemm = helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)
    >>> _output_axis(gemm, np.zeros((10, 16))), _output_axis(helper.make_node("MatMul", ["x", "w"], ["y"]),
    ...                                                      np.zeros((2, 16, 10)))
    (0, None)
    """
    if node.op_type == "Conv":
        return 0
    if node.op_type == "Gemm" and not _attr(node, "transA", 0) and _attr(node, "alpha", 1) == 1:
        return 0 if _attr(node, "transB", 0) else 1
    return 1 if node.op_type == "MatMul" and weight.ndim == 2 else None


def _integer_average(pool: onnx.NodeProto, rank: int | None, zero: int) -> bool:
    """True if the ``AveragePool`` ``pool`` of a rank-``rank`` input of zero point ``zero`` runs
    on the integers (:func:`graphtune.x86.pools.avg_pool2d`): 2-D, explicit (or no) pads, floor
    mode, no dilation, and padding it counts only if the zero point is 0 (the integer pool pads
    with 0; the model averages the zero point there)."""
    counted_padding = _attr(pool, "count_include_pad", 0) and any(_attr(pool, "pads", [0, 0, 0, 0]))
    return rank == 4 and _attr(pool, "auto_pad", b"NOTSET") in (b"NOTSET", b"VALID") \
        and not _attr(pool, "ceil_mode", 0) and all(d == 1 for d in _attr(pool, "dilations", [1, 1])) \
        and not (counted_padding and zero)


def _attr(node: onnx.NodeProto, name: str, default: _T) -> _T:
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def _along(value: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """A scale or zero point shaped to broadcast against a rank-``rank`` tensor."""
    if value.size == 1 or rank == 0:
        return value.reshape(())
    return value.reshape([-1] + [1] * (rank - 1 - axis % rank))


def _quantized(x: np.ndarray, scale: np.ndarray, zero: np.ndarray, axis: int,
               bounds: tuple[int, int]) -> np.ndarray:
    """ONNX QuantizeLinear of a constant: ``saturate(round(x / scale) + zero)`` (int64)."""
    steps = np.rint(x.astype(np.float32) / _along(scale, axis, x.ndim).astype(np.float32))
    return np.clip(steps + _along(zero, axis, x.ndim), *bounds).astype(np.int64)


def _dequantized(q: np.ndarray, scale: np.ndarray, zero: np.ndarray, axis: int) -> np.ndarray:
    """ONNX DequantizeLinear of a constant: ``(q - zero) * scale`` in fp32, as ONNX Runtime."""
    diff = q.astype(np.int64) - _along(zero, axis, q.ndim)
    return diff.astype(np.float32) * _along(scale, axis, q.ndim).astype(np.float32)

