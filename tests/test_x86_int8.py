"""graphtune.x86's int8 conv2d (and dense): bit-exact against the integer math of ONNX QLinearConv.

Every kernel here is compared element for element with
:func:`graphtune.x86.conv2d_int8_reference` (NumPy, int64) on random uint8 activations, int8
weights, int32 biases, zero points and per-channel scales (an int8 dense against the reference of
its 1x1 map); the instruction of the host (``isa_of``) runs, and so does every other one the host
has; those it lacks are compiled and their assembly checked only.
"""

import re

import numpy as np
import pytest
import tvm

import graphtune.x86 as x86
from graphtune.errors import KnobError, ModelError
from graphtune.measure.build import prim_func_of
from graphtune.measure.task import Task
from graphtune.ops import Op, check_workload, flops, op_of, runs_as
from graphtune.x86.conv2d_int8 import computed_width
from graphtune.x86.int8_isa import isa_for, isas_of
from graphtune.x86.packing import pack_data, unpack_data

pytestmark = pytest.mark.unit

HOST = x86.host_target()
ISA = x86.isa_of(HOST).name
ZNVER4 = {"kind": "llvm", "mcpu": "znver4", "num-cores": 2}  # AVX-512 VNNI: compiled, never run


def _run(wl: dict, knobs: dict, *, seed: int = 0, relu: bool = False, scale: float | None = None,
         x_zero_point: int = 131, y_zero_point: int = 7, w_max: int = 127) -> tuple:
    """Run the kernel on random data (weights in ``-w_max..w_max``; with a smaller ``w_max``, every
    other activation row 255 and the first two input channels' weights ``w_max`` and ``-w_max``:
    the extreme pair sums); return (kernel output in NCHW, reference) (a dense's: of its 1x1 map,
    ``[1, M, 1, 1]``)."""
    rng = np.random.default_rng(seed)
    dense = op_of(wl) is Op.DENSE_INT8
    conv = x86.as_conv2d_int8(wl)[0] if dense else wl
    x = rng.integers(0, 256, conv["data"]).astype("uint8")
    w = rng.integers(-w_max, w_max + 1, conv["kernel"]).astype("int8")
    if w_max < 127:
        x[:, :, ::2] = 255
        w[::2, :2], w[1::2, :2] = w_max, -w_max
    o = conv["kernel"][0]
    bias = rng.integers(-20000, 20000, o).astype("int32")
    w_scale = np.full(o, scale, "float32") if scale else rng.uniform(1e-3, 1e-2, o).astype("float32")
    y_scale = 0.5 if wl["out_dtype"] == "uint8" else None
    in_bn, out_bn = (knobs["bn"], knobs["bn"]) if "bn" in knobs else (knobs["ic_bn"], knobs["oc_bn"])
    b, s = x86.pack_int8_params(w, bias, x_zero_point, 0.02 if not scale else 1.0, w_scale, y_scale
                                if not scale else 1.0, out_bn)
    func = x86.conv2d_int8_func(wl, knobs, HOST, x_zero_point, y_zero_point, relu)
    lib = tvm.compile(func, target=HOST)
    dev = tvm.cpu()
    data, weight = (x.reshape(wl["data"]), w.reshape(wl["weight"])) if dense else (pack_data(x, in_bn), w)
    args = [tvm.runtime.tensor(a, dev) for a in (data, x86.pack_weight(weight, wl, knobs), b, s)]
    out = tvm.runtime.empty(x86.kernel_shapes(wl, knobs)[2], wl["out_dtype"], dev)
    lib["main"](*args, out)
    ref = x86.conv2d_int8_reference(x, w, bias, x_zero_point, s.reshape(-1), conv, y_zero_point, relu)
    return out.numpy().reshape(ref.shape) if dense else unpack_data(out.numpy()), ref


CASES = {  # name: (data, kernel, strides, padding, knobs without isa)
    "3x3 s1 p1": ([1, 32, 10, 10], [32, 32, 3, 3], [1, 1], [1, 1, 1, 1],
                  {"ic_bn": 16, "oc_bn": 16, "reg_n": 5, "unroll_kw": True, "widen": True}),
    "1x1": ([1, 64, 7, 7], [32, 64, 1, 1], [1, 1], [0, 0, 0, 0],
            {"ic_bn": 32, "oc_bn": 8, "reg_n": 7, "unroll_kw": False, "oh_bn": 7}),
    "3x3 s2": ([1, 16, 9, 9], [16, 16, 3, 3], [2, 2], [1, 1, 1, 1],
               {"ic_bn": 8, "oc_bn": 16, "reg_n": 5, "unroll_kw": False}),
    "7x7 s2 stem, 3 channels padded to 4": ([1, 4, 20, 20], [16, 4, 7, 7], [2, 2], [3, 3, 3, 3],
                                            {"ic_bn": 4, "oc_bn": 16, "reg_n": 5, "unroll_kw": True}),
    "dense (batch 1) as a 1x1 conv of a 1x1 map": ([1, 64, 1, 1], [24, 64, 1, 1], [1, 1], [0, 0, 0, 0],
                                                   {"ic_bn": 64, "oc_bn": 8, "reg_n": 1, "unroll_kw": False,
                                                    "widen": True}),
    "1x1 s2, threads over rows": ([1, 32, 12, 12], [24, 32, 1, 1], [2, 2], [0, 0, 0, 0],
                                  {"ic_bn": 8, "oc_bn": 8, "reg_n": 3, "unroll_kw": False, "oh_bn": 2,
                                   "rows_outer": True}),
    "24 channels: 8-lane vectors (ymm vpdpbusd where the host has AVX-512 VNNI)": (
        [1, 16, 6, 6], [24, 16, 3, 3], [1, 1], [1, 1, 1, 1],
        {"ic_bn": 16, "oc_bn": 24, "reg_n": 3, "unroll_kw": True}),
    "71 columns in tiles of 8 (a padded width of 72)": (
        [1, 16, 3, 73], [16, 16, 3, 3], [1, 1], [0, 0, 0, 0],
        {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": True}),
    "20 channels, blocks of no whole vector": ([1, 6, 6, 6], [20, 6, 3, 3], [1, 1], [0, 1, 2, 1],
                                               {"ic_bn": 6, "oc_bn": 20, "reg_n": 2, "unroll_kw": True}),
}


@pytest.mark.parametrize("out_dtype", ["uint8", "float32"])
@pytest.mark.parametrize("case", list(CASES))
def test_int8_conv_is_bit_exact(case, out_dtype):
    data, kernel, strides, padding, knobs = CASES[case]
    wl = x86.conv2d_int8_workload(data, kernel, strides, padding, out_dtype=out_dtype)
    isa = isa_for(HOST, wl, knobs["oc_bn"])  # the host's instruction for the output block
    knobs = {**knobs, "isa": isa.name}
    if isa.dot == 4:
        knobs.pop("widen", None)
    if knobs["ic_bn"] % isa.dot:  # the host's instruction sums more channels than the case
        pytest.skip(f"input block {knobs['ic_bn']} does not fit isa {isa.name}")
    got, ref = _run(wl, knobs, relu=case == "1x1")
    np.testing.assert_array_equal(got, ref)


def test_padded_width_epilogue_is_computed_from_the_register_tile():
    """Over a padded width the requantization still runs inside the conv's loop nest (one
    parallel loop besides the zero-point padding pass): no int32 map goes through memory."""
    data, kernel, strides, padding, knobs = CASES["71 columns in tiles of 8 (a padded width of 72)"]
    wl = x86.conv2d_int8_workload(data, kernel, strides, padding, out_dtype="uint8")
    knobs = {**knobs, "isa": isa_for(HOST, wl, knobs["oc_bn"]).name}
    script = x86.conv2d_int8_func(wl, knobs, HOST).script()
    assert computed_width(wl, knobs) == 72 and script.count("T.parallel") == 2
    assert not re.search(r'sblock_alloc_buffer\(\([^)]*\), "int32"\)', script)  # int32 only in registers


DENSE = {  # name: (K, M, knobs without isa)
    "widened, two vectors of outputs": (96, 32, {"ic_bn": 32, "oc_bn": 16, "widen": True}),
    "one input block, five vectors": (64, 40, {"ic_bn": 64, "oc_bn": 40}),
    "10 outputs, blocks of no whole vector": (16, 10, {"ic_bn": 8, "oc_bn": 5, "widen": True}),
}


@pytest.mark.parametrize("out_dtype", ["uint8", "float32"])
@pytest.mark.parametrize("case", list(DENSE))
def test_int8_dense_is_bit_exact(case, out_dtype):
    """A batch-1 dense runs the conv2d_int8 kernel on a 1x1 map, reading [1, K] and writing [1, M]."""
    k, m, knobs = DENSE[case]
    wl = x86.dense_int8_workload([1, k], [m, k], out_dtype=out_dtype)
    isa = isa_for(HOST, wl, knobs["oc_bn"])
    knobs = {**knobs, "isa": isa.name}
    if isa.dot == 4:
        knobs.pop("widen", None)
    if knobs["ic_bn"] % isa.dot:
        pytest.skip(f"input block {knobs['ic_bn']} does not fit isa {isa.name}")
    got, ref = _run(wl, knobs, relu=out_dtype == "uint8", seed=2)
    np.testing.assert_array_equal(got, ref)


def test_dense_int8_workload_knobs_and_candidates():
    wl = x86.dense_int8_workload([1, 256], [40, 256], out_dtype="float32")
    fp32 = x86.dense_workload([1, 256], [40, 256])
    assert op_of(wl) is Op.DENSE_INT8 and flops(wl) == flops(fp32) and x86.output_shape(wl) == [1, 40]
    assert runs_as(Op.DENSE_INT8, wl, {"precision": "float32", "oc_bn": 8, "k_bn": 8}) == (
        Op.DENSE, fp32, {"oc_bn": 8, "k_bn": 8})
    with pytest.raises(ModelError, match=r"data = \[2, 256\]: an int8 dense reads one row \[1, K\]"):
        check_workload({**wl, "data": [2, 256]}, Op.DENSE_INT8)
    found = x86.candidates(wl, HOST)
    assert found and all(x86.layouts_of(wl, k) == ("NC", "NC") for k in found)
    assert all(set(k) <= {"ic_bn", "oc_bn", "isa", "widen"} and k["isa"] == isa_for(HOST, wl, k["oc_bn"]).name
               for k in found)
    assert x86.default_knobs(wl, block=16, target=HOST) == found[0]
    good = {"ic_bn": 16, "oc_bn": 8, "isa": "avx2"}
    for knobs, message in [({"ic_bn": 3}, "dense_int8 knob 'ic_bn' = 3 must divide the 256 input channels"),
                           ({"ic_bn": 2, "isa": "avx512vnni"}, "'ic_bn' = 2 must be a multiple of 4"),
                           ({"oc_bn": 16}, "'oc_bn' = 16 must divide the 40 output channels"),
                           ({"reg_n": 1}, r"unknown \['reg_n'\]")]:
        with pytest.raises(KnobError, match=message):
            x86.check_knobs(wl, {**good, **knobs})
    dense = Task(Op.DENSE, fp32, {"oc_bn": 8, "k_bn": 8})
    int8 = Task(Op.DENSE_INT8, wl, good)
    assert int8.key != dense.key and '"dtype":"uint8"' in int8.key and '"out_dtype":"float32"' in int8.key
    func = prim_func_of(int8, HOST if ISA != "avx512vnni" else {**ZNVER4, "mattr": ["-avx512f"]})
    assert [p.name for p in func.params][:4] == ["data", "kernel", "bias", "scale"]


DEPTHWISE = {  # name: (data, strides, padding, knobs)
    "3x3 s1 p1": ([1, 32, 9, 9], [1, 1], [1, 1, 1, 1], {"bn": 16, "reg_n": 9}),
    "3x3 s2, 24 channels": ([1, 24, 10, 10], [2, 2], [1, 1, 1, 1], {"bn": 8, "reg_n": 4}),
}


@pytest.mark.parametrize("out_dtype", ["uint8", "float32"])
@pytest.mark.parametrize("case", list(DEPTHWISE))
def test_int8_depthwise_is_bit_exact(case, out_dtype):
    data, strides, padding, knobs = DEPTHWISE[case]
    c = data[1]
    wl = x86.conv2d_int8_workload(data, [c, 1, 3, 3], strides, padding, out_dtype=out_dtype, groups=c)
    assert x86.candidates(wl, HOST) and all("isa" not in k for k in x86.candidates(wl, HOST))
    got, ref = _run(wl, knobs, relu=True)
    np.testing.assert_array_equal(got, ref)


GROUPED = {  # name: (data, kernel, strides, groups, knobs without isa, AMX blocks (ic_bn, oc_bn))
    "4 channels per group, blocks of 4 groups": ([1, 64, 10, 10], [64, 4, 3, 3], [1, 1], 16,
                                                 {"ic_bn": 16, "oc_bn": 16, "reg_n": 10, "unroll_kw": True},
                                                 (16, 16)),
    "8 per group, stride 2, a block inside one group": (
        [1, 64, 15, 15], [128, 8, 3, 3], [2, 2], 8, {"ic_bn": 8, "oc_bn": 16, "reg_n": 8, "unroll_kw": True},
        (16, 32)),
    "16 per group, two input chunks of a block's span": (
        [1, 64, 8, 8], [64, 16, 3, 3], [1, 1], 4, {"ic_bn": 8, "oc_bn": 32, "reg_n": 4, "unroll_kw": False},
        (16, 32)),
}


@pytest.mark.parametrize("isa", ["host", "amx"])
@pytest.mark.parametrize("case", list(GROUPED))
def test_int8_group_conv_is_bit_exact(case, isa):
    """A group conv's output blocks read only their groups' input channels (block-diagonal weights
    where a block spans several groups), on the host's instruction and on AMX tiles."""
    data, kernel, strides, groups, knobs, (ic_bn, oc_bn) = GROUPED[case]
    wl = x86.conv2d_int8_workload(data, kernel, strides, [1, 1, 1, 1], groups=groups)
    assert op_of(wl) is Op.GROUP_CONV2D_INT8
    if isa == "amx":
        if not x86.amx.usable(HOST):
            pytest.skip("the host has no AMX (or Linux did not grant its tile state)")
        knobs = {**knobs, "ic_bn": ic_bn, "oc_bn": oc_bn, "unroll_kw": False, "isa": "amx"}
    else:
        knobs = {**knobs, "isa": isa_for(HOST, wl, knobs["oc_bn"]).name}
    for out_dtype in ("uint8", "float32"):
        got, ref = _run({**wl, "out_dtype": out_dtype}, knobs, relu=True, seed=5)
        np.testing.assert_array_equal(got, ref)


def test_group_conv_blocks_map_onto_groups():
    wl = x86.conv2d_int8_workload([1, 64, 8, 8], [64, 4, 3, 3], padding=[1, 1, 1, 1], groups=16)
    good = {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": True, "isa": "avx2"}
    with pytest.raises(KnobError, match="'oc_bn' = 6 must divide the 64 output channels and divide or be a "
                       "multiple of the 4 output channels per group"):
        x86.check_knobs(wl, {**good, "oc_bn": 6})
    with pytest.raises(KnobError, match="'ic_bn' = 32 must divide the 16 input channels an output block"):
        x86.check_knobs(wl, {**good, "ic_bn": 32})
    with pytest.raises(KnobError, match="'isa' = 'avx2ubs' .*weight_pair_max"):  # no pair bound recorded
        x86.check_knobs(wl, {**good, "isa": "avx2ubs"})
    found = x86.candidates(wl, HOST)
    assert found and all(x86.layouts_of(wl, k)[0] == f"NCHW{k['ic_bn']}c" for k in found)
    assert runs_as(Op.GROUP_CONV2D_INT8, wl, {"precision": "float32"})[0] is Op.GROUP_CONV2D


@pytest.mark.parametrize("widen", [False, True])
def test_requantization_rounds_half_to_even_and_saturates(widen):
    # scale 0.5: every odd accumulator is a tie; large accumulators clip at 0 and 255
    wl = x86.conv2d_int8_workload([1, 8, 4, 4], [8, 8, 1, 1])
    knobs = {"ic_bn": 8, "oc_bn": 8, "reg_n": 4, "unroll_kw": False,  # widening: a 2-channel dot's
             **({"widen": True, "isa": "avx2"} if widen else {"isa": ISA})}
    got, ref = _run(wl, knobs, scale=0.5, x_zero_point=0, y_zero_point=128)
    np.testing.assert_array_equal(got, ref)
    assert {0, 255} <= set(np.unique(ref).tolist())
    assert np.rint(np.float32(2.5)) == 2  # the reference's own rounding: half to even


def test_zero_points_are_exact_at_the_borders():
    # padding pixels are the activation zero point: a border output equals the interior formula
    wl = x86.conv2d_int8_workload([1, 8, 5, 5], [8, 8, 3, 3], padding=[2, 2, 2, 2], out_dtype="float32")
    knobs = {"ic_bn": 8, "oc_bn": 8, "reg_n": 7, "unroll_kw": True, "isa": ISA}
    got, ref = _run(wl, knobs, x_zero_point=255, seed=3)
    np.testing.assert_array_equal(got, ref)


UBS = {  # name: (data, kernel, padding, knobs without isa)
    "3x3": ([1, 32, 10, 10], [32, 32, 3, 3], [1, 1, 1, 1],
            {"ic_bn": 16, "oc_bn": 16, "reg_n": 5, "unroll_kw": True}),
    "1x1": ([1, 64, 7, 7], [32, 64, 1, 1], [0, 0, 0, 0],
            {"ic_bn": 32, "oc_bn": 8, "reg_n": 7, "unroll_kw": False}),
}


@pytest.mark.parametrize("isa", ["avx2ubs", "avx512ubs"])
@pytest.mark.parametrize("out_dtype", ["uint8", "float32"])
@pytest.mark.parametrize("case", list(UBS))
def test_pmaddubsw_kernel_is_bit_exact_on_7_bit_weights(case, out_dtype, isa):
    """``avx2ubs`` / ``avx512ubs`` (vpmaddubsw + vpmaddwd by ones) on weights in -64..64,
    activations 255 beside pairs of +-64: the largest int16 pair sums (+-255 * 128) fit."""
    if x86.ISAS[isa] not in isas_of(HOST):
        pytest.skip(f"the host lacks {isa}")
    data, kernel, padding, knobs = UBS[case]
    wl = x86.conv2d_int8_workload(data, kernel, padding=padding, out_dtype=out_dtype, weight_pair_max=128)
    assert x86.ISAS[isa].exact_for(wl) and not x86.ISAS[isa].exact_for({**wl, "weight_pair_max": 129})
    got, ref = _run(wl, {**knobs, "isa": isa}, w_max=64, relu=out_dtype == "uint8")
    np.testing.assert_array_equal(got, ref)


def test_pmaddubsw_saturates_beyond_the_pair_bound():
    """Why the bound: the same kernel on 8-bit weights (a workload lying about them) is wrong."""
    data, kernel, padding, knobs = UBS["1x1"]
    wl = x86.conv2d_int8_workload(data, kernel, padding=padding, out_dtype="float32", weight_pair_max=128)
    got, ref = _run(wl, {**knobs, "isa": "avx2ubs"}, w_max=126)
    assert not np.array_equal(got, ref)


def test_pmaddubsw_is_offered_only_where_exact():
    wide = x86.conv2d_int8_workload([1, 64, 28, 28], [64, 64, 3, 3], padding=[1, 1, 1, 1],
                                    weight_pair_max=200)
    narrow = {**wide, "weight_pair_max": 128}
    haswell = {"kind": "llvm", "mcpu": "haswell"}
    assert {k["isa"] for k in x86.candidates(wide, haswell)} == {"avx2"}
    assert {k["isa"] for k in x86.candidates(check_workload(narrow), haswell)} == {"avx2ubs"}
    knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 4, "unroll_kw": True, "isa": "avx2ubs"}
    unknown = check_workload({k: v for k, v in wide.items() if k != "weight_pair_max"})  # still valid
    assert {k["isa"] for k in x86.candidates(unknown, haswell)} == {"avx2"}
    for workload in (wide, unknown):
        with pytest.raises(KnobError, match=r"'avx2ubs' .* weight_pair_max <= 128; .*reduce_range=True"):
            x86.check_knobs(workload, knobs)
    x86.check_knobs(narrow, knobs)
    for bad in (300, True, "128"):
        with pytest.raises(ModelError, match="weight_pair_max = .*: expected an int in 0..256"):
            check_workload({**wide, "weight_pair_max": bad})
    dense = x86.dense_int8_workload([1, 64], [16, 64], weight_pair_max=100)
    assert {k["isa"] for k in x86.candidates(dense, haswell)} == {"avx2ubs"}
    with pytest.raises(ModelError, match="unknown fields \\['weight_pair_max'\\]"):
        depthwise = x86.conv2d_int8_workload([1, 8, 4, 4], [8, 1, 3, 3], groups=8)
        check_workload({**depthwise, "weight_pair_max": 2})


@pytest.mark.parametrize("isa, mcpu, instruction", [("avx2ubs", "haswell", "vpmaddubsw\t%ymm"),
                                                    ("avx512ubs", "skylake-avx512", "vpmaddubsw\t%zmm")])
def test_pmaddubsw_kernels_compile_to_pair_sums_and_word_adds(isa, mcpu, instruction):
    target = {"kind": "llvm", "mcpu": mcpu}
    wl = x86.conv2d_int8_workload([1, 16, 6, 6], [16, 16, 1, 1], weight_pair_max=128)
    knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 6, "unroll_kw": False, "isa": isa}
    asm = tvm.compile(x86.conv2d_int8_func(wl, knobs, target), target=target).mod.inspect_source("asm")
    assert instruction in asm and "vpmaddwd" in asm


def test_vnni_kernel_compiles_to_vpdpbusd_for_an_avx512_target():
    wl = x86.conv2d_int8_workload([1, 32, 8, 8], [32, 32, 3, 3], padding=[1, 1, 1, 1])
    (knobs,) = x86.candidates(wl, ZNVER4, max_candidates=1)
    assert knobs["isa"] == "avx512vnni" and "widen" not in knobs
    asm = tvm.compile(x86.conv2d_int8_func(wl, knobs, ZNVER4), target=ZNVER4).mod.inspect_source("asm")
    assert "vpdpbusd" in asm and "zmm" in asm


def test_blocks_of_8_lane_vectors_run_ymm_vnni_on_an_avx512_target():
    """24 output channels: whole ymm vectors, no whole zmm one: vpdpbusd on ymm, not int32 vectors."""
    wl = x86.conv2d_int8_workload([1, 32, 8, 8], [24, 32, 1, 1], out_dtype="float32")
    found = x86.candidates(wl, ZNVER4, max_candidates=4)
    assert found and {k["isa"] for k in found if k["oc_bn"] % 8 == 0} == {"avx512vnni256"}
    knobs = next(k for k in found if k["isa"] == "avx512vnni256")
    asm = tvm.compile(x86.conv2d_int8_func(wl, knobs, ZNVER4), target=ZNVER4).mod.inspect_source("asm")
    assert re.search(r"vpdpbusd\t.*%ymm", asm) and not re.search(r"vpdpbusd\t.*%zmm", asm)


@pytest.mark.parametrize("isa, mcpu, instruction", [
    ("avx2", "haswell", "vpmaddwd\t%ymm"),
    ("avx512bw", "skylake-avx512", "vpmaddwd\t%zmm"),
    ("avx2", "znver4", "vpdpwssd\t%ymm"),  # LLVM fuses vpmaddwd + vpaddd where VNNI has it (exact)
])
def test_pmaddwd_kernels_compile_to_exact_word_products(isa, mcpu, instruction):
    target = {"kind": "llvm", "mcpu": mcpu}
    wl = x86.conv2d_int8_workload([1, 16, 6, 6], [16, 16, 1, 1])
    knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 6, "unroll_kw": False, "isa": isa}
    asm = tvm.compile(x86.conv2d_int8_func(wl, knobs, target), target=target).mod.inspect_source("asm")
    assert instruction in asm
    assert "vpmaddubsw" not in asm and "vpdpwssds" not in asm  # never a saturating one


def test_instruction_is_detected_from_the_target_never_assumed():
    hidden = x86.host_target({**ZNVER4, "mattr": ["-avx512f"]})  # a Zen 4 guest hiding AVX-512
    assert x86.isa_of(hidden).name == "avx2"
    assert x86.isa_of(ZNVER4).name == "avx512vnni"
    flags = open("/proc/cpuinfo").read().split()
    assert (ISA == "avx512vnni") == ("avx512_vnni" in flags)
    wl = x86.conv2d_int8_workload([1, 16, 6, 6], [16, 16, 3, 3])
    with pytest.raises(KnobError, match="'isa' = 'avx512vnni' needs .* which the target lacks; it has: avx2"):
        x86.conv2d_int8_func(wl, {"ic_bn": 16, "oc_bn": 16, "reg_n": 4, "unroll_kw": True,
                                  "isa": "avx512vnni"}, hidden)


def test_workload_carries_the_precision():
    wl = x86.conv2d_int8_workload([1, 16, 8, 8], [32, 16, 3, 3], padding=[1, 1, 1, 1], out_dtype="float32")
    assert op_of(wl) is Op.CONV2D_INT8 and (wl["dtype"], wl["out_dtype"]) == ("uint8", "float32")
    assert flops(wl) == flops(x86.conv2d_workload([1, 16, 8, 8], [32, 16, 3, 3], padding=[1, 1, 1, 1]))
    with pytest.raises(ModelError, match="out_dtype = 'int8'"):
        check_workload({**wl, "out_dtype": "int8"}, Op.CONV2D_INT8)
    with pytest.raises(ModelError, match="dtype 'float32' is not supported; use one of"):
        check_workload({**wl, "dtype": "float32"}, Op.CONV2D_INT8)
    with pytest.raises(ModelError, match="'group_conv2d_int8' workload .groups=2. does not match op"):
        check_workload({**wl, "kernel": [32, 8, 3, 3], "groups": 2}, Op.CONV2D_INT8)
    depthwise = x86.conv2d_int8_workload([1, 16, 8, 8], [16, 1, 3, 3], groups=16)
    assert op_of(depthwise) is Op.DEPTHWISE_CONV2D_INT8
    with pytest.raises(ModelError, match="'depthwise_conv2d_int8' workload .* not match op 'conv2d_int8'"):
        check_workload(depthwise, Op.CONV2D_INT8)
    knobs = {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": True, "isa": "avx2"}
    fp32 = Task(Op.CONV2D, x86.conv2d_workload([1, 16, 8, 8], [32, 16, 3, 3], padding=[1, 1, 1, 1]),
                {k: v for k, v in knobs.items() if k != "isa"})
    int8 = Task(Op.CONV2D_INT8, wl, knobs)
    assert int8.key != fp32.key and '"dtype":"uint8"' in int8.key and '"out_dtype":"float32"' in int8.key
    func = prim_func_of(int8, HOST if ISA != "avx512vnni" else {**ZNVER4, "mattr": ["-avx512f"]})
    assert [p.name for p in func.params] == ["data", "kernel", "bias", "scale", "dequantize"]


@pytest.mark.parametrize("knobs, message", [
    ({"ic_bn": 3, "oc_bn": 16}, "'ic_bn' = 3 must divide the 16 input channels"),
    ({"ic_bn": 16, "oc_bn": 16, "isa": "avx512vnni", "ic_bn_override": 2}, "unknown"),
    ({"ic_bn": 2, "isa": "avx512vnni"}, "'ic_bn' = 2 must be a multiple of 4"),
    ({"reg_n": 9}, "'reg_n' = 9 must not exceed the 8 output columns"),
    ({"oh_bn": 3}, "'oh_bn' = 3 must divide the 8 output rows"),
    ({"widen": True, "isa": "avx512vnni"}, "'widen' = True is a bool, True only for a 2-channel dot"),
    ({"isa": "sse"}, "'isa' = 'sse' names the int8 dot-product instruction; valid values: avx2"),
])
def test_knob_errors_name_the_rule(knobs, message):
    wl = x86.conv2d_int8_workload([1, 16, 8, 8], [16, 16, 1, 1])
    good = {"ic_bn": 16, "oc_bn": 16, "reg_n": 8, "unroll_kw": False, "isa": "avx2"}
    with pytest.raises(KnobError, match=message):
        x86.check_knobs(wl, {**good, **knobs})


@pytest.mark.parametrize("target", [ZNVER4, {"kind": "llvm", "mcpu": "haswell"}])
def test_first_candidates_try_distinct_register_tiles(target):
    """int8_order: the first candidates each try another (output vectors x pixels) tile shape,
    square blocks first; partial-vector output blocks come after every whole-vector one."""
    wl = x86.conv2d_int8_workload([1, 256, 56, 56], [128, 256, 1, 1], weight_pair_max=128)
    found = x86.candidates(wl, target)
    lanes = [x86.ISAS[k["isa"]].lanes for k in found]  # of the instruction each output block runs on
    whole = [k["oc_bn"] % n == 0 for k, n in zip(found, lanes)]
    assert whole == sorted(whole, reverse=True) and not all(whole)
    shapes = [(k["oc_bn"] // n, k["reg_n"] * k.get("oh_bn", 1))
              for k, n in zip(found, lanes) if k["oc_bn"] % n == 0]
    distinct = len(set(shapes))
    assert distinct >= 4 and len(set(shapes[:distinct])) == distinct
    assert all(k["ic_bn"] == k["oc_bn"] for k in found[:distinct])


def test_a_tile_made_to_divide_the_map_never_collapses_to_one_pixel():
    """On a 7x7 map a tile of 2 vectors x 4 rows x 3 pixels fits neither axis; made to divide both
    it would be one pixel (re-reading its kernel vectors per instruction) beside the same
    vectors' whole-row tile: it is dropped, and the next shape takes its turn among the first."""
    wl = x86.conv2d_int8_workload([1, 2048, 7, 7], [512, 2048, 1, 1])
    found = x86.candidates(wl, ZNVER4)
    tiles = {(k["oc_bn"] // 16, k["reg_n"] * k.get("oh_bn", 1)) for k in found if k["isa"] == "avx512vnni"}
    assert (2, 7) in tiles and (2, 1) not in tiles
    assert (4, 1) in tiles  # four vectors fit one pixel only (x86.knobs.accumulator_budget): kept
    assert all(k["reg_n"] * k.get("oh_bn", 1) > 1 for k in found[:4] if k["oc_bn"] // 16 < 4)


def test_threads_share_rows_of_a_1x1_conv_whose_input_is_largest():
    """As the fp32 conv's (x86.tiles._rows_outer): each thread then reads a band of the input."""
    wide_input = x86.conv2d_int8_workload([1, 256, 56, 56], [64, 256, 1, 1], weight_pair_max=128)
    wide_output = x86.conv2d_int8_workload([1, 64, 56, 56], [256, 64, 1, 1], weight_pair_max=128)
    three = x86.conv2d_int8_workload([1, 256, 56, 56], [64, 256, 3, 3], padding=[1, 1, 1, 1])
    assert all(k.get("rows_outer") for k in x86.candidates(wide_input, ZNVER4))
    assert not any(k.get("rows_outer") for wl in (wide_output, three) for k in x86.candidates(wl, ZNVER4))


@pytest.mark.parametrize("target", [None, ZNVER4, {"kind": "llvm", "mcpu": "haswell"}])
def test_candidates_are_valid_and_fit_the_target(target):
    wl = x86.conv2d_int8_workload([1, 64, 28, 28], [128, 64, 3, 3], [2, 2], [1, 1, 1, 1])
    found = x86.candidates(wl, target)
    assert found and len({str(sorted(k.items())) for k in found}) == len(found)
    isa = x86.isa_of(target).name
    for knobs in found:  # the best vector instruction for the block, or AMX tiles beside it
        assert knobs["isa"] == isa_for(target, wl, knobs["oc_bn"]).name or (
            knobs["isa"] == "amx" and x86.amx.usable(target))
        assert x86.layouts_of(wl, knobs) == (f"NCHW{knobs['ic_bn']}c", f"NCHW{knobs['oc_bn']}c")
    default = x86.default_knobs(wl, block=16, target=target)
    assert (default["ic_bn"], default["oc_bn"]) == (16, 16)
    assert x86.pack_weight(np.zeros((128, 64, 3, 3), "int8"), wl, default).dtype.name == (
        x86.ISAS[isa].weight_dtype)
    stem = x86.conv2d_int8_workload([1, 3, 32, 32], [16, 3, 7, 7], [2, 2], [3, 3, 3, 3])
    assert x86.candidates(stem, target) == []  # 3 channels: pad them to a multiple of the dot


AMX_CASES = {  # name: (data, kernel, strides, padding, knobs without isa)
    "3x3, 14-pixel rows, two tiles of channels": ([1, 64, 14, 14], [32, 64, 3, 3], [1, 1], [1, 1, 1, 1],
                                                  {"ic_bn": 64, "oc_bn": 32, "reg_n": 14}),
    "1x1, 32 input channels (a 32-byte tile row)": ([1, 32, 7, 7], [16, 32, 1, 1], [1, 1], [0, 0, 0, 0],
                                                    {"ic_bn": 32, "oc_bn": 16, "reg_n": 7}),
    "3x3, asymmetric padding, 9-pixel rows": ([1, 64, 9, 9], [48, 64, 3, 3], [1, 1], [0, 1, 2, 1],
                                              {"ic_bn": 64, "oc_bn": 16, "reg_n": 9}),
    "3x3, two input chunks, three tiles of channels": ([1, 128, 8, 8], [48, 128, 3, 3], [1, 1], [1, 1, 1, 1],
                                                       {"ic_bn": 64, "oc_bn": 48, "reg_n": 8}),
    "1x1 stride 2, two input chunks (rows every other pixel)": (
        [1, 128, 14, 14], [64, 128, 1, 1], [2, 2], [0, 0, 0, 0], {"ic_bn": 64, "oc_bn": 64, "reg_n": 7}),
    "3x3 stride 2, padded, odd input width": ([1, 64, 15, 15], [32, 64, 3, 3], [2, 2], [1, 1, 1, 1],
                                              {"ic_bn": 64, "oc_bn": 32, "reg_n": 8}),
    "17 columns in tiles of 9 rows (a padded width of 18)": (
        [1, 32, 17, 17], [16, 32, 3, 3], [1, 1], [1, 1, 1, 1], {"ic_bn": 32, "oc_bn": 16, "reg_n": 9}),
    "stride 2, 17 columns in tiles of 6 rows": ([1, 64, 35, 35], [32, 64, 3, 3], [2, 2], [0, 0, 0, 0],
                                                {"ic_bn": 64, "oc_bn": 32, "reg_n": 6}),
    "3x3 stride (1, 3)": ([1, 32, 8, 13], [16, 32, 3, 3], [1, 3], [1, 1, 1, 1],
                          {"ic_bn": 32, "oc_bn": 16, "reg_n": 5}),
    "7x7 stride 2 stem: 7 taps of 4 channels in one 28-byte chunk": (
        [1, 4, 20, 20], [32, 4, 7, 7], [2, 2], [3, 3, 3, 3], {"ic_bn": 4, "oc_bn": 32, "reg_n": 10}),
    "3x3 of 40-channel blocks: two 60-byte chunks per row": (
        [1, 80, 9, 9], [32, 80, 3, 3], [1, 1], [0, 0, 0, 0], {"ic_bn": 40, "oc_bn": 32, "reg_n": 7}),
    "1x7 of 16-channel blocks: two 56-byte chunks per row": (
        [1, 32, 5, 17], [16, 32, 1, 7], [1, 1], [0, 0, 3, 3], {"ic_bn": 16, "oc_bn": 16, "reg_n": 9}),
    "bands of output rows per parallel iteration, one tile configuration each": (
        [1, 64, 32, 32], [64, 64, 1, 1], [1, 1], [0, 0, 0, 0], {"ic_bn": 64, "oc_bn": 16, "reg_n": 16}),
    "24 output channels: 3 tiles of 8": ([1, 32, 6, 6], [24, 32, 3, 3], [1, 1], [1, 1, 1, 1],
                                         {"ic_bn": 32, "oc_bn": 24, "reg_n": 6}),
}


@pytest.mark.parametrize("out_dtype", ["uint8", "float32"])
@pytest.mark.parametrize("case", list(AMX_CASES))
def test_amx_kernel_is_bit_exact(case, out_dtype):
    """AMX tiles (tdpbusd) where this process may run them: the same integers as the reference."""
    if not x86.amx.usable(HOST):
        pytest.skip("the host has no AMX (or Linux did not grant its tile state)")
    data, kernel, strides, padding, knobs = AMX_CASES[case]
    wl = x86.conv2d_int8_workload(data, kernel, strides, padding, out_dtype=out_dtype)
    got, ref = _run(wl, {**knobs, "unroll_kw": False, "isa": "amx"}, relu=out_dtype == "uint8", seed=4)
    np.testing.assert_array_equal(got, ref)


def test_amx_kernel_compiles_to_tile_instructions():
    """Compiled for an AMX CPU on any host: tile loads, tdpbusd and stores, and the tile
    configuration once per parallel iteration (a band of rows), before the loops over its
    register tiles (``ldtilecfg`` costs several tdpbusd)."""
    spr = {"kind": "llvm", "mcpu": "sapphirerapids"}
    wl = x86.conv2d_int8_workload([1, 64, 32, 32], [64, 64, 1, 1])
    knobs = {"ic_bn": 64, "oc_bn": 16, "reg_n": 16, "unroll_kw": False, "isa": "amx"}
    func = x86.conv2d_int8_func(wl, knobs, spr)
    asm = tvm.compile(func, target=spr).mod.inspect_source("asm")
    assert all(op in asm for op in ("ldtilecfg", "tileloadd", "tdpbusd", "tilestored"))
    lines = [line.strip() for line in func.script().splitlines()]
    loads = [i for i, line in enumerate(lines) if "llvm.x86.ldtilecfg" in line]
    parallel = next(i for i, line in enumerate(lines) if "T.parallel" in line)
    tiles = next(i for i, line in enumerate(lines) if line.startswith("for oh_1, ow_0"))
    assert len(loads) == 1 and parallel < loads[0] < tiles
    tasks = int(re.search(r"T\.parallel\((\d+)\)", lines[parallel]).group(1))
    assert tasks >= min(4 * 32, 16 * x86.num_threads()) and (4 * 32) % tasks == 0


def test_amx_knobs_name_their_rules():
    wl = x86.conv2d_int8_workload([1, 64, 28, 28], [32, 64, 3, 3], padding=[1, 1, 1, 1])
    good = {"ic_bn": 64, "oc_bn": 32, "reg_n": 14, "unroll_kw": False, "isa": "amx"}
    x86.check_knobs(wl, good)
    x86.check_knobs(x86.conv2d_int8_workload([1, 64, 28, 28], [32, 64, 3, 3], [2, 2], [1, 1, 1, 1]), good)
    dilated = x86.conv2d_int8_workload([1, 64, 28, 28], [32, 64, 3, 3], [1, 1], [2, 2, 2, 2], [2, 2])
    for workload, knobs, message in [
            (dilated, good, r"'isa' = 'amx' needs an undilated conv .* dilation is \[2, 2\]"),
            (wl, {**good, "reg_n": 28}, "'reg_n' = 28 is 2 to 16 with isa amx"),
            (wl, {**good, "ic_bn": 32, "oc_bn": 4},
             "'oc_bn' = 4 is a multiple of 16 up to 96 or of 8 up to 48 with isa amx"),
            (wl, {**good, "oh_bn": 2}, "'oh_bn' = 2 is not an amx knob")]:
        with pytest.raises(KnobError, match=message):
            x86.check_knobs(workload, knobs)
    wide = x86.conv2d_int8_workload([1, 128, 28, 28], [32, 128, 1, 1])
    with pytest.raises(KnobError, match="'ic_bn' = 128 is at most 64 with isa amx"):
        x86.check_knobs(wide, {**good, "ic_bn": 128})
    dense = x86.dense_int8_workload([1, 64], [16, 64])
    only = r"'isa' = 'amx' runs \(group\) conv2d_int8 and \(group\) conv2d_bf16 only"
    with pytest.raises(KnobError, match=only):
        x86.check_knobs(dense, {"ic_bn": 64, "oc_bn": 16, "isa": "amx"})


def test_amx_candidates_only_where_usable_and_beside_the_general_instruction():
    wl = x86.conv2d_int8_workload([1, 64, 28, 28], [64, 64, 3, 3], padding=[1, 1, 1, 1])
    assert not any(k["isa"] == "amx" for k in x86.candidates(wl, ZNVER4))
    dilated = x86.conv2d_int8_workload([1, 64, 28, 28], [64, 64, 3, 3], [1, 1], [2, 2, 2, 2], [2, 2])
    assert not any(k["isa"] == "amx" for k in x86.candidates(dilated, HOST))
    strided = x86.conv2d_int8_workload([1, 64, 28, 28], [64, 64, 3, 3], [2, 2], [1, 1, 1, 1])
    for workload in (wl, strided):
        found = x86.candidates(workload, HOST, max_candidates=4)
        assert any(k["isa"] == "amx" for k in found) == x86.amx.usable(HOST)
    assert x86.default_knobs(wl, target=HOST)["isa"] != "amx"  # uniform configs stay general
    if x86.amx.usable(HOST):  # 17 columns (a prime): rows padded to 18 instead of no AMX tile
        prime = x86.conv2d_int8_workload([1, 64, 17, 17], [64, 64, 1, 7], padding=[0, 3, 0, 3])
        assert {k["reg_n"] for k in x86.candidates(prime, HOST) if k["isa"] == "amx"} == {9, 6}
        # the fewest tiles of a row first (12 rows over 35 columns: 3 instructions, not 5 of 7)
        wide = x86.conv2d_int8_workload([1, 64, 35, 35], [64, 64, 3, 3], padding=[1, 1, 1, 1])
        assert {k["reg_n"] for k in x86.candidates(wide, HOST) if k["isa"] == "amx"} == {12, 7}
    stem = x86.conv2d_int8_workload([1, 4, 32, 32], [32, 4, 7, 7], [2, 2], [3, 3, 3, 3])
    one_by_one = x86.conv2d_int8_workload([1, 4, 32, 32], [32, 4, 1, 1])
    # 7 taps of 4 channels fold into 28 bytes per tile row; a 1x1 conv's 4 bytes are too few
    assert any(k["isa"] == "amx" for k in x86.candidates(stem, HOST)) == x86.amx.usable(HOST)
    assert not any(k["isa"] == "amx" for k in x86.candidates(one_by_one, HOST))
    assert x86.amx.usable(HOST) == ("amx_int8" in open("/proc/cpuinfo").read().split()
                                    and x86.amx.request_permission())
