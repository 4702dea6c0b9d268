"""Output-channel padding of convs whose output leaves the blocked layout (frontend/pad.py)."""

import numpy as np
import pytest
from onnx import numpy_helper

from compile_check import ort_outputs
from graphtune import Config, compile, extract, quantize
from graphtune.frontend import pad_channel_chains, pad_output_channels
from onnx_blocks import Builder

pytestmark = pytest.mark.unit

pytest.importorskip("onnxruntime")


def head_model(channels: int = 81, consumer: str = "Transpose", group: int = 1):
    """input [1, 16, 8, 8] -> 3x3 conv to ``channels`` -> ``consumer`` (SSD's class head)."""
    b = Builder(seed=3)
    y = b.conv("head", "input", 16, channels, group=group)
    if consumer == "Transpose":
        out = b.node("Transpose", [y], "head.transpose", perm=[0, 2, 3, 1])
    elif consumer == "Relu":
        out = b.node("Relu", [y], "head.relu")
    else:
        out = y
    return b.model("head", [1, 16, 8, 8], out)


def run(model, x):
    return ort_outputs(model, [x], optimized=False)[0]


def test_head_conv_is_padded_to_a_multiple_of_16_and_sliced_back():
    model = head_model(81)
    padded = pad_output_channels(model)
    weights = {t.name: list(t.dims) for t in padded.graph.initializer}
    conv = next(n for n in padded.graph.node if n.name == "head")
    assert weights[conv.input[1]] == [96, 16, 3, 3] and weights[conv.input[2]] == [96]
    assert [n.op_type for n in padded.graph.node] == ["Conv", "Slice", "Transpose"]
    assert {t.name: list(t.dims) for t in model.graph.initializer}["head.w"] == [81, 16, 3, 3]
    x = np.random.default_rng(0).standard_normal((1, 16, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(run(padded, x), run(model, x), rtol=1e-6, atol=1e-6)


def test_a_weight_shared_by_two_padded_convs_is_padded_once():
    b = Builder(seed=4)
    w, bias = b.const("w", (81, 16, 1, 1)), b.const("bias", (81,))
    heads = [b.node("Conv", ["input", w, bias], f"head{i}", kernel_shape=[1, 1]) for i in range(2)]
    flat = [b.node("Flatten", [h], f"{h}.flatten") for h in heads]
    model = b.model("shared", [1, 16, 4, 4], b.node("Add", flat, "sum"))
    padded = pad_output_channels(model)
    padded_names = sorted(t.name for t in padded.graph.initializer if t.name.endswith(".padded"))
    assert padded_names == ["bias.padded", "w.padded"]
    x = np.random.default_rng(1).standard_normal((1, 16, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(run(padded, x), run(model, x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("channels, consumer, group", [
    (81, "Relu", 1),        # the output stays in the blocked layout: a slice would cost a pass
    (81, None, 1),          # a graph output
    (84, "Transpose", 2),   # group conv
    (24, "Transpose", 1),   # 32 would add a third more channels
    (80, "Transpose", 1),   # already a multiple of 16
])
def test_convs_that_do_not_qualify_are_left_alone(channels, consumer, group):
    model = head_model(channels, consumer, group)
    assert pad_output_channels(model) is model


def test_padded_head_compiles_to_the_same_numbers_as_onnx_runtime():
    model = head_model(81)
    graph = extract(model, max_candidates=2)
    assert graph.workload("head")["kernel"][0] == 96
    compiled = compile(model, Config.uniform(model))
    x = compiled.random_inputs(seed=1)[0]
    np.testing.assert_allclose(compiled(x), run(model, x), rtol=1e-4, atol=1e-4)


def test_a_quantized_head_is_padded_past_its_output_quantization():
    """SSD's int8 class heads: conv -> QuantizeLinear -> DequantizeLinear -> Transpose. No int8
    block divides 81 channels, so without the padding the head ran in fp32 in blocks of 9."""
    model = head_model(81)
    x = np.random.default_rng(2).standard_normal((1, 16, 8, 8)).astype(np.float32)
    qdq = quantize(model, [{"input": x}])
    graph = extract(qdq, max_candidates=2)
    assert graph.workload("head")["kernel"][0] == 96 and graph.op("head") == "conv2d_int8"
    compiled = compile(qdq, Config.uniform(qdq))
    want = run(qdq, x)
    step = np.abs(want).max() / 127
    assert np.abs(compiled(x) - want).max() <= step + 1e-6  # int8 runtimes differ by output steps


@pytest.mark.parametrize("kwargs, match", [({"multiple": 0}, "multiple=0 must be a positive int"),
                                           ({"max_fraction": -1}, "max_fraction=-1 must be >= 0")])
def test_bad_limits_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pad_output_channels(head_model(), **kwargs)


def branch_model(channels: int = 58, link: str = "Relu", exit_: str = "conv"):
    """ShuffleNetV2's branch: input [1, 16, 8, 8] -> 1x1 conv to ``channels`` -> ``link`` ->
    3x3 depthwise conv -> 1x1 conv to 32 (``exit_="conv"``), or a 1x1 conv to ``channels``
    concatenated with another and reshaped (``exit_="concat"``, its channel shuffle)."""
    b = Builder(seed=5)
    y = b.conv("expand", "input", 16, channels, k=(1, 1))
    if link == "Relu":
        y = b.node("Relu", [y], "relu")
    elif link == "per_channel_mul":
        y = b.node("Mul", [y, b.const("gain", (1, channels, 1, 1))], "gain")
    dw = b.conv("dw", y, channels, channels, group=channels)
    if exit_ == "conv":
        return b.model("branch", [1, 16, 8, 8], b.conv("project", dw, channels, 32, k=(1, 1)))
    out = b.conv("project", dw, channels, channels, k=(1, 1))
    other = b.conv("other", "input", 16, channels, k=(1, 1))
    both = b.node("Concat", [other, out], "concat", axis=1)
    b.inits.append(numpy_helper.from_array(np.array([1, 2, channels, 8, 8], np.int64), "view"))
    return b.model("branch", [1, 16, 8, 8], b.node("Reshape", [both, "view"], "shuffle"))


def test_a_narrow_branch_is_padded_from_its_first_conv_to_its_last():
    model = branch_model(58)
    padded = pad_channel_chains(model)
    weights = {t.name: list(t.dims) for t in padded.graph.initializer}
    assert weights == {"expand.weight.padded": [64, 16, 1, 1], "expand.bias.padded": [64],
                       "dw.weight.padded": [64, 1, 3, 3], "dw.bias.padded": [64],
                       "project.weight.padded": [32, 64, 1, 1], "project.b": [32]}
    dw = next(n for n in padded.graph.node if n.name == "dw")
    assert next(a.i for a in dw.attribute if a.name == "group") == 64
    x = np.random.default_rng(3).standard_normal((1, 16, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(run(padded, x), run(model, x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("channels, link", [
    (72, "Relu"),             # blocks of 8 divide 72
    (58, "per_channel_mul"),  # a per-channel constant would meet the padded channels
])
def test_branches_that_do_not_qualify_are_left_alone(channels, link):
    model = branch_model(channels, link)
    assert pad_channel_chains(model) is model


def test_a_conv_before_a_channel_shuffle_is_padded_and_sliced_back():
    model = branch_model(58, exit_="concat")
    padded = pad_output_channels(model)
    weights = {t.name: list(t.dims) for t in padded.graph.initializer}
    project = next(n for n in padded.graph.node if n.name == "project")
    assert weights[project.input[1]] == [64, 58, 1, 1]
    assert "project.unpad" in {n.name for n in padded.graph.node}
    x = np.random.default_rng(4).standard_normal((1, 16, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(run(padded, x), run(model, x), rtol=1e-6, atol=1e-6)


def test_a_quantized_narrow_branch_runs_int8_in_blocks_of_16():
    """Without the padding no int8 block wider than 2 divides 58 channels, and the branch ran
    fp32 in NCHW1c (ShuffleNetV2's stage 2)."""
    model = branch_model(58)
    x = np.random.default_rng(6).standard_normal((1, 16, 8, 8)).astype(np.float32)
    qdq = quantize(model, [{"input": x}])
    graph = extract(qdq, max_candidates=2)
    kernels = [graph.workload(n)["kernel"][:2] for n in ("expand", "dw", "project")]
    assert kernels == [[64, 16], [64, 1], [32, 64]]
    assert {graph.op(n) for n in ("expand", "project")} == {"conv2d_int8"}
    compiled = compile(qdq, Config.uniform(qdq))
    want = run(qdq, x)
    step = np.abs(want).max() / 127
    assert np.abs(compiled(x) - want).max() <= step + 1e-6
