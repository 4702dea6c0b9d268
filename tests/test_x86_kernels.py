"""graphtune.x86 kernels vs NumPy references over small knob grids (every combination)."""

import functools

import numpy as np
import pytest
import scipy.signal
from hypothesis import given, settings
from hypothesis import strategies as st

import graphtune.x86 as x86
from x86_reference import cases, conv2d_reference, grid, random, run

pytestmark = pytest.mark.unit

CONV_CASES = {
    # name: (workload, knob grid); every combination of the grid is built and checked
    "odd_channels_stride2_padded": (
        x86.conv2d_workload([1, 6, 9, 9], [10, 6, 3, 3], [2, 2], [1, 1, 1, 1]),
        {"ic_bn": [1, 3, 6], "oc_bn": [5, 10], "reg_n": [2, 5], "unroll_kw": [True, False]},
    ),
    "pointwise_row_tiles": (
        x86.conv2d_workload([1, 16, 6, 6], [8, 16, 1, 1]),
        {"ic_bn": [4, 16], "oc_bn": [8], "reg_n": [3, 4, 6], "unroll_kw": [False], "oh_bn": [1, 2, 4]},
    ),
    "dilated_asymmetric_padding": (
        x86.conv2d_workload([1, 8, 10, 10], [8, 8, 3, 3], padding=[2, 1, 0, 3], dilation=[2, 2]),
        {"ic_bn": [4, 8], "oc_bn": [8], "reg_n": [3, 4], "unroll_kw": [True, False]},
    ),
    "stem_3_channels_7x7_stride2": (
        x86.conv2d_workload([1, 3, 23, 23], [16, 3, 7, 7], [2, 2], [3, 3, 3, 3]),
        {"ic_bn": [1, 3], "oc_bn": [8, 16], "reg_n": [5, 12], "unroll_kw": [True, False]},
    ),
    "plain_nchw_width_vectorised_pointwise": (
        x86.conv2d_workload([1, 6, 5, 7], [6, 6, 1, 1]),
        {"ic_bn": [1], "oc_bn": [1], "reg_n": [7], "unroll_kw": [False], "oc_tile": [1, 2, 3, 6],
         "oh_bn": [1, 2, 5]},
    ),
    "plain_nchw_width_vectorised_padded_dilated": (
        x86.conv2d_workload([2, 4, 6, 19], [6, 4, 3, 2], padding=[0, 1, 2, 0], dilation=[2, 1]),
        {"ic_bn": [1], "oc_bn": [1], "reg_n": [19], "unroll_kw": [True, False], "oc_tile": [2, 3],
         "oh_bn": [1, 4]},
    ),
    "plain_nchw_flat_pixels_pointwise": (
        x86.conv2d_workload([2, 6, 4, 8], [6, 6, 1, 1]),
        {"ic_bn": [1], "oc_bn": [1], "reg_n": [8, 16, 32], "flat": [4, 8], "unroll_kw": [False],
         "oc_tile": [1, 2, 3]},
    ),
    "blocked_flat_pixels_pointwise_with_tails": (
        x86.conv2d_workload([2, 16, 5, 7], [24, 16, 1, 1]),
        {"ic_bn": [4, 16], "oc_bn": [8, 24], "reg_n": [3, 6, 35], "flat": [1], "unroll_kw": [False],
         "rows_outer": [False, True]},
    ),
    "pointwise_threads_share_rows": (
        x86.conv2d_workload([1, 16, 6, 6], [8, 16, 1, 1]),
        {"ic_bn": [4, 16], "oc_bn": [4, 8], "reg_n": [3, 6], "unroll_kw": [False], "oh_bn": [1, 4],
         "rows_outer": [True]},
    ),
    "batch2_padded_stride2_threads_share_rows": (
        x86.conv2d_workload([2, 4, 9, 7], [6, 4, 3, 3], [2, 1], [1, 1, 1, 1]),
        {"ic_bn": [4], "oc_bn": [3, 6], "reg_n": [3, 7], "unroll_kw": [True], "rows_outer": [True]},
    ),
    "winograd_tiles_divide_the_output": (
        x86.conv2d_workload([1, 16, 8, 8], [32, 16, 3, 3], padding=[1, 1, 1, 1]),
        {"ic_bn": [4, 16], "oc_bn": [8, 32], "reg_n": [3, 4], "unroll_kw": [False], "winograd": [2, 4]},
    ),
    "winograd_overhanging_tiles_batch2_asymmetric_padding": (
        x86.conv2d_workload([2, 8, 9, 7], [12, 8, 3, 3], padding=[2, 0, 1, 1]),
        {"ic_bn": [1, 8], "oc_bn": [12], "reg_n": [5], "unroll_kw": [False], "winograd": [2, 4]},
    ),
    "winograd_unpadded": (
        x86.conv2d_workload([1, 8, 10, 10], [8, 8, 3, 3]),
        {"ic_bn": [8], "oc_bn": [8], "reg_n": [4], "unroll_kw": [False], "winograd": [2, 4]},
    ),
    "blocks_of_three_vectors": (
        x86.conv2d_workload([1, 16, 6, 6], [48, 16, 3, 3], padding=[1, 1, 1, 1]),
        {"ic_bn": [8, 16], "oc_bn": [24, 48], "reg_n": [3], "unroll_kw": [True, False]},
    ),
    "batch2_rect_kernel_mixed_strides": (
        x86.conv2d_workload([2, 4, 7, 5], [12, 4, 3, 2], [1, 2], [0, 1, 1, 0]),
        {"ic_bn": [2, 4], "oc_bn": [4, 12], "reg_n": [3], "unroll_kw": [True]},
    ),
}

DEPTHWISE_CASES = {
    "stride1": (
        x86.conv2d_workload([1, 24, 9, 9], [24, 1, 3, 3], padding=[1, 1, 1, 1], groups=24),
        {"bn": [1, 4, 8, 24], "reg_n": [4, 9]},
    ),
    "stride2": (
        x86.conv2d_workload([1, 24, 9, 9], [24, 1, 3, 3], [2, 2], [1, 1, 1, 1], groups=24),
        {"bn": [4, 8, 24], "reg_n": [2, 5]},
    ),
    "plain_nchw_width_vectorised": (
        x86.conv2d_workload([1, 6, 7, 9], [6, 1, 3, 3], padding=[1, 1, 1, 1], groups=6),
        {"bn": [1], "reg_n": [9], "c_tile": [1, 2, 3], "oh_bn": [1, 2, 7]},
    ),
    "plain_nchw_width_vectorised_dilated_batch2": (
        x86.conv2d_workload([2, 4, 8, 19], [4, 1, 3, 3], padding=[2, 1, 2, 1], dilation=[2, 1],
                            groups=4),
        {"bn": [1], "reg_n": [19], "c_tile": [1, 4], "oh_bn": [1, 3]},
    ),
}

DENSE_WORKLOAD = x86.dense_workload([3, 40], [12, 40])
DENSE_GRID = {"oc_bn": [1, 4, 6, 12], "k_bn": [1, 5, 8]}


@functools.lru_cache(maxsize=None)
def conv_data(name: str, table: str) -> tuple:
    """Random inputs (seeded per case) and the float64 reference output."""
    workload = (CONV_CASES if table == "conv" else DEPTHWISE_CASES)[name][0]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    x, w = random(workload["data"], rng), random(workload["kernel"], rng)
    ref = conv2d_reference(x, w, workload["strides"], workload["padding"], workload["dilation"],
                           workload["groups"])
    return x, w, ref


def test_reference_matches_scipy():
    x, w, ref = conv_data("odd_channels_stride2_padded", "conv")
    xp = np.pad(x[0].astype("float64"), ((0, 0), (1, 1), (1, 1)))
    for o in range(w.shape[0]):
        full = sum(scipy.signal.correlate2d(xp[c], w[o, c], mode="valid") for c in range(w.shape[1]))
        np.testing.assert_allclose(ref[0, o], full[::2, ::2], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name, knobs", cases(CONV_CASES))
@pytest.mark.integration
def test_conv2d_matches_reference(name, knobs):
    workload = CONV_CASES[name][0]
    x, w, ref = conv_data(name, "conv")
    func = x86.kernel_func(workload, knobs)
    inputs = [x86.pack_data(x, knobs["ic_bn"]), x86.pack_weight(w, workload, knobs)]
    out = run(func, inputs, x86.kernel_shapes(workload, knobs)[2])
    np.testing.assert_allclose(x86.unpack_data(out), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name, knobs", cases(DEPTHWISE_CASES))
@pytest.mark.integration
def test_depthwise_matches_reference(name, knobs):
    workload = DEPTHWISE_CASES[name][0]
    x, w, ref = conv_data(name, "depthwise")
    func = x86.kernel_func(workload, knobs)
    inputs = [x86.pack_data(x, knobs["bn"]), x86.pack_depthwise_kernel(w, knobs["bn"])]
    out = run(func, inputs, x86.kernel_shapes(workload, knobs)[2])
    np.testing.assert_allclose(x86.unpack_data(out), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("knobs", grid(DENSE_GRID), ids=lambda k: f"oc_bn{k['oc_bn']}-k_bn{k['k_bn']}")
def test_dense_matches_reference(knobs):
    rng = np.random.default_rng(7)
    x, w = random([3, 40], rng), random([12, 40], rng)
    func = x86.kernel_func(DENSE_WORKLOAD, knobs)
    out = run(func, [x, x86.pack_dense_weight(w, knobs["oc_bn"])], [3, 12])
    np.testing.assert_allclose(out, x.astype("float64") @ w.T.astype("float64"), rtol=1e-4, atol=1e-4)


def test_default_and_first_candidates_build_and_match():
    workload = CONV_CASES["odd_channels_stride2_padded"][0]
    x, w, ref = conv_data("odd_channels_stride2_padded", "conv")
    for knobs in [x86.default_knobs(workload)] + x86.candidates(workload, max_candidates=2):
        inputs = [x86.pack_data(x, knobs["ic_bn"]), x86.pack_weight(w, workload, knobs)]
        out = run(x86.kernel_func(workload, knobs), inputs, x86.kernel_shapes(workload, knobs)[2])
        np.testing.assert_allclose(x86.unpack_data(out), ref, rtol=1e-4, atol=1e-4)


def test_kernel_func_params_are_inputs_then_output():
    workload = CONV_CASES["stem_3_channels_7x7_stride2"][0]
    knobs = {"ic_bn": 3, "oc_bn": 8, "reg_n": 6, "unroll_kw": True}
    func = x86.kernel_func(workload, knobs)
    shapes = [[int(s) for s in p.shape] for p in func.params]
    assert shapes == list(x86.kernel_shapes(workload, knobs))
    assert shapes[0] == [1, 1, 23, 23, 3] and shapes[2] == [1, 2, 12, 12, 8]
    assert func.attrs["global_symbol"] == "main"
    script = func.script()
    assert "T.parallel" in script and "T.vectorized(8)" in script and 'scope="local"' in script


@pytest.mark.parametrize("workload, knobs, vector", [
    (CONV_CASES["blocks_of_three_vectors"][0], {"ic_bn": 8, "oc_bn": 24, "reg_n": 3, "unroll_kw": False}, 8),
    (DEPTHWISE_CASES["stride1"][0], {"bn": 24, "reg_n": 3}, 8),
    (x86.dense_workload([1, 64], [40, 64]), {"oc_bn": 40, "k_bn": 8}, 8),
    (CONV_CASES["blocks_of_three_vectors"][0], {"ic_bn": 8, "oc_bn": 48, "reg_n": 3, "unroll_kw": False}, 16),
])
def test_register_tile_vectors_are_powers_of_two(workload, knobs, vector):
    script = x86.kernel_func(workload, knobs).script()
    block = knobs.get("oc_bn", knobs.get("bn"))
    assert f"T.vectorized({vector})" in script and f"T.unroll({block // vector})" in script


def test_unroll_kw_knob_changes_the_schedule():
    workload = CONV_CASES["dilated_asymmetric_padding"][0]
    base = {"ic_bn": 8, "oc_bn": 8, "reg_n": 4}
    unrolled = x86.kernel_func(workload, {**base, "unroll_kw": True}).script()
    rolled = x86.kernel_func(workload, {**base, "unroll_kw": False}).script()
    assert "for kw in T.unroll(3)" in unrolled and "for kw in T.unroll(3)" not in rolled


RESNET_LIKE = {
    "3x3_64_56": x86.conv2d_workload([1, 64, 56, 56], [64, 64, 3, 3], padding=[1, 1, 1, 1]),
    "1x1_256_64_56": x86.conv2d_workload([1, 256, 56, 56], [64, 256, 1, 1]),
    "3x3_512_7": x86.conv2d_workload([1, 512, 7, 7], [512, 512, 3, 3], padding=[1, 1, 1, 1]),
    "3x3_128_28_stride2": x86.conv2d_workload([1, 128, 57, 57], [128, 128, 3, 3], [2, 2], [0, 0, 1, 1]),
    "stem": x86.conv2d_workload([1, 3, 224, 224], [64, 3, 7, 7], [2, 2], [3, 3, 3, 3]),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(RESNET_LIKE))
def test_full_size_top_candidates_match_reference(name):
    workload = RESNET_LIKE[name]
    rng = np.random.default_rng(11)
    x, w = random(workload["data"], rng), random(workload["kernel"], rng)
    ref = conv2d_reference(x, w, workload["strides"], workload["padding"], workload["dilation"])
    for knobs in x86.candidates(workload, max_candidates=6):
        inputs = [x86.pack_data(x, knobs["ic_bn"]), x86.pack_weight(w, workload, knobs)]
        out = run(x86.kernel_func(workload, knobs), inputs, x86.kernel_shapes(workload, knobs)[2])
        np.testing.assert_allclose(x86.unpack_data(out), ref, rtol=1e-3, atol=1e-3)


@st.composite
def conv_and_knobs(draw):
    c, o = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    h, w = draw(st.integers(kh + 2, 9)), draw(st.integers(kw + 2, 9))
    strides = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    dilation = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    padding = [draw(st.integers(0, 2)) for _ in range(4)]
    depthwise = draw(st.booleans())
    workload = x86.conv2d_workload(
        [draw(st.integers(1, 2)), c, h, w], [c if depthwise else o, 1 if depthwise else c, kh, kw],
        strides, padding, dilation, groups=c if depthwise else 1,
    )
    return workload, draw(st.sampled_from(x86.candidates(workload)))


@settings(max_examples=8, deadline=None, derandomize=True)
@given(conv_and_knobs())
def test_random_convs_and_candidates_match_reference(case):
    workload, knobs = case
    rng = np.random.default_rng(0)
    x, w = random(workload["data"], rng), random(workload["kernel"], rng)
    ref = conv2d_reference(x, w, workload["strides"], workload["padding"], workload["dilation"],
                           workload["groups"])
    block = knobs["ic_bn"] if x86.op_of(workload) == "conv2d" else knobs["bn"]
    inputs = [x86.pack_data(x, block), x86.pack_weight(w, workload, knobs)]
    out = run(x86.kernel_func(workload, knobs), inputs, x86.kernel_shapes(workload, knobs)[2])
    np.testing.assert_allclose(x86.unpack_data(out), ref, rtol=1e-4, atol=1e-4)
