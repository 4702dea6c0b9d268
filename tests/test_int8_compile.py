"""Quantized (QDQ) convs and heads compiled on graphtune's int8 kernels, against ONNX Runtime and NumPy.

Small conv nets (tests/onnx_blocks.py) quantized by :func:`graphtune.quantize` (uint8
activations, int8 per-channel weights, seeded random calibration). Their quantized convs become
``conv2d_int8`` / ``depthwise_conv2d_int8`` layout nodes, their Gemm / MatMul heads ``dense_int8``
ones (graphtune/frontend/qdq.py, graphtune/compiler/int8.py): exact int32 sums, dequantized in
the kernel's epilogue. The
reference is ONNX Runtime with graph optimizations off (the QDQ semantics in fp32: its default
int8 path on this AVX2-only host saturates in ``vpmaddubsw``) and, for the conv-relu-conv net,
a NumPy evaluation of the QDQ graph in float64. An output a Q -> DQ pair ends may differ by one
step of its scale (a value within an fp32 rounding error of ``k + 0.5``).
"""

from __future__ import annotations

import functools
import json
import warnings

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import graphtune
from compile_check import ort_runs
from graphtune.compiler.int8 import check_pairs, int8_weight
from graphtune.compiler.plan import NodePlan
from graphtune.errors import ModelError
from graphtune.frontend import import_model, layout_ops
from graphtune.measure.build import arg_specs
from graphtune.ops import INT8_OPS
from graphtune.x86 import ISAS, isa_of
from onnx_blocks import Builder, onnx_model
from schedule_check import assert_scheduled

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


def grouped() -> onnx.ModelProto:
    """Group convs as ResNeXt and RegNet have them: 8 and 4 input channels per group (an output
    block of 16 channels spans 2 and 4 groups)."""
    b = Builder(3)
    x = b.node("Relu", [b.conv("conv", "input", 8, 32)], "relu0")
    x = b.node("Relu", [b.conv("g8", x, 32, 32, group=4)], "relu1")
    return b.model("grouped", [1, 8, 12, 12], b.conv("g4", x, 32, 32, group=8))


def conv_head(form: str, batch: int = 1, features: int = 16) -> onnx.ModelProto:
    """conv, global average pool, flatten, and a head of ``form``: ``gemm`` (``transB`` 0, weight
    ``[K, M]``) or ``matmul`` (weight ``[K, M]``, no bias: ONNX Runtime's quantizer would fuse a
    MatMul and its bias Add into a Gemm)."""
    b = Builder(2)
    x = b.node("Relu", [b.conv("conv", "input", 8, features)], "relu")
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x], "gap")], "flat")
    b.const("fc.w", (features, 12))
    inputs = [x, "fc.w", b.const("fc.b", (12,))] if form == "gemm" else [x, "fc.w"]
    head = b.node("Gemm" if form == "gemm" else "MatMul", inputs, "fc")
    return b.model(f"{form}_head", [batch, 8, 8, 8], head)


@functools.cache
def quantized(name: str, per_channel: bool = True, reduce_range: bool = False) -> onnx.ModelProto:
    model = {"crc": conv_relu_conv, "rdh": residual_depthwise_head, "gemm": lambda: conv_head("gemm"),
             "matmul": lambda: conv_head("matmul"), "grouped": grouped}[name]()
    return graphtune.quantize(model, feeds(model, 4, seed=0), per_channel=per_channel,
                              reduce_range=reduce_range)


def feeds(model: onnx.ModelProto, count: int = INPUTS, seed: int = 1) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return [{"input": rng.standard_normal(shape, dtype=np.float32)} for _ in range(count)]


def ort_run(model: onnx.ModelProto, inputs: list[dict]) -> list[np.ndarray]:
    """The first output of ONNX Runtime's QDQ reference (graph as written) per feed."""
    return [outputs[0] for outputs in ort_runs(model, inputs, optimized=False)]


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
        if op in INT8_OPS:
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


def test_quantized_convs_and_head_are_int8_layout_nodes():
    """Quantized convs and the Gemm head (transB 1) become int8 nodes (their workloads carry the
    dtypes; the 3-channel stem reads 4, the 4th zero), and the fp32 model keeps its fp32 nodes."""
    ops = {op.name: op for op in layout_ops(import_model(quantized("rdh")))}
    assert {name: str(op.op) for name, op in ops.items()} == {
        "stem": "conv2d_int8", "dw": "depthwise_conv2d_int8", "pw": "conv2d_int8", "fc": "dense_int8"}
    assert ops["stem"].workload["kernel"] == [16, 4, 3, 3]
    assert (ops["pw"].workload["dtype"], ops["pw"].workload["out_dtype"]) == ("uint8", "float32")
    assert ops["pw"].quant is not None and len(ops["pw"].quant["w_scale"]) == 16
    assert ops["fc"].workload == graphtune.ops.dense_int8_workload(
        [1, 16], [10, 16], out_dtype="float32", weight_pair_max=ops["fc"].workload["weight_pair_max"])
    assert ops["fc"].quant is not None and len(ops["fc"].quant["w_scale"]) == 10
    fp32 = {op.name: str(op.op) for op in layout_ops(import_model(residual_depthwise_head()))}
    assert fp32 == {"stem": "conv2d", "dw": "depthwise_conv2d", "pw": "conv2d", "fc": "dense"}


@pytest.mark.parametrize("form, per_channel", [("gemm", True), ("matmul", True), ("matmul", False)])
def test_quantized_heads_of_weight_k_by_m_are_dense_int8(form, per_channel):
    """A Gemm with transB 0 and a MatMul hold their weights [K, M] (per-column scales, or one):
    recorded per output feature; a batch of 2 or features no dot divides stay fp32 dense."""
    (fc,) = [op for op in layout_ops(import_model(quantized(form, per_channel))) if op.name == "fc"]
    assert (str(fc.op), fc.workload["weight"]) == ("dense_int8", [12, 16])
    assert fc.quant is not None and len(fc.quant["w_scale"]) == (12 if per_channel else 1)
    for model in (conv_head(form, batch=2), conv_head(form, features=18)):
        quantized_model = graphtune.quantize(model, feeds(model, 2, seed=0))
        assert {op.name: str(op.op) for op in layout_ops(import_model(quantized_model))}["fc"] == "dense"


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


def test_only_uint8_activations_and_int8_weights_run_int8(monkeypatch):
    """int8 activations (no uint8 x int8 kernel reads them) leave the conv in fp32, named with
    the reason in one warning however often the model is imported; it computes what the QDQ
    model defines."""
    # once per process: another test of this worker may have issued the same warning
    monkeypatch.setattr(graphtune.frontend.qdq, "_WARNED", set())
    unsigned = layout_ops(import_model(_qdq_conv(np.array(128, np.uint8))))
    model = _qdq_conv(np.array(0, np.int8))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        signed = layout_ops(import_model(model))
        compiled = graphtune.compile(model, graphtune.Config.uniform(model))
    assert [(op.name, str(op.op)) for op in unsigned] == [("conv", "conv2d_int8")]
    assert [(op.name, str(op.op)) for op in signed] == [("conv", "conv2d")]
    messages = [str(w.message) for w in caught if "graphtune" in str(w.message)]
    assert len(messages) == 1 and "conv (its input is not uint8" in messages[0], messages
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        np.testing.assert_allclose(compiled(feed["input"]), want, rtol=1e-5, atol=1e-5)


def test_weights_that_are_not_their_scale_multiples_are_refused():
    plan = NodePlan("layer1.conv", "conv2d_int8", {}, {}, "", "", {"w_scale": [0.1]})
    with pytest.raises(ModelError, match="ONNX node 'layer1.conv': its weights are not int8 multiples"):
        int8_weight(np.full((2, 4, 1, 1), 0.15, np.float32), plan)


def test_workloads_carry_the_weight_pair_bound():
    """Each int8 conv and dense workload records max |w0| + |w1| of its input-channel pairs: at
    most 128 with 7-bit weights (reduce_range), so those nodes' candidates use vpmaddubsw; the
    depthwise conv (no dot product) has none."""
    narrow = {op.name: op for op in layout_ops(import_model(quantized("rdh", reduce_range=True)))}
    wide = {op.name: op for op in layout_ops(import_model(quantized("rdh")))}
    assert "weight_pair_max" not in narrow["dw"].workload
    for name in ("stem", "pw", "fc"):
        assert narrow[name].workload["weight_pair_max"] <= 128 < wide[name].workload["weight_pair_max"]
        haswell = {"kind": "llvm", "mcpu": "haswell"}  # AVX2 only: its best exact instruction
        assert {k["isa"] for k in graphtune.x86.candidates(narrow[name].workload, haswell)} == {"avx2ubs"}


def test_tune_names_8bit_weights_a_cpu_without_vnni_runs_on_the_16bit_path():
    """Without VNNI, 8-bit weights cannot run vpmaddubsw exactly: tune's first step warns once,
    naming the nodes and the fix; 7-bit weights, or a VNNI target, give no warning."""
    from graphtune.pipeline import _warn_8bit_weights, extract

    haswell, znver4 = {"kind": "llvm", "mcpu": "haswell"}, {"kind": "llvm", "mcpu": "znver4"}
    wide = extract(quantized("rdh"), haswell, max_candidates=1)
    with pytest.warns(UserWarning, match=r"3 quantized node\(s\) \('stem', 'pw', 'fc'\) hold 8-bit "
                                         r"weights .* past 128; .* 'avx2ubs' .*reduce_range=True"):
        _warn_8bit_weights(wide, haswell)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_8bit_weights(extract(quantized("rdh"), znver4, max_candidates=1), znver4)
        _warn_8bit_weights(extract(quantized("rdh", reduce_range=True), haswell, max_candidates=1),
                           haswell)


def test_pmaddubsw_on_weights_beyond_its_bound_is_refused_when_packing():
    plan = NodePlan("layer1.conv", "conv2d_int8", {}, {"isa": "avx2ubs"}, "", "", {"w_scale": [0.1]})
    w_q = np.zeros((2, 4, 1, 1), np.int8)
    w_q[1, 2:4, 0, 0] = 100, -29
    with pytest.raises(ModelError, match="node 'layer1.conv': isa 'avx2ubs' .* reach 129 .*reduce_range"):
        check_pairs(w_q, plan)
    check_pairs(w_q, NodePlan("layer1.conv", "conv2d_int8", {}, {"isa": "avx2"}, "", "", {}))


@pytest.mark.integration
def test_reduce_range_model_runs_pmaddubsw_and_matches_onnxruntime():
    """7-bit weights: the uniform config's int8 convs and head run on int8 weights (avx2ubs, or
    VNNI where the host has it; no int16 anywhere), matching ORT's QDQ reference; forcing avx2ubs
    on 8-bit weights is refused."""
    model = quantized("rdh", reduce_range=True)
    config = graphtune.Config.uniform(model)
    isas = {config.nodes[name].knobs["isa"] for name in ("stem", "pw", "fc")}
    best = isa_of(None, {"weight_pair_max": 128})  # vpmaddubsw where it is the best exact one
    assert best.weight_dtype == "int8" and all(ISAS[isa].pairs == best.pairs for isa in isas), isas
    compiled = graphtune.compile(model, config)
    kernels = int8_functions(compiled)
    assert "int16" not in set().union(*kernels.values()) and "int8" in kernels["conv2d_int8"], kernels
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        got = compiled(feed["input"])
        assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()
        assert got.argmax() == want.argmax()
    wide = quantized("rdh")
    forced = graphtune.Config.uniform(wide)
    forced.nodes["pw"].knobs = {**forced.nodes["pw"].knobs, "isa": "avx2ubs", "ic_bn": 16}
    forced.nodes["pw"].knobs.pop("widen", None)
    with pytest.raises(graphtune.errors.KnobError, match="nodes.pw.knobs: conv2d_int8 knob 'isa' = 'avx2ubs' "
                       ".* weight_pair_max <= 128; .*reduce_range=True"):
        graphtune.compile(wide, forced)


@pytest.mark.integration
def test_conv_relu_conv_matches_onnxruntime_and_numpy():
    model = quantized("crc")
    compiled = graphtune.compile(model, graphtune.Config.uniform(model))
    kernels = int8_functions(compiled)
    weights = isa_of().weight_dtype  # int16 for vpmaddwd, int8 for VNNI
    assert set(kernels) == {"conv2d_int8"} and {"uint8", weights} <= kernels["conv2d_int8"], kernels
    assert compiled.schedules["conv2d_int8"] == {"kernel": 2}
    step = output_step(model)
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        got = compiled(feed["input"])
        assert np.abs(got - want).max() <= step * 1.001
        assert np.abs(got - numpy_qdq(model, feed)).max() <= step * 1.001


@pytest.mark.integration
def test_amx_convs_match_onnxruntime():
    """Both convs on AMX tiles (12-pixel rows, 8 and 16 input channels per tile row): the model's
    output is ORT's QDQ reference, as with the vector kernels."""
    if not graphtune.x86.amx.usable():
        pytest.skip("the host has no AMX (or Linux did not grant its tile state)")
    model = quantized("crc")
    config = graphtune.Config.uniform(model)
    for name in ("conv1", "conv2"):
        knobs = config.nodes[name].knobs
        config.nodes[name].knobs = {"ic_bn": knobs["ic_bn"], "oc_bn": 16, "reg_n": 12, "unroll_kw": False,
                                    "isa": "amx"}
    compiled = graphtune.compile(model, config)
    assert sum("llvm.x86.tdpbusd" in f.script() for f in compiled.functions.values()) == 2
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        got = compiled(feed["input"])
        assert np.abs(got - want).max() <= output_step(model) * 1.001
        assert np.abs(got - numpy_qdq(model, feed)).max() <= output_step(model) * 1.001


@pytest.mark.integration
@pytest.mark.parametrize("isa", ["default", "amx"])
def test_group_convs_run_int8_and_match_onnxruntime(isa):
    """Group convs of 8 and 4 channels per group on the int8 kernels (output blocks spanning
    whole groups, block-diagonal weights), on the host's vector instruction and on AMX tiles."""
    model = quantized("grouped")
    config = graphtune.Config.uniform(model)
    assert {name: str(config.nodes[name].op) for name in ("g8", "g4")} == dict.fromkeys(
        ("g8", "g4"), "group_conv2d_int8")
    if isa == "amx":
        if not graphtune.x86.amx.usable():
            pytest.skip("the host has no AMX (or Linux did not grant its tile state)")
        for name in ("g8", "g4"):
            config.nodes[name].knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 12, "unroll_kw": False,
                                        "isa": "amx"}
    compiled = graphtune.compile(model, config)
    assert set(int8_functions(compiled)) == {"conv2d_int8", "group_conv2d_int8"}
    assert_scheduled(compiled)
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        assert np.abs(compiled(feed["input"]) - want).max() <= output_step(model) * 1.001


@pytest.mark.integration
def test_residual_depthwise_head_matches_onnxruntime():
    model = quantized("rdh")
    compiled = graphtune.compile(model, graphtune.Config.uniform(model))
    kernels = int8_functions(compiled)
    assert set(kernels) == {"conv2d_int8", "depthwise_conv2d_int8", "dense_int8"}
    # [1, K] uint8 -> [1, M] float32
    assert {"uint8", isa_of().weight_dtype, "float32"} <= kernels["dense_int8"], kernels
    assert compiled.schedules["dense_int8"] == {"kernel": 1} and "dense" not in compiled.schedules
    assert_scheduled(compiled)
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        got = compiled(feed["input"])
        assert np.abs(got - want).max() <= 0.02 * np.abs(want).max()
        assert got.argmax() == want.argmax()


@pytest.mark.integration
def test_a_quantized_head_runs_fp32_when_its_config_says_so():
    """The head's candidate with ``precision: float32`` is the fp32 dense on the dequantized
    operands; the convs stay int8; the output is still ORT's QDQ reference."""
    model = quantized("rdh")
    config = graphtune.Config.uniform(model)
    fp32 = graphtune.x86.default_knobs(graphtune.ops.dense_workload([1, 16], [10, 16]))
    config.nodes["fc"].knobs = {**fp32, "precision": "float32"}
    compiled = graphtune.compile(model, config)
    assert compiled.schedules["dense"] == {"kernel": 1} and "dense_int8" not in compiled.schedules
    assert set(int8_functions(compiled)) == {"conv2d_int8", "depthwise_conv2d_int8"}
    assert_scheduled(compiled)
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        assert np.abs(compiled(feed["input"]) - want).max() <= output_step(model) * 1.001


@pytest.mark.integration
@pytest.mark.parametrize("form, per_channel", [("gemm", True), ("matmul", True), ("matmul", False)])
def test_heads_of_weight_k_by_m_match_onnxruntime(form, per_channel):
    """Gemm (transB 0) and MatMul heads, weights [K, M] per column or per tensor, on dense_int8."""
    model = quantized(form, per_channel)
    compiled = graphtune.compile(model, graphtune.Config.uniform(model))
    assert compiled.schedules["dense_int8"] == {"kernel": 1}
    assert_scheduled(compiled)
    inputs = feeds(model)
    for feed, want in zip(inputs, ort_run(model, inputs)):
        assert np.abs(compiled(feed["input"]) - want).max() <= output_step(model) * 1.001


@pytest.mark.integration
def test_tune_measures_int8_candidates(tmp_path):
    """tune measures int8 kernels for the quantized convs (their records key the dtypes; timed
    writing uint8) and the fp32 conv of the same shapes beside them (``precision``), and its
    config compiles to the same outputs."""
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
    # int8 kernels are timed writing uint8, as the model stores their outputs (ops.timed_as);
    # the nodes' workloads keep the kernel's dequantized float32 output
    assert measured == {("conv2d_int8", "uint8", "uint8"), ("conv2d", "float32", None)}, measured
    assert {node.workload["out_dtype"] for node in result.config.nodes.values()} == {"float32"}
    # a transform before an int8 candidate moves uint8, before an fp32 one float32 (ops.input_dtype)
    assert {dtype for *_, dtype in result.graph.transform_pairs(missing_only=False)} == {"float32", "uint8"}
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
    assert compiled.schedules["dense_int8"] == {"kernel": 1}
    inputs = feeds(model, 8)
    rel = []
    for feed, want in zip(inputs, ort_run(model, inputs)):
        got = compiled(feed["input"])
        rel.append(float(np.abs(got - want).max() / np.abs(want).max()))
        assert got.argmax() == want.argmax()
    assert max(rel) <= 0.05 and sum(r <= 1e-5 for r in rel) >= len(rel) / 2, rel
