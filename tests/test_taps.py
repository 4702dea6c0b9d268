"""Dropping conv taps that read only padding (frontend/taps.py)."""

import itertools

import numpy as np
import pytest
from onnx import numpy_helper

from graphtune import Config, compile, extract
from graphtune.errors import ConfigMismatchError
from graphtune.frontend.qdq import INT8_NODES
from graphtune.frontend.taps import drop_dead_taps, split_by_band
from graphtune.taps import MIN_BAND_SAVING, band_split, bands, live_taps, without_dead_taps
from onnx_blocks import Builder

pytestmark = pytest.mark.unit

ort = pytest.importorskip("onnxruntime")


def conv_model(size, k=(3, 3), pads=(1, 1, 1, 1), dilations=(1, 1), strides=(1, 1), group=1, seed=0,
               weight=None, **attrs):
    """input [1, 8, *size] -> one conv to 16 channels."""
    b = Builder(seed=seed)
    y = b.conv("conv", "input", 8, 16, k=k, pads=list(pads), group=group, dilations=list(dilations),
               strides=list(strides), **attrs)
    model = b.model("conv", [1, 8, *size], y)
    if weight is not None:
        init = next(t for t in model.graph.initializer if t.name == "conv.w")
        init.CopyFrom(numpy_helper.from_array(weight, "conv.w"))
    return model


def run(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"input": x})[0]


def conv_attrs(model) -> dict:
    node = next(n for n in model.graph.node if n.op_type == "Conv")
    weight = next(t for t in model.graph.initializer if t.name == node.input[1])
    return {**{a.name: list(a.ints) for a in node.attribute if a.ints}, "weight": list(weight.dims)}


def test_aspp_conv_on_a_small_map_becomes_a_1x1_conv_computing_the_same():
    model = conv_model((14, 14), pads=(36, 36, 36, 36), dilations=(36, 36))
    slim = drop_dead_taps(model)
    assert conv_attrs(slim) == {"kernel_shape": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1],
                                "strides": [1, 1], "weight": [16, 8, 1, 1]}
    assert [t.name for t in slim.graph.initializer if t.name == "conv.w"] == []  # the full weight is gone
    x = np.random.default_rng(0).standard_normal((1, 8, 14, 14)).astype(np.float32)
    np.testing.assert_allclose(run(slim, x), run(model, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("size, k, pads, dilations, strides", [
    ((3, 9), (3, 3), (4, 1, 4, 1), (4, 1), (1, 1)),      # rows slimmed to the centre, columns kept
    ((6, 6), (3, 3), (5, 5, 5, 5), (5, 5), (2, 2)),      # strided
    ((7, 7), (5, 5), (8, 8, 8, 8), (4, 4), (1, 1)),      # 5 taps -> the middle 3
    ((4, 4), (3, 3), (6, 0, 0, 6), (3, 3), (1, 1)),      # asymmetric pads drop a leading / trailing tap
    ((5, 5), (5, 5), (6, 6, 6, 6), (3, 3), (1, 1)),      # three taps left: dilation kept
])
def test_slimmed_convs_equal_the_original(size, k, pads, dilations, strides):
    model = conv_model(size, k=k, pads=pads, dilations=dilations, strides=strides, seed=1)
    slim = drop_dead_taps(model)
    assert slim is not model
    x = np.random.default_rng(1).standard_normal((1, 8, *size)).astype(np.float32)
    expected = run(model, x)
    got = run(slim, x)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("extent, kernel, stride, dilation, pad", [
    (e, k, s, d, p) for e, k, s, d, p in itertools.product((1, 4, 7), (2, 3), (1, 2), (1, 3, 6), (0, 3, 6))
    if (e + 2 * p - d * (k - 1) - 1) >= 0
])
def test_live_taps_are_the_taps_that_change_the_output(extent, kernel, stride, dilation, pad):
    """Brute force through ONNX Runtime: a tap is live iff a weight there changes the output."""
    rows = (extent + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    x = np.random.default_rng(2).standard_normal((1, 8, extent, 3)).astype(np.float32)
    changes = []
    for tap in range(kernel):
        weight = np.zeros((16, 8, kernel, 1), np.float32)
        weight[:, :, tap, 0] = 1.0
        model = conv_model((extent, 3), k=(kernel, 1), pads=(pad, 0, pad, 0), dilations=(dilation, 1),
                           strides=(stride, 1), weight=weight)
        bias = next(numpy_helper.to_array(t) for t in model.graph.initializer if t.name == "conv.b")
        changes.append(not np.allclose(run(model, x), bias[None, :, None, None]))
    assert live_taps(extent, rows, kernel, stride, dilation, pad) == [t for t in range(kernel) if changes[t]]


@pytest.mark.parametrize("kwargs", [
    {"size": (14, 14), "pads": (1, 1, 1, 1)},                                  # every tap live
    {"size": (14, 14), "pads": (0, 0, 0, 0), "k": (3, 3), "dilations": (6, 6)},  # no padding to skip
    {"size": (2, 2), "pads": (0, 0, 0, 0), "k": (1, 1), "dilations": (1, 1)},
])
def test_convs_whose_taps_all_read_the_input_stay(kwargs):
    model = conv_model(**kwargs)
    assert drop_dead_taps(model) is model


def test_auto_pad_and_computed_weights_are_left_alone():
    b = Builder(seed=5)
    y = b.node("Conv", ["input", b.const("w", (16, 8, 3, 3))], "auto", kernel_shape=[3, 3],
               dilations=[9, 9], auto_pad="SAME_UPPER")
    neg = b.node("Neg", [b.const("w2", (16, 16, 3, 3))], "w2.neg")  # a weight no initializer holds
    out = b.node("Conv", [y, neg], "computed", kernel_shape=[3, 3], dilations=[9, 9], pads=[9, 9, 9, 9])
    model = b.model("left_alone", [1, 8, 5, 5], out)
    assert drop_dead_taps(model) is model


def test_a_weight_another_conv_reads_in_full_stays():
    b = Builder(seed=6)
    w = b.const("w", (16, 8, 3, 3))
    dead = b.node("Conv", ["input", w], "dead", kernel_shape=[3, 3], dilations=[8, 8], pads=[8, 8, 8, 8])
    live = b.node("Conv", ["input", w], "live", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    model = b.model("shared", [1, 8, 6, 6], b.node("Add", [dead, live], "sum"))
    slim = drop_dead_taps(model)
    assert {t.name: list(t.dims) for t in slim.graph.initializer} == {"w": [16, 8, 3, 3],
                                                                     "dead.live_taps": [16, 8, 1, 1]}
    x = np.random.default_rng(3).standard_normal((1, 8, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(run(slim, x), run(model, x), rtol=1e-5, atol=1e-5)


def test_graphtune_tunes_and_compiles_the_slimmed_conv():
    model = conv_model((14, 14), pads=(24, 24, 24, 24), dilations=(24, 24), seed=7)
    graph = extract(model)
    assert [graph.workload(name)["kernel"] for name in graph.nodes if graph.workload(name)] == [[16, 8, 1, 1]]
    compiled = compile(model, Config.uniform(model))
    x = compiled.random_inputs(seed=1)[0]
    np.testing.assert_allclose(compiled(x), run(model, x), rtol=1e-4, atol=1e-4)


def test_workload_rule_and_onnx_rewrite_agree():
    """:func:`without_dead_taps` on a conv workload gives the workload graphtune extracts from the
    rewritten ONNX conv (one rule, two callers)."""
    from graphtune.ops import conv2d_workload
    for size, k, pads, dilations, strides in [((3, 9), (3, 3), (4, 1, 4, 1), (4, 1), (1, 1)),
                                              ((6, 6), (3, 3), (5, 5, 5, 5), (5, 5), (2, 2)),
                                              ((4, 4), (3, 3), (6, 0, 0, 6), (3, 3), (1, 1))]:
        model = drop_dead_taps(conv_model(size, k=k, pads=pads, dilations=dilations, strides=strides))
        attrs = conv_attrs(model)
        full = conv2d_workload([1, 8, *size], [16, 8, *k], strides, pads, dilations)
        slim = without_dead_taps(full)
        assert (slim["kernel"], slim["padding"], slim["dilation"]) == \
            (attrs["weight"], attrs["pads"], attrs["dilations"])


def test_a_config_tuned_before_dead_taps_were_dropped_still_matches():
    model = conv_model((14, 14), pads=(24, 24, 24, 24), dilations=(24, 24), seed=8)
    config = Config.uniform(model)
    (name,) = config.nodes
    old = config.to_dict()
    old["nodes"][name]["workload"].update(kernel=[16, 8, 3, 3], padding=[24] * 4, dilation=[24, 24])
    assert Config.from_dict(old).check(model) == []
    old["nodes"][name]["workload"].update(padding=[23] * 4)  # not what dropping taps explains
    with pytest.raises(ConfigMismatchError, match="workload"):
        Config.from_dict(old).check(model)


# ------------------------------------------------------------------ split by band
@pytest.mark.parametrize("size, k, pads, dilations, strides, group", [
    ((14, 14), (3, 3), (12, 12, 12, 12), (12, 12), (1, 1), 1),   # DeepLabV3's ASPP rate 12
    ((14, 14), (3, 3), (12, 12, 12, 12), (12, 12), (1, 1), 2),   # grouped
    ((9, 14), (3, 3), (1, 12, 1, 12), (1, 12), (1, 1), 1),       # columns only
    ((15, 13), (3, 3), (10, 9, 10, 9), (10, 9), (2, 2), 1),      # strided, odd sizes
    ((12, 12), (5, 5), (10, 10, 10, 10), (5, 5), (1, 1), 1),     # five taps
    ((14, 14), (3, 3), (12, 0, 12, 12), (12, 12), (1, 1), 1),    # asymmetric pads
])
def test_convs_split_by_band_equal_the_original(size, k, pads, dilations, strides, group):
    model = conv_model(size, k=k, pads=pads, dilations=dilations, strides=strides, group=group, seed=9)
    split = split_by_band(model, min_macs_per_call=0)  # so small a conv: split by the rule alone
    assert split is not model
    assert "conv.w" not in {t.name for t in split.graph.initializer}
    x = np.random.default_rng(4).standard_normal((1, 8, *size)).astype(np.float32)
    expected = run(model, x)
    got = run(split, x)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_bands_are_the_runs_of_live_taps_per_output_position():
    """Brute force through ONNX Runtime: per output row, the taps whose weight changes it."""
    extent, kernel, dilation, pad = 9, 3, 4, 4
    x = np.random.default_rng(5).standard_normal((1, 8, extent, 3)).astype(np.float32)
    base = np.zeros((16, 8, kernel, 1), np.float32)
    rows = extent + 2 * pad - dilation * (kernel - 1)
    moved = np.zeros((rows, kernel), bool)
    reference = run(conv_model((extent, 3), k=(kernel, 1), pads=(pad, 0, pad, 0), dilations=(dilation, 1),
                               weight=base), x)
    for tap in range(kernel):
        weight = base.copy()
        weight[:, :, tap, 0] = 1.0
        out = run(conv_model((extent, 3), k=(kernel, 1), pads=(pad, 0, pad, 0), dilations=(dilation, 1),
                             weight=weight), x)
        moved[:, tap] = np.abs(out - reference).max(axis=(0, 1, 3)) > 0
    for band in bands(extent, kernel, 1, dilation, (pad, pad)):
        for y in range(band.out_begin, band.out_end):
            assert list(np.flatnonzero(moved[y])) == list(range(band.first, band.first + band.taps))
    assert sum(b.out_end - b.out_begin for b in bands(extent, kernel, 1, dilation, (pad, pad))) == rows


def test_convs_not_worth_splitting_stay():
    borders_only = conv_model((56, 56), pads=(1, 1, 1, 1))  # the border rows miss a tap: saves 7%
    assert split_by_band(borders_only, min_macs_per_call=0) is borders_only
    small = conv_model((14, 14), pads=(12, 12, 12, 12), dilations=(12, 12))  # saves 5.4x, 0.2M MACs
    assert split_by_band(small) is small
    slim = drop_dead_taps(conv_model((14, 14), pads=(36, 36, 36, 36), dilations=(36, 36)))  # 1x1 now
    assert split_by_band(slim, min_macs_per_call=0) is slim
    quantized = conv_model((14, 14), pads=(12, 12, 12, 12), dilations=(12, 12))
    quantized.metadata_props.add(key=INT8_NODES, value='{"conv": {"w_scale": [1.0], "x_scale": 1.0, '
                                                       '"x_zero_point": 0}}')
    assert split_by_band(quantized, min_macs_per_call=0) is quantized  # left whole for the int8 kernels
    b = Builder(seed=11)
    old = b.model("opset9", [1, 8, 14, 14], b.conv("conv", "input", 8, 16, pads=[12] * 4, dilations=[12, 12]),
                  opset=9)
    assert split_by_band(old, min_macs_per_call=0) is old  # Slice takes its bounds as inputs from opset 10 on


def test_split_by_band_saves_at_least_min_band_saving():
    from graphtune.ops import conv2d_workload
    for d in range(1, 14):
        workload = conv2d_workload([1, 8, 14, 14], [16, 8, 3, 3], padding=[d] * 4, dilation=[d, d])
        found = band_split(workload, min_macs_per_call=0)
        rows = bands(14, 3, 1, d, (d, d))
        work = sum((b.out_end - b.out_begin) * b.taps for b in rows) ** 2
        assert (found is not None) == (work * MIN_BAND_SAVING <= 14 * 14 * 9)
    aspp = conv2d_workload([1, 960, 14, 14], [256, 960, 3, 3], padding=[12] * 4, dilation=[12, 12])
    assert band_split(aspp) is not None  # DeepLabV3's: saves 354M multiply-adds over 21 calls
    assert band_split({**aspp, "data": [1, 96, 14, 14], "kernel": [16, 96, 3, 3]}) is None  # 2.2M


def test_graphtune_tunes_and_compiles_a_conv_split_by_band():
    b = Builder(seed=10)  # big enough to be split by default: 35M multiply-adds saved
    aspp = b.conv("conv", "input", 96, 256, pads=[12] * 4, dilations=[12, 12])
    model = b.model("aspp", [1, 96, 14, 14], aspp)
    graph = extract(model)
    kernels = sorted(graph.workload(name)["kernel"][2:] for name in graph.nodes if graph.workload(name))
    assert kernels == [[1, 1], [1, 2], [1, 2], [2, 1], [2, 1], [2, 2], [2, 2], [2, 2], [2, 2]]
    compiled = compile(model, Config.uniform(model))
    x = compiled.random_inputs(seed=2)[0]
    np.testing.assert_allclose(compiled(x), run(model, x), rtol=1e-4, atol=1e-4)
