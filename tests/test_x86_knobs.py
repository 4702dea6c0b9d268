"""graphtune.x86: targets, workload validation, knob checks and candidate spaces (no kernels built)."""

import json

import pytest
import tvm

import graphtune.x86 as x86
from graphtune.errors import KnobError, LayoutError, MeasureError, ModelError

pytestmark = pytest.mark.unit

ZEN = {"kind": "llvm", "mcpu": "znver5", "num-cores": 2}
HASWELL = {"kind": "llvm", "mcpu": "haswell", "num-cores": 2}

CONV3 = x86.conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1])
CONV1 = x86.conv2d_workload([1, 256, 56, 56], [64, 256, 1, 1])
STEM = x86.conv2d_workload([1, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3])
ODD = x86.conv2d_workload([1, 24, 13, 13], [40, 24, 3, 3], [2, 2], [1, 1, 1, 1])
DEPTHWISE = x86.conv2d_workload([1, 96, 28, 28], [96, 1, 3, 3], padding=[1, 1, 1, 1], groups=96)
DENSE = x86.dense_workload([1, 2048], [1000, 2048])
ALL = [CONV3, CONV1, STEM, ODD, DEPTHWISE, DENSE]


def test_host_target_is_llvm_with_host_cpu_and_cores():
    target = x86.host_target()
    assert target.kind.name == "llvm"
    assert str(target.attrs["mcpu"]) == tvm.get_global_func("target.llvm_get_system_cpu")()
    assert int(target.attrs["num-cores"]) >= 1


def test_user_target_overrides_host():
    target = x86.host_target(HASWELL)
    assert str(target.attrs["mcpu"]) == "haswell"
    assert x86.host_target(target) is target


def test_bad_target_raises_measure_error():
    with pytest.raises(MeasureError, match="dict"):
        x86.host_target("llvm -mcpu=znver5")


def test_target_key_is_json_and_has_vector_width_and_threads():
    key = x86.target_key(ZEN)
    assert json.loads(json.dumps(key)) == key
    assert key["mcpu"] == "znver5" and key["num-cores"] == 2 and key["vector_bits"] == 512
    assert key["threads"] == x86.num_threads() >= 1
    assert x86.target_key(HASWELL)["vector_bits"] == 256


def test_vector_lanes_follow_features():
    assert x86.vector_lanes(ZEN) == 16
    assert x86.vector_lanes(HASWELL) == 8
    assert x86.vector_lanes({"kind": "llvm", "mcpu": "x86-64"}) == 4


def test_op_of_and_output_shape():
    assert [x86.op_of(wl) for wl in (CONV3, STEM, DEPTHWISE, DENSE)] == [
        "conv2d",
        "conv2d",
        "depthwise_conv2d",
        "dense",
    ]
    assert x86.output_shape(STEM) == [1, 64, 112, 112]
    assert x86.output_shape(ODD) == [1, 40, 7, 7]
    dilated = x86.conv2d_workload([1, 8, 10, 10], [8, 8, 3, 3], padding=[2, 2, 2, 2], dilation=[2, 2])
    assert x86.output_shape(dilated) == [1, 8, 10, 10]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"groups": 3, "kernel": [64, 21, 3, 3]}, "dividing the 64 input"),
        ({"kernel": [64, 32, 3, 3]}, "input channels"),
        ({"strides": [1]}, "strides"),
        ({"dtype": "float16"}, "dtype"),
        ({"padding": [0, 0, 0, 0], "data": [1, 64, 2, 2]}, "empty output"),
        ({"layout": "NCHW"}, "unknown fields"),
    ],
)
def test_bad_workloads_raise_model_error(change, message):
    workload = {**CONV3, **change}
    with pytest.raises(ModelError, match=message):
        x86.op_of(workload)


def test_dense_feature_mismatch():
    with pytest.raises(ModelError, match="features"):
        x86.op_of({"data": [1, 10], "weight": [5, 11], "dtype": "float32"})


@pytest.mark.parametrize(
    "workload, knobs, message",
    [
        (CONV3, {"ic_bn": 5, "oc_bn": 16, "reg_n": 8, "unroll_kw": True},
         r"'ic_bn' = 5 must divide.*1, 2, 4, 8, 16, 32, 64"),
        (CONV3, {"ic_bn": 16, "oc_bn": 48, "reg_n": 8, "unroll_kw": True},
         "'oc_bn' = 48 must divide the 64 output"),
        (CONV3, {"ic_bn": 16, "oc_bn": 16, "reg_n": 57, "unroll_kw": True},
         "'reg_n' = 57 must not exceed the 56"),
        (CONV3, {"ic_bn": 16, "oc_bn": 16, "reg_n": 0, "unroll_kw": True},
         "'reg_n' = 0 must be a positive int"),
        (CONV3, {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": 1}, "'unroll_kw' = 1 must be a bool"),
        (CONV3, {"ic_bn": 16, "oc_bn": 16, "reg_n": 8}, r"missing \['unroll_kw'\]"),
        (CONV3, {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": True, "bn": 4}, r"unknown \['bn'\]"),
        (CONV1, {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": False, "oh_bn": 57}, "'oh_bn' = 57"),
        (STEM, {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": True},
         r"3 input channels; valid values: 1, 3"),
        (CONV3, {"ic_bn": 16, "oc_bn": 1, "reg_n": 56, "unroll_kw": True, "oc_tile": 2},
         r"'oc_tile' = 2 needs ic_bn = oc_bn = 1"),
        (STEM, {"ic_bn": 1, "oc_bn": 1, "reg_n": 112, "unroll_kw": True, "oc_tile": 2}, "needs stride 1"),
        (CONV3, {"ic_bn": 1, "oc_bn": 1, "reg_n": 56, "unroll_kw": True, "oc_tile": 5},
         "'oc_tile' = 5 must divide the 64 output channels"),
        (CONV3, {"ic_bn": 1, "oc_bn": 1, "reg_n": 8, "unroll_kw": True, "oc_tile": 2},
         r"'reg_n' = 8 must be the whole output width with oc_tile; valid values: 56"),
        (CONV1, {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": False, "rows_outer": "yes"},
         "'rows_outer' = 'yes' must be a bool"),
        (CONV1, {"ic_bn": 1, "oc_bn": 1, "reg_n": 112, "unroll_kw": False, "flat": 16},
         "'flat' = 16 must be 1 on a blocked layout"),
        (CONV3, {"ic_bn": 16, "oc_bn": 16, "reg_n": 5, "unroll_kw": False, "flat": 1},
         "'flat' = 1 needs an unpadded 1x1 kernel"),
        (x86.conv2d_workload([1, 64, 56, 56], [64, 64, 1, 1], [2, 2]),
         {"ic_bn": 16, "oc_bn": 16, "reg_n": 5, "unroll_kw": False, "flat": 1}, "'flat' = 1 needs stride 1"),
        (CONV1, {"ic_bn": 16, "oc_bn": 16, "reg_n": 5, "unroll_kw": False, "flat": 1, "oh_bn": 2},
         "'oh_bn' = 2 does not combine with flat"),
        (CONV1, {"ic_bn": 16, "oc_bn": 16, "reg_n": 3137, "unroll_kw": False, "flat": 1},
         "'reg_n' = 3137"),
        (CONV3, {"ic_bn": 1, "oc_bn": 1, "reg_n": 112, "unroll_kw": False, "oc_tile": 2, "flat": 16},
         "'flat' = 16 needs an unpadded 1x1 kernel"),
        (CONV1, {"ic_bn": 1, "oc_bn": 1, "reg_n": 120, "unroll_kw": False, "oc_tile": 2, "flat": 16},
         "'flat' = 16 must divide reg_n = 120"),
        (CONV1, {"ic_bn": 1, "oc_bn": 1, "reg_n": 96, "unroll_kw": False, "oc_tile": 2, "flat": 16},
         "'reg_n' = 96 must divide the 3136 output pixels with flat"),
        (CONV1, {"ic_bn": 1, "oc_bn": 1, "reg_n": 112, "unroll_kw": False, "oc_tile": 2, "flat": 16,
                 "oh_bn": 2}, "'oh_bn' = 2 does not combine with flat"),
        (CONV1, {"ic_bn": 1, "oc_bn": 1, "reg_n": 56, "unroll_kw": False, "oc_tile": 2, "rows_outer": True},
         "'rows_outer' = True does not combine with oc_tile"),
        (DEPTHWISE, {"bn": 64, "reg_n": 4}, "'bn' = 64 must divide the 96 channels"),
        (DEPTHWISE, {"bn": 4, "reg_n": 28, "c_tile": 2}, r"'c_tile' = 2 needs bn = 1 \(plain NCHW\)"),
        (DEPTHWISE, {"bn": 1, "reg_n": 28, "c_tile": 5}, "'c_tile' = 5 must divide the 96 channels"),
        (DEPTHWISE, {"bn": 1, "reg_n": 14, "c_tile": 2},
         r"'reg_n' = 14 must be the whole output width with c_tile; valid values: 28"),
        (DEPTHWISE, {"bn": 1, "reg_n": 28, "c_tile": 2, "oh_bn": 29}, "'oh_bn' = 29 must not exceed the 28"),
        (DEPTHWISE, {"bn": 1, "reg_n": 28, "oh_bn": 2}, "'oh_bn' needs c_tile"),
        (x86.conv2d_workload([1, 96, 28, 28], [96, 1, 3, 3], [2, 2], [1, 1, 1, 1], groups=96),
         {"bn": 1, "reg_n": 14, "c_tile": 2}, r"'c_tile' = 2 needs stride 1"),
        (DENSE, {"oc_bn": 16, "k_bn": 8}, "'oc_bn' = 16 must divide the 1000 output features"),
        (DENSE, {"oc_bn": 8, "k_bn": 3}, "'k_bn' = 3 must divide the 2048 input features"),
        (DENSE, [8, 8], "must be a dict"),
    ],
)
def test_invalid_knobs_raise_knob_error_naming_the_knob(workload, knobs, message):
    with pytest.raises(KnobError, match=message):
        x86.check_knobs(workload, knobs)


def test_invalid_knobs_are_never_built():
    with pytest.raises(KnobError, match="ic_bn"):
        x86.kernel_func(STEM, {"ic_bn": 2, "oc_bn": 16, "reg_n": 8, "unroll_kw": True})


@pytest.mark.parametrize("workload", ALL, ids=["conv3", "conv1", "stem", "odd", "depthwise", "dense"])
def test_candidates_are_valid_unique_and_cover_every_block(workload):
    cands = x86.candidates(workload, ZEN)
    assert cands
    for knobs in cands:
        x86.check_knobs(workload, knobs)
    keys = [json.dumps(k, sort_keys=True) for k in cands]
    assert len(set(keys)) == len(keys)
    op = x86.op_of(workload)
    if op == "conv2d":
        divisors = x86.knobs.divisors
        assert {k["ic_bn"] for k in cands} == set(divisors(workload["data"][1], cap=x86.MAX_BLOCK))
        assert {k["oc_bn"] for k in cands} == set(divisors(workload["kernel"][0], cap=x86.MAX_BLOCK))
    elif op == "depthwise_conv2d":
        assert {k["bn"] for k in cands} == set(x86.knobs.divisors(96, cap=x86.MAX_BLOCK))
    else:
        assert {k["oc_bn"] for k in cands} == set(x86.knobs.divisors(1000, cap=x86.MAX_BLOCK))


def test_candidates_best_guess_first_and_pruning_keeps_layout_diversity():
    top = x86.candidates(CONV3, ZEN, max_candidates=12)
    assert len(top) == 12
    assert (top[0]["ic_bn"], top[0]["oc_bn"]) == (16, 16)
    assert top == x86.candidates(CONV3, ZEN)[:12]
    assert len({x86.layouts_of(CONV3, k) for k in top}) >= 4


def test_candidate_tiles_respect_register_budget():
    for target in (ZEN, HASWELL):
        lanes, budget = x86.vector_lanes(target), x86.knobs.register_budget(target)
        for k in x86.candidates(CONV1, target):
            if "flat" in k and "oc_tile" in k:  # oc_tile x reg_n pixels in vectors of flat = lanes
                assert k["flat"] == lanes and k["oc_tile"] * k["reg_n"] // lanes <= budget
                continue
            if "oc_tile" in k:  # the width is vectorised: oc_tile x oh_bn rows of width vectors
                assert k["oc_tile"] * k["oh_bn"] * -(-k["reg_n"] // lanes) <= budget
                continue
            vectors = -(-k["oc_bn"] // lanes)
            assert k["reg_n"] * k.get("oh_bn", 1) * vectors <= max(budget, vectors)


@pytest.mark.parametrize("workload", [
    CONV1, CONV3, x86.conv2d_workload([1, 64, 28, 28], [256, 64, 1, 1]),
    x86.conv2d_int8_workload([1, 64, 56, 56], [256, 64, 1, 1]),
    x86.conv2d_int8_workload([1, 128, 28, 28], [128, 128, 3, 3], padding=[1, 1, 1, 1])])
def test_register_tiles_of_several_pixels_leave_registers_for_their_kernel_vectors(workload):
    """A tile whose pixels reuse ``v`` kernel vectors holds them and one broadcast input beside its
    accumulators: more than the register file holds makes LLVM spill in the reduction loop."""
    for target, registers in ((ZEN, 32), (HASWELL, 16)):
        lanes = x86.vector_lanes(target)
        tiles = [k for k in x86.candidates(workload, target)
                 if "oc_bn" in k and "oc_tile" not in k and k.get("isa") not in ("amx", "amxbf16")]
        assert any(-(-k["oc_bn"] // lanes) == 4 for k in tiles)  # the case the rule is about
        for k in tiles:
            vectors = -(-k["oc_bn"] // lanes)
            pixels = k["reg_n"] * k.get("oh_bn", 1)
            if pixels > 1:
                assert pixels * vectors + vectors + 1 <= registers, (target["mcpu"], k)


def test_stem_candidates_block_the_three_input_channels():
    assert {k["ic_bn"] for k in x86.candidates(STEM, ZEN)} == {1, 3}
    assert x86.default_knobs(STEM, 16, ZEN)["ic_bn"] == 3


def test_pointwise_candidates_tile_rows():
    blocked = [k for k in x86.candidates(CONV1, ZEN) if "oc_tile" not in k and "flat" not in k]
    assert {k["oh_bn"] for k in blocked} == {1, 2, 4}
    assert all("oh_bn" not in k for k in x86.candidates(CONV3, ZEN) if "oc_tile" not in k)


@pytest.mark.parametrize("target", [HASWELL, ZEN], ids=["avx2", "avx512"])
def test_pointwise_candidates_on_small_maps_lead_with_flattened_pixel_tiles(target):
    """A 7x7 map has no row tile without a tail of wasted rows or few accumulators: the best
    flattened-pixel tile (``flat`` 1, tails of at most a tenth) is its blocks' first tile; on a
    56x56 map row tiles divide and lead, flattened ones only follow them, none repeats a row tile."""
    small = x86.conv2d_workload([1, 400, 7, 7], [400, 400, 1, 1])
    lanes = x86.vector_lanes(target)
    first = x86.tile_variants(small, {"ic_bn": 16, "oc_bn": 16}, target)[0]
    assert first["flat"] == 1 and "oh_bn" not in first and 7 % first["reg_n"] and first["reg_n"] % 7
    assert -(-49 // first["reg_n"]) * first["reg_n"] <= 49 * 1.1
    assert first["reg_n"] * -(-16 // lanes) <= x86.knobs.register_budget(target)
    variants = x86.tile_variants(CONV1, {"ic_bn": 16, "oc_bn": 16}, target)
    flat = [i for i, k in enumerate(variants) if "flat" in k]
    assert flat and min(flat) > max(i for i, k in enumerate(variants) if "flat" not in k)
    assert all(56 % k["reg_n"] and k["reg_n"] % 56 for k in variants if "flat" in k)


def test_pointwise_candidates_share_rows_between_threads_when_the_input_is_the_largest_operand():
    wide_input = x86.conv2d_workload([1, 256, 56, 56], [64, 256, 1, 1])
    wide_output = x86.conv2d_workload([1, 64, 56, 56], [256, 64, 1, 1])
    heavy_weights = x86.conv2d_workload([1, 2048, 7, 7], [512, 2048, 1, 1])
    assert all(k["rows_outer"] for k in x86.candidates(wide_input, ZEN) if "oc_tile" not in k)
    for workload in (wide_output, heavy_weights, CONV3):
        assert not [k for k in x86.candidates(workload, ZEN) if "rows_outer" in k]


def test_plain_nchw_width_tiles_rank_early_only_where_no_vector_block_divides():
    # ShuffleNetV2's 116 channels: 1, 2, 4, 29, 58 -- no block fills a 16-lane vector
    shuffle = x86.conv2d_workload([1, 116, 14, 14], [116, 116, 1, 1])
    top = x86.candidates(shuffle, ZEN, max_candidates=32)
    width = [k for k in top if "oc_tile" in k]
    assert width and all(k["ic_bn"] == k["oc_bn"] == 1 and k["reg_n"] == 14 for k in width)
    assert not [k for k in x86.candidates(CONV3, ZEN, max_candidates=32) if "oc_tile" in k]
    # stride 2 reads every other column, padded 3x3 loads are guarded: no width tiles offered
    assert not [k for k in x86.candidates(STEM, ZEN) if "oc_tile" in k]
    # 28x28 maps are 49 whole vectors of pixels: flattened-pixel tiles lead
    stage2 = x86.conv2d_workload([1, 58, 28, 28], [58, 58, 1, 1])
    first = x86.candidates(stage2, ZEN, max_candidates=32)[0]
    assert first["flat"] == 16 and first["reg_n"] % 16 == 0 and 784 % first["reg_n"] == 0
    assert not [k for k in top if "flat" in k]  # 14x14 = 196 pixels: no whole vectors
    head = x86.conv2d_workload([1, 1024, 8, 8], [324, 1024, 3, 3], padding=[1, 1, 1, 1])
    assert not [k for k in x86.candidates(head, ZEN) if "oc_tile" in k]


@pytest.mark.parametrize("block", [4, 8, 16, 32])
def test_default_knobs_use_the_requested_block(block):
    knobs = x86.default_knobs(CONV3, block, ZEN)
    assert x86.layouts_of(CONV3, knobs) == (f"NCHW{block}c", f"NCHW{block}c")
    assert x86.layouts_of(DEPTHWISE, x86.default_knobs(DEPTHWISE, block, ZEN)) == (f"NCHW{block}c",) * 2


def test_default_knobs_fall_back_to_nearest_vector_friendly_divisor():
    knobs = x86.default_knobs(ODD, 16, ZEN)  # 16 divides neither 24 nor 40: 12, 10 (not 20: 16 + 4 lanes)
    assert (knobs["ic_bn"], knobs["oc_bn"]) == (12, 10)
    assert x86.default_knobs(ODD, 16, HASWELL)["ic_bn"] == 24  # 3 whole AVX2 vectors (tie with 8: larger)
    assert x86.default_knobs(ODD, 16, HASWELL)["oc_bn"] == 8  # 40 = 5 AVX2 vectors, 20 = 2.5
    with pytest.raises(KnobError, match="block"):
        x86.default_knobs(CONV3, 0)


@pytest.mark.parametrize("target", [HASWELL, ZEN], ids=["avx2", "avx512"])
def test_depthwise_candidates_prefer_one_vector_then_two_or_three_then_parts_of_one(target):
    wide = x86.conv2d_workload([1, 960, 7, 7], [960, 1, 5, 5], padding=[2, 2, 2, 2], groups=960)
    lanes = x86.vector_lanes(target)
    blocks = [k["bn"] for k in x86.candidates(wide, target)]
    first = {bn: blocks.index(bn) for bn in set(blocks)}
    assert blocks[0] == lanes and max(first[2 * lanes], first[3 * lanes]) < first[lanes // 2]
    assert first[lanes // 2] < first[64]  # 8 or 4 whole vectors


def test_depthwise_candidates_of_channels_no_vector_divides_are_parts_of_one():
    odd = x86.conv2d_workload([1, 72, 28, 28], [72, 1, 3, 3], padding=[1, 1, 1, 1], groups=72)
    assert {k["bn"] for k in x86.candidates(odd, ZEN, max_candidates=4)} == {8, 4}
    assert x86.default_knobs(odd, 16, ZEN)["bn"] == 12


def test_plain_nchw_depthwise_width_tiles_where_no_block_fills_a_vector():
    # ShuffleNetV2's 58 channels (1, 2, 29, 58): plain NCHW with its width vectorised leads
    stage2 = x86.conv2d_workload([1, 58, 28, 28], [58, 1, 3, 3], padding=[1, 1, 1, 1], groups=58)
    top = x86.candidates(stage2, ZEN, max_candidates=32)
    assert top[0]["bn"] == 1 and top[0]["reg_n"] == 28 and "c_tile" in top[0]
    lanes, budget = x86.vector_lanes(ZEN), x86.knobs.register_budget(ZEN)
    width = [k for k in top if "c_tile" in k]
    assert all(k["c_tile"] * k["oh_bn"] * -(-28 // lanes) <= budget // 2 for k in width)
    # a vector block exists (96 = 6 x 16): width tiles only behind the blocked ones, never first
    assert "c_tile" not in x86.candidates(DEPTHWISE, ZEN)[0]
    # stride 2 would read every other column: no width tiles
    strided = x86.conv2d_workload([1, 58, 56, 56], [58, 1, 3, 3], [2, 2], [1, 1, 1, 1], groups=58)
    assert not [k for k in x86.candidates(strided, ZEN) if "c_tile" in k]


def test_layouts_of_dense_and_bad_max_candidates():
    assert x86.layouts_of(DENSE, x86.default_knobs(DENSE)) == ("NC", "NC")
    with pytest.raises(KnobError, match="max_candidates"):
        x86.candidates(CONV3, ZEN, max_candidates=0)


def test_transform_shape_errors():
    assert x86.transform_shape([1, 24, 5, 5], "NCHW8c") == [1, 3, 5, 5, 8]
    with pytest.raises(LayoutError, match="divisible by 16"):
        x86.transform_shape([1, 24, 5, 5], "NCHW16c")
    with pytest.raises(LayoutError, match="equal"):
        x86.transform_func([1, 16, 4, 4], "NCHW8c", "NCHW8c")
    with pytest.raises(LayoutError, match="unknown data layout"):
        x86.transform_func([1, 16, 4, 4], "NHWC", "NCHW8c")
