"""Group conv2d kernels (1 < groups, not depthwise) vs NumPy over small knob grids."""

import functools

import numpy as np
import pytest
import tvm

import graphtune.x86 as x86
from graphtune.errors import KnobError
from graphtune.x86.lowering import PIPELINE
from x86_reference import conv2d_reference, random, run

pytestmark = pytest.mark.unit

GROUP_CASES = {
    # name: (workload, [(ic_bn, oc_bn), ...], reg_n values); every (blocks, reg_n, unroll_kw) is checked
    "resnext_4_per_group": (  # blocks inside a group (2, 4) and spanning 2 and 4 groups (8, 16)
        x86.conv2d_workload([1, 32, 7, 7], [32, 4, 3, 3], padding=[1, 1, 1, 1], groups=8),
        [(2, 2), (4, 4), (2, 4), (8, 8), (4, 8), (16, 16), (8, 16), (32, 32)],
        [3, 7],
    ),
    "uneven_in_out_stride2": (  # 4 inputs, 8 outputs per group; half-group and 3-group blocks
        x86.conv2d_workload([1, 12, 9, 9], [24, 4, 3, 3], [2, 2], [1, 1, 1, 1], groups=3),
        [(2, 4), (4, 4), (4, 8), (3, 24), (12, 24)],
        [2, 5],
    ),
    "channel_multiplier_2": (  # groups == C, O == 2C: one input channel per group
        x86.conv2d_workload([1, 8, 6, 6], [16, 1, 3, 3], padding=[0, 1, 2, 1], groups=8),
        [(1, 2), (1, 1), (4, 8), (2, 8), (8, 16)],
        [4],
    ),
    "batch2_dilated": (
        x86.conv2d_workload([2, 16, 8, 8], [16, 8, 3, 3], padding=[2, 2, 2, 2], dilation=[2, 2], groups=2),
        [(8, 8), (4, 4), (16, 16)],
        [8],
    ),
}

POINTWISE = x86.conv2d_workload([1, 16, 6, 6], [16, 4, 1, 1], groups=4)

SHUFFLE_CASES = {
    # name: (workload, blocks whose output block spans several groups); each with knob shuffle
    "resnext_4_per_group": (GROUP_CASES["resnext_4_per_group"][0], [8, 16, 32]),
    "batch2_dilated": (GROUP_CASES["batch2_dilated"][0], [16]),
    "eight_per_group_stride2": (
        x86.conv2d_workload([1, 32, 9, 9], [32, 8, 3, 3], [2, 2], [1, 1, 1, 1], groups=4), [16, 32]),
}


def _params() -> list:
    plain = [
        pytest.param(name, {"ic_bn": ib, "oc_bn": ob, "reg_n": r, "unroll_kw": u},
                     id=f"{name}-ic{ib}-oc{ob}-r{r}-{'u' if u else 'nu'}")
        for name, (_, blocks, regs) in GROUP_CASES.items()
        for ib, ob in blocks for r in regs for u in (True, False)
    ]
    shuffled = [
        pytest.param(name, {"ic_bn": b, "oc_bn": b, "reg_n": 3, "unroll_kw": u, "shuffle": True},
                     id=f"{name}-shuffle{b}-{'u' if u else 'nu'}")
        for name, (_, blocks) in SHUFFLE_CASES.items() for b in blocks for u in (True, False)
    ]
    return plain + shuffled


@functools.lru_cache(maxsize=None)
def _data(name: str) -> tuple:
    workload = POINTWISE if name == "pointwise" else {**GROUP_CASES, **SHUFFLE_CASES}[name][0]
    rng = np.random.default_rng(sum(map(ord, name)))
    x, w = random(workload["data"], rng), random(workload["kernel"], rng)
    ref = conv2d_reference(x, w, workload["strides"], workload["padding"], workload["dilation"],
                           workload["groups"])
    return workload, x, w, ref


def _check(name: str, knobs: dict) -> None:
    workload, x, w, ref = _data(name)
    func = x86.kernel_func(workload, knobs)
    packed = x86.pack_weight(w, workload, knobs)
    out = run(func, [x86.pack_data(x, knobs["ic_bn"]), packed], x86.kernel_shapes(workload, knobs)[2])
    np.testing.assert_allclose(x86.unpack_data(out), ref, rtol=1e-4, atol=1e-4)


def test_reference_groups_is_per_group_dense():
    workload, x, w, ref = _data("uneven_in_out_stride2")
    for g in range(3):
        part = conv2d_reference(x[:, 4 * g:4 * g + 4], w[8 * g:8 * g + 8], [2, 2], [1, 1, 1, 1], [1, 1])
        np.testing.assert_allclose(ref[:, 8 * g:8 * g + 8], part, rtol=1e-12)


@pytest.mark.parametrize("name, knobs", _params())
@pytest.mark.integration
def test_group_conv_matches_reference(name, knobs):
    _check(name, knobs)


@pytest.mark.parametrize("oh_bn", [1, 2, 3])
@pytest.mark.parametrize("blocks", [(4, 4), (16, 16), (8, 8)])
def test_pointwise_group_conv_row_tiles(blocks, oh_bn):
    _check("pointwise",
           {"ic_bn": blocks[0], "oc_bn": blocks[1], "reg_n": 6, "unroll_kw": False, "oh_bn": oh_bn})


def test_ops_and_layouts():
    workload = GROUP_CASES["resnext_4_per_group"][0]
    assert x86.op_of(workload) == "group_conv2d"
    assert x86.op_of(x86.conv2d_workload([1, 8, 6, 6], [8, 1, 3, 3], groups=8)) == "depthwise_conv2d"
    knobs = {"ic_bn": 8, "oc_bn": 16, "reg_n": 7, "unroll_kw": True}
    assert x86.layouts_of(workload, knobs) == ("NCHW8c", "NCHW16c")


def test_shuffle_reads_no_lane_by_lane_and_no_block_diagonal_zeros():
    workload, knobs = SHUFFLE_CASES["resnext_4_per_group"][0], {"ic_bn": 16, "oc_bn": 16, "reg_n": 7,
                                                                "unroll_kw": True}
    target = {"kind": "llvm", "mcpu": "skylake-avx512"}
    func = x86.kernel_func(workload, {**knobs, "shuffle": True}, target)
    built = tvm.compile(tvm.IRModule({"main": func}), target=target, tir_pipeline=PIPELINE)
    shuffled = built.mod.inspect_source("ll")
    assert "shufflevector" in shuffled and "insertelement <16 x float>" not in shuffled
    assert x86.kernel_shapes(workload, {**knobs, "shuffle": True})[1] == [2, 1, 3, 3, 4, 16]  # no zeros
    assert x86.kernel_shapes(workload, knobs)[1] == [2, 1, 3, 3, 16, 16]  # 3 in 4 weights are zeros


@pytest.mark.parametrize("knobs, message", [
    ({"ic_bn": 4, "oc_bn": 12, "reg_n": 7, "unroll_kw": True}, "'oc_bn' = 12 must divide the 32 output"),
    ({"ic_bn": 8, "oc_bn": 4, "reg_n": 7, "unroll_kw": True}, "'ic_bn' = 8 must divide the 4 input channels"),
    ({"ic_bn": 4, "oc_bn": 4, "reg_n": 8, "unroll_kw": True}, "'reg_n' = 8 must not exceed"),
    ({"ic_bn": 4, "oc_bn": 4, "reg_n": 7}, "missing ['unroll_kw']"),
    ({"ic_bn": 8, "oc_bn": 16, "reg_n": 7, "unroll_kw": True, "shuffle": True}, "ic_bn == oc_bn"),
    ({"ic_bn": 4, "oc_bn": 4, "reg_n": 7, "unroll_kw": True, "shuffle": True}, "spanning several groups"),
    ({"ic_bn": 8, "oc_bn": 8, "reg_n": 7, "unroll_kw": True, "shuffle": 1}, "must be True or False"),
])
def test_bad_knobs_name_the_knob(knobs, message):
    with pytest.raises(KnobError, match=message.replace("[", r"\[").replace("]", r"\]")):
        x86.kernel_func(GROUP_CASES["resnext_4_per_group"][0], knobs)


@pytest.mark.parametrize("name", list(GROUP_CASES))
def test_candidates_are_valid_and_cover_every_block_mapping(name):
    workload = GROUP_CASES[name][0]
    found = x86.candidates(workload, {"kind": "llvm", "mcpu": "znver5"})
    for knobs in found:
        x86.check_knobs(workload, knobs)
    o, cg, og = workload["kernel"][0], workload["kernel"][1], workload["kernel"][0] // workload["groups"]
    expected = {(i, b) for b in range(1, o + 1) if o % b == 0 and (og % b == 0 or b % og == 0)
                for i in range(1, 65) if (cg * max(1, b // og)) % i == 0}
    assert {(k["ic_bn"], k["oc_bn"]) for k in found} == expected
    default = x86.default_knobs(workload, block=16, target={"kind": "llvm", "mcpu": "znver5"})
    assert default in found


def test_pack_group_kernel_rejects_bad_blocks():
    w = np.zeros((32, 4, 3, 3), dtype="float32")
    with pytest.raises(Exception, match="oc_bn=12"):
        x86.pack_group_kernel(w, 8, 4, 12)
