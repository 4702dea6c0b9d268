"""Quantized (QDQ) convs compiled on graphtune's int8 kernels, against ONNX Runtime and NumPy.

Small conv nets (tests/onnx_blocks.py) quantized by :func:`graphtune.quantize` (uint8
activations, int8 per-channel weights, seeded random calibration). Their quantized convs become
``conv2d_int8`` / ``depthwise_conv2d_int8`` layout nodes (graphtune/frontend/qdq.py,
graphtune/compiler/int8.py): exact int32 sums, dequantized in the kernel's epilogue. The
reference is ONNX Runtime with graph optimizations off (the QDQ semantics in fp32: its default
int8 path on this AVX2-only host saturates in ``vpmaddubsw``) and, for the conv-relu-conv net,
a NumPy evaluation of the QDQ graph in float64. An output a Q -> DQ pair ends may differ by one
step of its scale (a value within an fp32 rounding error of ``k + 0.5``).
"""

from __future__ import annotations

import functools
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import graphtune
from graphtune.compiler.int8 import int8_weight
from graphtune.compiler.plan import NodePlan
from graphtune.errors import ModelError
from graphtune.frontend import import_model, layout_ops
from graphtune.measure.build import arg_specs
from graphtune.ops import Op
from onnx_blocks import Builder, onnx_model

REFERENCE = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
INPUTS = 4


def conv_relu_conv() -> onnx.ModelProto:
    b = Builder(0)
    x = b.node("Relu", [b.conv("conv1", "input", 8, 16)], "relu1")
    return b.model("crc", [1, 8, 12, 12], b.conv("conv2", x, 16, 16))


def residual_depthwise_head() -> onnx.ModelProto:
    """RGB stem (3 channels, padded to 4), depthwise + pointwise branch, residual add, max pool,
    global average pool, Gemm head."""
    b = Builder(1)
    x = b.node("Relu", [b.conv("stem", "input", 3, 16)], "relu0")
    y = b.node("Relu", [b.conv("dw", x, 16, 16, group=16)], "relu1")
    x = b.node("Add", [x, b.conv("pw", y, 16, 16, k=(1, 1))], "add")
    x = b.node("MaxPool", [x], "pool", kernel_shape=[2, 2], strides=[2, 2])
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x], "gap")], "flat")
    b.const("fc.w", (10, 16))
    b.const("fc.b", (10,))
    return b.model("rdh", [1, 3, 16, 16], b.node("Gemm", [x, "fc.w", "fc.b"], "fc", transB=1))


@functools.cache
def quantized(name: str) -> onnx.ModelProto:
    model = {"crc": conv_relu_conv, "rdh": residual_depthwise_head}[name]()
    return graphtune.quantize(model, feeds(model, 4, seed=0))


def feeds(model: onnx.ModelProto, count: int = INPUTS, seed: int = 1) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return [{"input": rng.standard_normal(shape, dtype=np.float32)} for _ in range(count)]


def ort_run(model: onnx.ModelProto, inputs: list[dict]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = REFERENCE
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return [session.run(None, feed)[0] for feed in inputs]


def output_step(model: onnx.ModelProto) -> float:
    """The scale of the DequantizeLinear producing the graph output."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    last = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    assert last.op_type == "DequantizeLinear", last.op_type
    return float(inits[last.input[1]])


def int8_functions(compiled: graphtune.CompiledModel) -> dict[str, set[str]]:
    """The compiled int8 kernels: op kind -> the dtypes of their buffers."""
    found: dict[str, set[str]] = {}
    for func in compiled.functions.values():
        op = str(func.attrs["graphtune.op"])
        if op in (Op.CONV2D_INT8, Op.DEPTHWISE_CONV2D_INT8):
            found.setdefault(op, set()).update(dtype for _, dtype in arg_specs(func))
    return found


def numpy_qdq(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> np.ndarray:
    """The QDQ conv-relu graph evaluated by ONNX's definitions, convs in float64."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer} | dict(feed)
    for node in model.graph.node:
        args = [values[name] for name in node.input if name]
        if node.op_type == "QuantizeLinear":
            x, scale, zero = args
            out = np.clip(np.rint(x / scale) + zero, 0, 255).astype(zero.dtype)
        elif node.op_type == "DequantizeLinear":
            q, scale = args[:2]
            zero = args[2] if len(args) > 2 else np.zeros((), q.dtype)
            axis = next((a.i for a in node.attribute if a.name == "axis"), 1) % q.ndim
            shape = [-1] + [1] * (q.ndim - 1 - axis) if scale.size > 1 else []
            out = ((q.astype(np.int64) - zero.reshape(shape)) * scale.reshape(shape)).astype(np.float32)
        elif node.op_type == "Relu":
            out = np.maximum(args[0], 0)
        else:
            assert node.op_type == "Conv", node.op_type
            x, w, bias = (a.astype(np.float64) for a in args)
            k = w.shape[2]
            padded = np.pad(x, [(0, 0), (0, 0), (k // 2, k // 2), (k // 2, k // 2)])
            h, wd = x.shape[2:]
            windows = np.stack([padded[:, :, i:i + h, j:j + wd] for i in range(k) for j in range(k)], -1)
            out = (np.einsum("nchwt,oct->nohw", windows, w.reshape(*w.shape[:2], -1))
                   + bias.reshape(1, -1, 1, 1)).astype(np.float32)
        values[node.output[0]] = out
    return values[model.graph.output[0].name]


def test_quantized_convs_are_int8_layout_nodes():
    """Quantized convs become int8 nodes (their workloads carry the dtypes; the 3-channel stem
    reads 4, the 4th zero), the Gemm head stays fp32, and the fp32 model keeps its fp32 nodes."""
    ops = {op.name: op for op in layout_ops(import_model(quantized("rdh")))}
    assert {name: str(op.op) for name, op in ops.items()} == {
        "stem": "conv2d_int8", "dw": "depthwise_conv2d_int8", "pw": "conv2d_int8", "fc": "dense"}
    assert ops["stem"].workload["kernel"] == [16, 4, 3, 3]
    assert (ops["pw"].workload["dtype"], ops["pw"].workload["out_dtype"]) == ("uint8", "float32")
    assert ops["pw"].quant is not None and len(ops["pw"].quant["w_scale"]) == 16
    fp32 = {op.name: str(op.op) for op in layout_ops(import_model(residual_depthwise_head()))}
    assert fp32 == {"stem": "conv2d", "dw": "depthwise_conv2d", "pw": "conv2d", "fc": "dense"}


def _qdq_conv(activation_zero: np.ndarray) -> onnx.ModelProto:
    """Q -> DQ -> Conv(DQ(int8 w)) of a 4-channel input, activations of ``activation_zero``'s type."""
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(activation_zero, "z"),
             numpy_helper.from_array(np.ones((8, 4, 3, 3), np.int8), "wq"),
             numpy_helper.from_array(np.full(8, 0.1, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(8, np.int8), "wz")]
    nodes = [helper.make_node("QuantizeLinear", ["input", "s", "z"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq"),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], axis=0, name="wdq"),
             helper.make_node("Conv", ["xd", "w"], ["output"], pads=[1] * 4, name="conv")]
    return onnx_model(nodes, inits, "qdq_conv", [1, 4, 8, 8], output_shape=[1, 8, 8, 8])


def test_only_uint8_activations_and_int8_weights_run_int8():
    """int8 activations (no uint8 x int8 kernel reads them) leave the conv in fp32."""
    unsigned = layout_ops(import_model(_qdq_conv(np.array(128, np.uint8))))
    signed = layout_ops(import_model(_qdq_conv(np.array(0, np.int8))))
    assert [(op.name, str(op.op)) for op in unsigned] == [("conv", "conv2d_int8")]
    assert [(op.name, str(op.op)) for op in signed] == [("conv", "conv2d")]


def test_weights_that_are_not_their_scale_multiples_are_refused():
    plan = NodePlan("layer1.conv", "conv2d_int8", {}, {}, "", "", {"w_scale": [0.1]})
    with pytest.raises(ModelError, match="ONNX node 'layer1.conv': its weights are not int8 multiples"):
        int8_weight(np.full((2, 4, 1, 1), 0.15, np.float32), plan)


@pytest.mark.integration
def test_conv_relu_conv_matches_onnxruntime_and_numpy():
    model = quantized("crc")
    compiled = graphtune.compile(model, graphtune.Config.uniform(model))
    kernels = int8_functions(compiled)
    assert set(kernels) == {"conv2d_int8"} and {"uint8", "int16"} <= kernels["conv2d_int8"], kernels
    assert compiled.schedules["conv2d_int8"] == {"kernel": 2}
    step = output_step(model)
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        got = compiled(feed["input"])
        assert np.abs(got - want).max() <= step * 1.001
        assert np.abs(got - numpy_qdq(model, feed)).max() <= step * 1.001


@pytest.mark.integration
def test_residual_depthwise_head_matches_onnxruntime():
    model = quantized("rdh")
    compiled = graphtune.compile(model, graphtune.Config.uniform(model))
    assert set(int8_functions(compiled)) == {"conv2d_int8", "depthwise_conv2d_int8"}
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        got = compiled(feed["input"])
        assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()
        assert got.argmax() == want.argmax()


@pytest.mark.integration
def test_tune_measures_int8_candidates(tmp_path):
    """tune measures int8 kernels for the quantized convs (their records key the dtypes) and the
    fp32 conv of the same shapes beside them (``precision``), and its config compiles to the
    same outputs."""
    model = quantized("crc")
    records = tmp_path / "crc.records.jsonl"
    result = graphtune.tune(model, records=records, max_candidates=2, min_repeat_ms=1, repeat=1,
                            progress=False)
    assert {name: str(node.op) for name, node in result.config.nodes.items()} == {
        "conv1": "conv2d_int8", "conv2": "conv2d_int8"}
    for node in result.config.nodes.values():
        assert ("isa" in node.knobs) != (node.knobs.get("precision") == "float32"), node.knobs
    kernels = [json.loads(line) for line in records.read_text().splitlines()]
    measured = {(r["kind"], r["workload"]["dtype"], r["workload"].get("out_dtype"))
                for r in kernels if r["kind"] in ("conv2d", "conv2d_int8")}
    assert measured == {("conv2d_int8", "uint8", "float32"), ("conv2d", "float32", None)}, measured
    compiled = graphtune.compile(model, result.config)
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        assert np.abs(compiled(feed["input"]) - want).max() <= output_step(model) * 1.001


@pytest.mark.integration
def test_a_quantized_conv_runs_fp32_when_its_config_says_so():
    """A candidate with ``precision: float32`` runs the fp32 conv on the dequantized operands;
    the other node stays int8; the output is still ORT's QDQ reference."""
    model = quantized("crc")
    config = graphtune.Config.uniform(model, block=8)
    fp32 = graphtune.x86.default_knobs(graphtune.ops.conv2d_workload([1, 16, 12, 12], [16, 16, 3, 3],
                                                                     padding=[1, 1, 1, 1]), block=8)
    config.nodes["conv2"].knobs = {**fp32, "precision": "float32"}
    compiled = graphtune.compile(model, config)
    assert compiled.schedules["conv2d_int8"] == {"kernel": 1}
    assert compiled.schedules["conv2d"] == {"kernel": 1}
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        assert np.abs(compiled(feed["input"]) - want).max() <= output_step(model) * 1.001
    config.nodes["conv1"].knobs = {**config.nodes["conv1"].knobs, "precision": "bfloat16"}
    with pytest.raises(graphtune.errors.KnobError,
                       match="nodes.conv1.knobs: conv2d_int8 knob 'precision' = 'bfloat16'"):
        graphtune.compile(model, config)


@pytest.mark.slow
def test_quantized_resnet18_matches_onnxruntime():
    """Every quantized conv on the int8 kernels; the outputs agree as
    tests/test_quantized.py's fp32 path does (a step flipped early propagates)."""
    rng = np.random.default_rng(0)
    calibration = [{"input": rng.standard_normal((1, 3, 32, 32), dtype=np.float32)} for _ in range(4)]
    model = graphtune.quantize("resnet18", calibration, image_size=32)
    compiled = graphtune.compile(model, graphtune.Config.uniform(model))
    assert compiled.schedules["conv2d_int8"] == {"kernel": 20}
    inputs = feeds(model, 8)
    rel = []
    for feed, want in zip(inputs, ort_run(model, inputs)):
        got = compiled(feed["input"])
        rel.append(float(np.abs(got - want).max() / np.abs(want).max()))
        assert got.argmax() == want.argmax()
    assert max(rel) <= 0.05 and sum(r <= 1e-5 for r in rel) >= len(rel) / 2, rel
