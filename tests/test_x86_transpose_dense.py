"""conv2d_transpose and N-D dense kernels, and convs with dilation / asymmetric padding / 1xN
kernels on the candidate path, vs NumPy over knob grids (small shapes)."""

import functools

import numpy as np
import pytest

import graphtune.x86 as x86
from graphtune.errors import KnobError, ModelError
from graphtune.measure import Task
from graphtune.measure.build import prim_func_of
from x86_reference import cases, conv2d_reference, conv2d_transpose_reference, random, run

pytestmark = pytest.mark.unit

TRANSPOSE_CASES = {
    # name: (workload, knob grid); every combination is built and checked
    "k2_s2_unet": (
        x86.conv2d_transpose_workload([1, 8, 5, 5], [8, 6, 2, 2], [2, 2]),
        {"ic_bn": [1, 8], "oc_bn": [3, 6], "reg_n": [2, 4, 5], "unroll_kw": [False], "oh_bn": [1, 2]},
    ),
    "k4_s2_p1": (
        x86.conv2d_transpose_workload([1, 6, 5, 4], [6, 8, 4, 4], [2, 2], [1, 1, 1, 1]),
        {"ic_bn": [2, 6], "oc_bn": [4, 8], "reg_n": [3, 4, 8], "unroll_kw": [True, False]},
    ),
    "k3_s2_p1_output_padding": (
        x86.conv2d_transpose_workload([1, 4, 4, 5], [4, 4, 3, 3], [2, 2], [1, 1, 1, 1], [1, 1]),
        {"ic_bn": [4], "oc_bn": [2, 4], "reg_n": [3, 4, 5], "unroll_kw": [True, False]},
    ),
    "k3_s1_same": (
        x86.conv2d_transpose_workload([2, 4, 5, 5], [4, 8, 3, 3], [1, 1], [1, 1, 1, 1]),
        {"ic_bn": [2, 4], "oc_bn": [8], "reg_n": [2, 5], "unroll_kw": [True, False]},
    ),
    "rect_kernel_mixed_strides_asymmetric": (
        x86.conv2d_transpose_workload([1, 4, 4, 6], [4, 4, 3, 2], [3, 1], [2, 0, 0, 1], [1, 0]),
        {"ic_bn": [1, 4], "oc_bn": [4], "reg_n": [3, 6], "unroll_kw": [True, False]},
    ),
}

# Part of the candidate path: dilation, asymmetric padding, 1xN / Nx1 kernels, conv2d and depthwise.
SHAPED = {
    "dilated2_3x3": x86.conv2d_workload([1, 8, 11, 11], [16, 8, 3, 3], padding=[2, 2, 2, 2], dilation=[2, 2]),
    "dilated_3_stride2": x86.conv2d_workload([1, 8, 13, 13], [8, 8, 3, 3], [2, 2], [3, 3, 3, 3], [3, 3]),
    "asymmetric_padding": x86.conv2d_workload([1, 8, 9, 10], [8, 8, 3, 3], padding=[0, 1, 2, 1]),
    "1x7": x86.conv2d_workload([1, 8, 9, 9], [12, 8, 1, 7], padding=[0, 3, 0, 3]),
    "7x1": x86.conv2d_workload([1, 12, 9, 9], [8, 12, 7, 1], padding=[3, 0, 3, 0]),
    "1x3_dilated_rows": x86.conv2d_workload([1, 8, 7, 9], [8, 8, 3, 1], padding=[2, 0, 2, 0],
                                            dilation=[2, 1]),
    "depthwise_dilated2": x86.conv2d_workload([1, 16, 10, 10], [16, 1, 3, 3], padding=[2, 2, 2, 2],
                                              dilation=[2, 2], groups=16),
    "depthwise_asymmetric_stride2": x86.conv2d_workload([1, 16, 9, 9], [16, 1, 3, 3], [2, 2], [0, 0, 1, 1],
                                                        groups=16),
    "depthwise_1x5": x86.conv2d_workload([1, 16, 6, 9], [16, 1, 1, 5], padding=[0, 2, 0, 2], groups=16),
    "depthwise_5x1_dilated": x86.conv2d_workload([1, 8, 11, 6], [8, 1, 5, 1], padding=[4, 0, 4, 0],
                                                 dilation=[2, 1], groups=8),
}

DENSE_CASES = {
    "tokens_4d": (x86.dense_workload([1, 5, 6, 24], [40, 24]),
                  {"oc_bn": [8, 40], "k_bn": [4, 8], "n_bn": [1, 4, 6]}),
    "tokens_3d_batch2": (x86.dense_workload([2, 7, 16], [12, 16]),
                         {"oc_bn": [4, 12], "k_bn": [16], "n_bn": [2, 7], "rows_inner": [False, True]}),
    "rows_2d": (x86.dense_workload([9, 16], [24, 16]), {"oc_bn": [8, 24], "k_bn": [2], "n_bn": [1, 4, 9],
                                                         "rows_inner": [False, True]}),
}


def inputs_of(workload: dict, knobs: dict, x: np.ndarray, w: np.ndarray) -> list:
    """The kernel's inputs in its blocked layouts."""
    op = x86.op_of(workload)
    if op == "dense":
        return [x, x86.pack_dense_weight(w, knobs["oc_bn"])]
    if op == "depthwise_conv2d":
        return [x86.pack_data(x, knobs["bn"]), x86.pack_depthwise_kernel(w, knobs["bn"])]
    if op == "conv2d_transpose":
        ib, ob = knobs["ic_bn"], knobs["oc_bn"]
        return [x86.pack_data(x, ib), x86.pack_conv2d_transpose_kernel(w, ib, ob, workload["strides"])]
    return [x86.pack_data(x, knobs["ic_bn"]), x86.pack_weight(w, workload, knobs)]  # Winograd too


def reference(workload: dict, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    op = x86.op_of(workload)
    if op == "dense":
        return x.astype("float64") @ w.T.astype("float64")
    if op == "conv2d_transpose":
        return conv2d_transpose_reference(x, w, workload["strides"], workload["padding"],
                                          workload["output_padding"])
    return conv2d_reference(x, w, workload["strides"], workload["padding"], workload["dilation"],
                            workload["groups"])


@functools.lru_cache(maxsize=None)
def data(name: str, workload_json: str) -> tuple:
    workload = __import__("json").loads(workload_json)
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    x, w = random(workload["data"], rng), random(workload.get("kernel", workload.get("weight")), rng)
    return x, w, reference(workload, x, w)


def check(name: str, workload: dict, knobs: dict) -> None:
    x, w, ref = data(name, __import__("json").dumps(workload))
    out = run(x86.kernel_func(workload, knobs), inputs_of(workload, knobs, x, w),
              x86.kernel_shapes(workload, knobs)[2])
    got = out if x86.op_of(workload) == "dense" else x86.unpack_data(out)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_transpose_reference_is_the_adjoint_of_conv2d():
    """<conv_transpose(y), x> == <y, conv(x)> for the same weight: the reference is a true transpose."""
    rng = np.random.default_rng(5)
    x, w = random([1, 4, 9, 8], rng), random([6, 4, 3, 3], rng)  # conv: 4 -> 6 channels, stride 2, pad 1
    y = conv2d_reference(x, w, [2, 2], [1, 1, 1, 1], [1, 1])
    g = random(y.shape, rng)
    back = conv2d_transpose_reference(g, w, [2, 2], [1, 1, 1, 1], [0, 1])  # output_padding restores 9x8
    assert back.shape == x.shape
    np.testing.assert_allclose((back * x).sum(), (g * y).sum(), rtol=1e-9)


@pytest.mark.parametrize("name, knobs", cases(TRANSPOSE_CASES))
@pytest.mark.integration
def test_conv2d_transpose_matches_reference(name, knobs):
    check(name, TRANSPOSE_CASES[name][0], knobs)


@pytest.mark.parametrize("name, knobs", cases(DENSE_CASES))
@pytest.mark.integration
def test_nd_dense_matches_reference(name, knobs):
    check(name, DENSE_CASES[name][0], knobs)


@pytest.mark.parametrize("name", list(TRANSPOSE_CASES) + list(SHAPED))
@pytest.mark.integration
def test_candidates_build_and_match(name):
    """The first candidates (what tune measures) and the default knobs, built and run."""
    workload = TRANSPOSE_CASES[name][0] if name in TRANSPOSE_CASES else SHAPED[name]
    chosen = x86.candidates(workload, max_candidates=6)
    assert len({str(k) for k in chosen}) == len(chosen) == min(6, len(x86.candidates(workload)))
    for knobs in chosen + [x86.default_knobs(workload)]:
        check(name, workload, knobs)


@pytest.mark.parametrize("name", list(SHAPED))
@pytest.mark.integration
def test_shaped_convs_every_block_pair(name):
    """Every channel-block choice of the candidate space (its best tile) on the odd shapes."""
    workload = SHAPED[name]
    seen = set()
    for knobs in x86.candidates(workload):
        blocks = tuple(knobs.get(k) for k in ("ic_bn", "oc_bn", "bn"))
        if blocks not in seen:
            seen.add(blocks)
            check(name, workload, knobs)
    assert len(seen) > 2


@pytest.mark.parametrize("name", list(DENSE_CASES))
def test_nd_dense_candidates_tile_rows(name):
    workload = DENSE_CASES[name][0]
    chosen = x86.candidates(workload, max_candidates=6)
    assert all(k["n_bn"] <= workload["data"][-2] for k in chosen)
    assert any(k["n_bn"] > 1 for k in chosen)
    # the best tile's row tiles inside each output block next, where it has several row tiles
    assert bool(chosen[1].get("rows_inner")) == (chosen[0]["n_bn"] < workload["data"][-2])
    for knobs in chosen:
        check(name, workload, knobs)


def test_transpose_measure_task_builds_the_same_kernel():
    workload = TRANSPOSE_CASES["k4_s2_p1"][0]
    knobs = x86.candidates(workload, max_candidates=1)[0]
    func = prim_func_of(Task("conv2d_transpose", workload, knobs), x86.host_target())
    assert [[int(s) for s in p.shape] for p in func.params] == list(x86.kernel_shapes(workload, knobs))


def test_transpose_wide_tiles_prefer_stride_multiples():
    workload = x86.conv2d_transpose_workload([1, 64, 14, 14], [64, 32, 2, 2], [2, 2])
    assert all(k["reg_n"] % 2 == 0 for k in x86.candidates(workload, max_candidates=8))
    assert x86.layouts_of(workload, {"ic_bn": 16, "oc_bn": 32, "reg_n": 8, "unroll_kw": False}) == (
        "NCHW16c", "NCHW32c")


def test_nd_dense_layouts_stay_plain():
    assert x86.layouts_of(DENSE_CASES["tokens_4d"][0], {"oc_bn": 8, "k_bn": 4}) == ("NCHW", "NCHW")
    assert x86.output_shape(DENSE_CASES["tokens_3d_batch2"][0]) == [2, 7, 12]
    assert x86.flops(DENSE_CASES["tokens_4d"][0]) == 2 * 30 * 24 * 40


@pytest.mark.parametrize("change, message", [
    ({"dilation": [2, 2]}, "dilation"),
    ({"groups": 2}, "groups=2"),
    ({"output_padding": [2, 0]}, "output_padding"),
    ({"kernel": [6, 4, 3, 3]}, "input channels"),
    ({"padding": [9, 9, 9, 9]}, "empty output"),
])
def test_bad_transpose_workloads_name_the_field(change, message):
    workload = {**x86.conv2d_transpose_workload([1, 4, 4, 4], [4, 4, 3, 3], [2, 2]), **change}
    with pytest.raises(ModelError, match=message):
        x86.op_of(workload)


def test_dense_data_of_rank_5_is_refused():
    with pytest.raises(ModelError, match=r"data = \[1, 2, 3, 4, 8\]: expected 2 to 4 ints"):
        x86.dense_workload([1, 2, 3, 4, 8], [4, 8])


def test_bad_nd_dense_knobs_name_the_knob():
    with pytest.raises(KnobError, match="'n_bn' = 7 must not exceed the 6 rows"):
        x86.kernel_func(DENSE_CASES["tokens_4d"][0], {"oc_bn": 8, "k_bn": 4, "n_bn": 7})
    with pytest.raises(KnobError, match="'oc_bn' = 5 must divide the 8 output channels"):
        x86.kernel_func(TRANSPOSE_CASES["k4_s2_p1"][0],
                        {"ic_bn": 2, "oc_bn": 5, "reg_n": 2, "unroll_kw": True})
