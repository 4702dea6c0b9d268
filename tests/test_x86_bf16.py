"""bfloat16 conv2d: conversions, the vdpbf16ps and AMX kernels against a float64 reference on the
bfloat16-rounded operands, knob rules, candidates where the target has the instruction only,
and a compiled model whose conv2d nodes run in bfloat16 against the float32 one."""

import json
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tvm
from onnx import helper, numpy_helper
from tvm import te

import graphtune
import graphtune.x86 as x86
from graphtune.config import Config, NodeConfig
from graphtune.errors import KnobError
from graphtune.numerics import accuracy
from graphtune.ops import PRECISION, Op, conv2d_workload, input_dtype, op_of, runs_as
from graphtune.pipeline import x86_candidates
from graphtune.x86 import bf16
from onnx_blocks import onnx_model

HOST = x86.host_target()
ZNVER4 = {"kind": "llvm", "mcpu": "znver4"}
SKYLAKE = {"kind": "llvm", "mcpu": "skylake-avx512"}  # AVX-512 without BF16


def _usable(isa: str) -> bool:
    if isa == "amxbf16":
        return x86.amx.usable(HOST, "bfloat16")
    return any(found.name == isa for found in x86.isas_of(HOST, "bfloat16"))


def _bf16_workload(data, kernel, strides=(1, 1), padding=(0, 0, 0, 0)) -> dict:
    return runs_as(Op.CONV2D, conv2d_workload(data, kernel, strides, padding), {PRECISION: "bfloat16"})[1]


def test_conversions_round_to_nearest_even_and_keep_nan():
    values = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.0e38, np.inf, -0.0, 1e-40, np.nan], "float32")
    bits = bf16.np_from_float32(values)
    back = bf16.np_to_float32(bits)
    np.testing.assert_array_equal(back[:4], [1.0, 1.0, 1.015625, -2.5])
    assert np.isinf(back[5]) and np.signbit(back[6]) and np.isnan(back[8])
    rng = np.random.default_rng(0)
    wide = (rng.standard_normal(4096) * 10.0 ** rng.integers(-20, 20, 4096)).astype("float32")
    wide[:3] = [np.nan, np.inf, -np.inf]
    x = te.placeholder((wide.size,), "float32")
    lib = tvm.compile(te.create_prim_func([x, bf16.convert(x)]).with_attr("global_symbol", "main"),
                      target=HOST)
    out = tvm.runtime.tensor(np.zeros(wide.size, "uint16"))
    lib["main"](tvm.runtime.tensor(wide), out)
    np.testing.assert_array_equal(out.numpy(), bf16.np_from_float32(wide))  # the TE rounding is NumPy's
    finite = np.isfinite(wide)
    assert np.all(np.abs(bf16.np_to_float32(out.numpy())[finite] - wide[finite])
                  <= np.abs(wide[finite]) * 2.0 ** -8)


def _reference(x: np.ndarray, w: np.ndarray, strides, padding) -> np.ndarray:
    """float64 conv of the bfloat16-rounded operands (NCHW, OIHW)."""
    x = bf16.np_to_float32(bf16.np_from_float32(x)).astype(np.float64)
    w = bf16.np_to_float32(bf16.np_from_float32(w)).astype(np.float64)
    top, left, bottom, right = padding
    x = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    (sh, sw), (o, _, kh, kw) = strides, w.shape
    oh, ow = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
    out = np.zeros((x.shape[0], o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", x[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw], w[:, :, i, j])
    return out


CASES = {  # name: (data, kernel, strides, padding, knobs without isa and unroll_kw)
    "3x3, padded, two tiles of channels": ([1, 32, 14, 14], [32, 32, 3, 3], [1, 1], [1, 1, 1, 1],
                                           {"ic_bn": 16, "oc_bn": 32, "reg_n": 7}),
    "1x1 stride 2, two input chunks": ([1, 64, 14, 14], [16, 64, 1, 1], [2, 2], [0, 0, 0, 0],
                                       {"ic_bn": 32, "oc_bn": 16, "reg_n": 7}),
    "3x3 stride 2, 7 columns in tiles of 4 (a padded width)": (
        [1, 32, 15, 15], [16, 32, 3, 3], [2, 2], [0, 0, 0, 0], {"ic_bn": 32, "oc_bn": 16, "reg_n": 4}),
    "7x7 stride 2 stem: 7 taps of 2 channels": ([1, 2, 20, 20], [32, 2, 7, 7], [2, 2], [3, 3, 3, 3],
                                                {"ic_bn": 2, "oc_bn": 32, "reg_n": 10}),
}


@pytest.mark.parametrize("isa", ["avx512bf16", "avx512bf16_256", "amxbf16"])
@pytest.mark.parametrize("case", list(CASES))
def test_kernel_matches_the_float64_conv_of_its_rounded_operands(case, isa):
    """float32 sums of exact bfloat16 products: within float32 rounding of the float64 sum."""
    if not _usable(isa):
        pytest.skip(f"the host cannot run {isa}")
    data, kernel, strides, padding, knobs = CASES[case]
    if isa == "amxbf16" and data[1] * kernel[3] < 8:
        pytest.skip("fewer than 16 bytes per tile row: no AMX candidate")
    wl = _bf16_workload(data, kernel, strides, padding)
    knobs = {**knobs, "isa": isa, "unroll_kw": isa != "amxbf16"}
    func = x86.kernel_func(wl, knobs, HOST)
    lib = tvm.compile(func, target=HOST)
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(data).astype("float32"), rng.standard_normal(kernel).astype("float32")
    ib = knobs["ic_bn"]
    n, c, h, width = data
    packed = bf16.np_from_float32(x).reshape(n, c // ib, ib, h, width).transpose(0, 1, 3, 4, 2)
    shapes = x86.kernel_shapes(wl, knobs)
    out = tvm.runtime.tensor(np.zeros(shapes[2], "float32"))
    lib["main"](tvm.runtime.tensor(np.ascontiguousarray(packed)),
                tvm.runtime.tensor(x86.pack_weight(w, wl, knobs)), out)
    got = out.numpy().transpose(0, 1, 4, 2, 3).reshape(n, kernel[0], *shapes[2][2:4])
    want = _reference(x, w, strides, padding)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


AMX_CASES = {  # name: (data, kernel, strides, padding, knobs without isa and unroll_kw)
    "flat 3x3 on 7x7: 63 flat pixels in 4 stacked tiles": (
        [1, 64, 7, 7], [16, 64, 3, 3], [1, 1], [1, 1, 1, 1],
        {"ic_bn": 32, "oc_bn": 16, "reg_n": 16, "flat": 1, "pixel_tiles": 4}),
    "flat 1x1 on 5x5: a padded tail": ([1, 32, 5, 5], [32, 32, 1, 1], [1, 1], [0, 0, 0, 0],
                                       {"ic_bn": 32, "oc_bn": 32, "reg_n": 8, "flat": 1}),
    "flat 3x3 padded unevenly, two tiles of channels": (
        [1, 32, 6, 9], [32, 32, 3, 3], [1, 1], [1, 0, 2, 1],
        {"ic_bn": 16, "oc_bn": 32, "reg_n": 12, "flat": 1, "pixel_tiles": 2}),
    "two stacked tiles of 7 along a row of 14": (
        [1, 32, 14, 14], [32, 32, 3, 3], [1, 1], [1, 1, 1, 1],
        {"ic_bn": 32, "oc_bn": 32, "reg_n": 7, "pixel_tiles": 2}),
    "24 output channels: 3 tiles of 8": ([1, 48, 6, 6], [24, 48, 1, 1], [1, 1], [0, 0, 0, 0],
                                         {"ic_bn": 16, "oc_bn": 24, "reg_n": 6}),
    "8 output channels, flat 3x3, stacked": ([1, 32, 5, 5], [8, 32, 3, 3], [1, 1], [1, 1, 1, 1],
                                             {"ic_bn": 32, "oc_bn": 8, "reg_n": 16, "flat": 1,
                                              "pixel_tiles": 2}),
    "stride 2: two stacked tiles of 4 along a row of 8": (
        [1, 32, 16, 16], [16, 32, 3, 3], [2, 2], [1, 1, 1, 1],
        {"ic_bn": 32, "oc_bn": 16, "reg_n": 4, "pixel_tiles": 2}),
}


@pytest.mark.parametrize("case", list(AMX_CASES))
def test_amx_flat_and_stacked_tiles_match_the_float64_conv_of_their_rounded_operands(case):
    """The AMX kernel over the map flattened at its padded width (``flat``: a tile's rows span
    map rows, the padding columns computed and dropped) and with stacked input tiles
    (``pixel_tiles``), through a fused epilogue (bias and ReLU) as a compiled model runs it."""
    if not _usable("amxbf16"):
        pytest.skip("the host cannot run amxbf16")
    data, kernel, strides, padding, knobs = AMX_CASES[case]
    wl = _bf16_workload(data, kernel, strides, padding)
    knobs = {**knobs, "isa": "amxbf16", "unroll_kw": False}
    shapes = x86.kernel_shapes(wl, knobs)
    x_in = te.placeholder(shapes[0], "uint16", name="data")
    w_in = te.placeholder(shapes[1], "uint16", name="kernel")
    b_in = te.placeholder([1, shapes[2][1], 1, 1, shapes[2][4]], "float32", name="bias")
    conv = x86.conv2d_bf16(x_in, w_in, wl, knobs)
    out = te.compute(conv.shape, lambda n, c, y, x, b: te.max(conv[n, c, y, x, b] + b_in[0, c, 0, 0, b], 0.0),
                     name="bias_relu")
    func = te.create_prim_func([x_in, w_in, b_in, out]).with_attr("global_symbol", "main")
    lib = tvm.compile(x86.schedule_fused(func, wl, knobs, HOST), target=HOST)
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal(data).astype("float32"), rng.standard_normal(kernel).astype("float32")
    bias = rng.standard_normal(kernel[0]).astype("float32")
    ib, ob = knobs["ic_bn"], knobs["oc_bn"]
    n, c, h, width = data
    packed = bf16.np_from_float32(x).reshape(n, c // ib, ib, h, width).transpose(0, 1, 3, 4, 2)
    result = tvm.runtime.tensor(np.zeros(shapes[2], "float32"))
    lib["main"](tvm.runtime.tensor(np.ascontiguousarray(packed)),
                tvm.runtime.tensor(x86.pack_weight(w, wl, knobs)),
                tvm.runtime.tensor(bias.reshape(1, kernel[0] // ob, 1, 1, ob)), result)
    got = result.numpy().transpose(0, 1, 4, 2, 3).reshape(n, kernel[0], *shapes[2][2:4])
    want = np.maximum(_reference(x, w, strides, padding) + bias[None, :, None, None], 0.0)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_amx_tiles_stack_along_rows_that_hold_several_else_over_the_flattened_map():
    from graphtune.x86.int8_tiles import _stacked_tiles

    tile = {"ic_bn": 32, "oc_bn": 16, "reg_n": 14, "unroll_kw": False, "isa": "amxbf16"}
    map28 = _bf16_workload([1, 128, 28, 28], [128, 128, 3, 3], padding=[1, 1, 1, 1])
    assert _stacked_tiles(map28, tile, 28) == [{**tile, "pixel_tiles": 2}]  # 4 x 14 would pad 28 more
    assert _stacked_tiles(map28, {**tile, "oc_bn": 32}, 28) == [{**tile, "oc_bn": 32, "pixel_tiles": 2}]
    assert _stacked_tiles(map28, {**tile, "oc_bn": 64}, 28) == []  # 4 accumulators already
    map14 = _bf16_workload([1, 128, 14, 14], [128, 128, 3, 3], padding=[1, 1, 1, 1])
    assert _stacked_tiles(map14, tile, 14) == [{**tile, "reg_n": 16, "flat": 1, "pixel_tiles": 4}]
    for other in (_bf16_workload([1, 128, 14, 14], [128, 128, 1, 1]),  # one tap
                  _bf16_workload([1, 128, 56, 56], [128, 128, 3, 3], [2, 2], [1, 1, 1, 1])):  # stride 2
        assert _stacked_tiles(other, tile, 14) == []
    for knobs in (_stacked_tiles(map28, tile, 28) + _stacked_tiles(map14, tile, 14)):
        x86.check_knobs(map28 if "flat" not in knobs else map14, knobs)


def test_kernels_compile_to_their_instructions_on_any_host():
    spr = {"kind": "llvm", "mcpu": "sapphirerapids"}
    wl = _bf16_workload([1, 32, 14, 14], [32, 32, 3, 3], padding=[1, 1, 1, 1])
    for isa, ops in (("avx512bf16", [r"vdpbf16ps\t.*%zmm"]), ("avx512bf16_256", [r"vdpbf16ps\t.*%ymm"]),
                     ("amxbf16", ["ldtilecfg", "tdpbf16ps", "tilestored"])):
        knobs = {"ic_bn": 16, "oc_bn": 32, "reg_n": 14, "unroll_kw": False, "isa": isa}
        asm = tvm.compile(x86.kernel_func(wl, knobs, spr), target=spr).mod.inspect_source("asm")
        assert all(re.search(op, asm) for op in ops), isa
    stacked = {"ic_bn": 16, "oc_bn": 16, "reg_n": 16, "unroll_kw": False, "isa": "amxbf16", "flat": 1,
               "pixel_tiles": 4}
    asm = tvm.compile(x86.kernel_func(wl, stacked, spr), target=spr).mod.inspect_source("asm")
    assert len(re.findall("tdpbf16ps", asm)) >= 4 and "ldtilecfg" in asm  # 4 input tiles per slice


def test_blocks_of_8_lane_vectors_run_ymm_vdpbf16ps():
    """A 1000-class head (8 x 125 channels) and 40-channel blocks: whole ymm vectors, no whole zmm
    one, so the candidates run vdpbf16ps on ymm (``avx512bf16_256``), not plain float32 vectors."""
    _, wl, _ = runs_as(Op.DENSE, {"data": [1, 64], "weight": [1000, 64], "dtype": "float32"},
                        {PRECISION: "bfloat16"})
    found = x86.candidates(wl, ZNVER4, max_candidates=4)
    assert found and {k["isa"] for k in found if k["oc_bn"] % 16} == {"avx512bf16_256"}
    conv = _bf16_workload([1, 32, 8, 8], [40, 32, 1, 1])
    knobs = next(k for k in x86.candidates(conv, ZNVER4, max_candidates=4) if k["oc_bn"] == 40)
    assert knobs["isa"] == "avx512bf16_256"
    asm = tvm.compile(x86.kernel_func(conv, knobs, ZNVER4), target=ZNVER4).mod.inspect_source("asm")
    assert re.search(r"vdpbf16ps\t.*%ymm", asm) and not re.search(r"vdpbf16ps\t.*%zmm", asm)


def test_workloads_and_precision_knob():
    fp32 = conv2d_workload([1, 16, 8, 8], [16, 16, 3, 3])
    op, low, knobs = runs_as(Op.CONV2D, fp32, {PRECISION: "bfloat16", "ic_bn": 16})
    assert (op, low["dtype"], knobs) == (Op.CONV2D_BF16, "bfloat16", {"ic_bn": 16})
    assert op_of(low) is Op.CONV2D_BF16
    assert input_dtype(Op.CONV2D, {PRECISION: "bfloat16"}) == "float32"  # converted where it is read
    with pytest.raises(KnobError, match="a conv2d runs in float32 without the knob"):
        runs_as(Op.CONV2D, fp32, {PRECISION: "float32"})
    depthwise = conv2d_workload([1, 16, 8, 8], [16, 1, 3, 3], groups=16)
    op, low, _ = runs_as(Op.DEPTHWISE_CONV2D, depthwise, {PRECISION: "bfloat16"})
    assert op is Op.DEPTHWISE_CONV2D_BF16 and op_of(low) is Op.DEPTHWISE_CONV2D_BF16
    grouped = conv2d_workload([1, 16, 8, 8], [16, 4, 3, 3], groups=4)
    op, low, _ = runs_as(Op.GROUP_CONV2D, grouped, {PRECISION: "bfloat16"})
    assert op is Op.GROUP_CONV2D_BF16 and op_of(low) is Op.GROUP_CONV2D_BF16
    transposed = {**fp32, "output_padding": [0, 0], "kernel": [16, 16, 3, 3]}
    with pytest.raises(KnobError, match="only quantized ops .*, float convs and dense choose"):
        runs_as(Op.CONV2D_TRANSPOSE, transposed, {PRECISION: "bfloat16"})


@pytest.mark.parametrize("groups, knobs", [(4, {"ic_bn": 8, "oc_bn": 16, "reg_n": 7}),
                                           (16, {"ic_bn": 16, "oc_bn": 16, "reg_n": 7})],
                         ids=["blocks inside a group", "a block spans four groups"])
def test_group_conv_matches_the_float64_conv_of_its_rounded_operands(groups, knobs):
    """The bfloat16 group conv reduces each output block over its groups' inputs only: the float64
    conv of the rounded operands with block-diagonal weights (zeros between the groups)."""
    if not _usable("avx512bf16"):
        pytest.skip("the host has no AVX512-BF16")
    data, kernel, padding = [1, 64, 14, 14], [64, 64 // groups, 3, 3], [1, 1, 1, 1]
    op, low, _ = runs_as(Op.GROUP_CONV2D, conv2d_workload(data, kernel, padding=padding, groups=groups),
                         {PRECISION: "bfloat16"})
    knobs = {**knobs, "unroll_kw": True, "isa": "avx512bf16"}
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal(data).astype("float32"), rng.standard_normal(kernel).astype("float32")
    full = np.zeros((64, 64, 3, 3), "float32")  # the group conv as a dense one: zeros between groups
    width = 64 // groups
    for g in range(groups):
        full[g * width:(g + 1) * width, g * width:(g + 1) * width] = w[g * width:(g + 1) * width]
    lib = tvm.compile(x86.kernel_func(low, knobs, HOST, op=op), target=HOST)
    out = tvm.runtime.tensor(np.zeros(x86.spec_of(op).shapes(low, knobs)[2], "float32"))
    packed = bf16.np_from_float32(x86.pack_data(x, knobs["ic_bn"]))
    lib["main"](tvm.runtime.tensor(packed), tvm.runtime.tensor(x86.pack_weight(w, low, knobs, op)), out)
    want = _reference(x, full, (1, 1), padding)
    assert np.abs(x86.unpack_data(out.numpy()) - want).max() <= 1e-5 * np.abs(want).max()


@pytest.mark.parametrize("strides, padding", [((1, 1), (1, 1, 1, 1)), ((2, 2), (0, 0, 1, 1))])
def test_depthwise_matches_the_float64_conv_of_its_rounded_operands(strides, padding):
    """The bfloat16 depthwise conv widens its bits exactly and sums in float32: the float64 conv
    of the rounded data and weights, within float32 summation (padded, strided)."""
    wl = conv2d_workload([1, 32, 9, 9], [32, 1, 3, 3], strides, padding, groups=32)
    op, low, knobs = runs_as(Op.DEPTHWISE_CONV2D, wl, {PRECISION: "bfloat16", "bn": 16, "reg_n": 2})
    rng = np.random.default_rng(4)
    x, w = (rng.standard_normal(wl[key]).astype("float32") for key in ("data", "kernel"))
    xr, wr = (bf16.np_to_float32(bf16.np_from_float32(v)).astype(np.float64) for v in (x, w))
    top, left, bottom, right = padding
    xp = np.pad(xr, [(0, 0), (0, 0), (top, bottom), (left, right)])
    oh, ow = x86.spec_of(op).shapes(low, knobs)[2][2:4]
    want = sum(xp[:, :, i:i + strides[0] * oh:strides[0], j:j + strides[1] * ow:strides[1]]
               * wr[None, :, 0, i, j, None, None] for i in range(3) for j in range(3))
    lib = tvm.compile(x86.kernel_func(low, knobs, HOST, op=op), target=HOST)
    out = tvm.runtime.tensor(np.zeros(x86.spec_of(op).shapes(low, knobs)[2], "float32"))
    data = bf16.np_from_float32(x86.pack_data(x, 16))
    lib["main"](tvm.runtime.tensor(data), tvm.runtime.tensor(x86.pack_weight(w, low, knobs, op)), out)
    np.testing.assert_allclose(x86.unpack_data(out.numpy()), want, rtol=1e-5, atol=1e-5)


def test_dense_matches_the_float64_product_of_its_rounded_operands():
    """A batch-1 dense (a classifier) as the bfloat16 conv of a 1x1 map, on every bfloat16
    instruction the host has that runs it."""
    isas = [isa.name for isa in x86.isas_of(HOST, "bfloat16") if isa.general]
    if not isas:
        pytest.skip("the host has no AVX512-BF16")
    op, wl, _ = runs_as(Op.DENSE, {"data": [1, 96], "weight": [40, 96], "dtype": "float32"},
                        {PRECISION: "bfloat16"})
    assert op is Op.DENSE_BF16 and op_of(wl) is Op.DENSE_BF16
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((1, 96)).astype("float32"), rng.standard_normal((40, 96)).astype("float32")
    want = bf16.np_to_float32(bf16.np_from_float32(x)).astype(np.float64) @ \
        bf16.np_to_float32(bf16.np_from_float32(w)).astype(np.float64).T
    for isa in isas:
        knobs = {"ic_bn": 32, "oc_bn": 8, "isa": isa}
        lib = tvm.compile(x86.kernel_func(wl, knobs, HOST), target=HOST)
        out = tvm.runtime.tensor(np.zeros((1, 40), "float32"))
        kernel = tvm.runtime.tensor(x86.pack_weight(w, wl, knobs))
        lib["main"](tvm.runtime.tensor(bf16.np_from_float32(x)), kernel, out)
        assert np.abs(out.numpy() - want).max() <= 1e-5 * np.abs(want).max()
    batched = {"data": [4, 96], "weight": [40, 96], "dtype": "float32"}  # no bfloat16 kernel: rows of 1 only
    assert not any(PRECISION in c.knobs for c in x86_candidates(ZNVER4, 4, "bfloat16")(batched, Op.DENSE))
    assert any(PRECISION in c.knobs for c in x86_candidates(ZNVER4, 4, "bfloat16")(
        {**batched, "data": [1, 96]}, Op.DENSE))


def test_knobs_name_their_rules():
    wl = _bf16_workload([1, 64, 14, 14], [32, 64, 3, 3], padding=[1, 1, 1, 1])
    good = {"ic_bn": 32, "oc_bn": 32, "reg_n": 14, "unroll_kw": False, "isa": "amxbf16"}
    x86.check_knobs(wl, good)
    strided = _bf16_workload([1, 64, 14, 14], [32, 64, 3, 3], strides=[2, 2], padding=[1, 1, 1, 1])
    with pytest.raises(KnobError, match="'flat' = 1 needs stride 1"):
        x86.check_knobs(strided, {**good, "reg_n": 7, "flat": 1})
    for knobs, message in [
            ({**good, "isa": "avx512vnni"}, "'isa' = 'avx512vnni' names the bfloat16 dot-product"),
            ({**good, "ic_bn": 64}, "'ic_bn' = 64 is at most 32 with isa amxbf16"),
            ({**good, "isa": "avx512bf16", "ic_bn": 1}, "'ic_bn' = 1 must be a multiple of 2"),
            ({**good, "widen": True}, "unknown \\['widen'\\]"),
            ({**good, "isa": "avx512bf16", "flat": 1}, "'flat' = 1 is an AMX knob"),
            ({**good, "flat": True}, "'flat' = True is 1 with AMX"),
            ({**good, "pixel_tiles": 4}, "'pixel_tiles' = 4 is 1 to 3 with oc_bn = 32")]:
        with pytest.raises(KnobError, match=message):
            x86.check_knobs(wl, knobs)


def test_candidates_only_where_the_target_multiplies_bfloat16():
    wl = conv2d_workload([1, 64, 28, 28], [64, 64, 3, 3], padding=[1, 1, 1, 1])
    for target, has in ((SKYLAKE, False), (ZNVER4, True)):
        found = x86_candidates(target, 4, "bfloat16")(wl, Op.CONV2D)
        low = [c for c in found if c.knobs.get(PRECISION) == "bfloat16"]
        assert bool(low) == has and len(found) - len(low) == 4
        assert all(c.knobs["isa"] == "avx512bf16" for c in low)  # Zen 4 has no AMX
    assert not any(PRECISION in c.knobs for c in x86_candidates(ZNVER4, 4)(wl, Op.CONV2D))  # off by default
    depthwise = conv2d_workload([1, 64, 28, 28], [64, 1, 3, 3], padding=[1, 1, 1, 1], groups=64)
    for target, has in ((SKYLAKE, False), (ZNVER4, True)):
        low = [c for c in x86_candidates(target, 4, "bfloat16")(depthwise, Op.DEPTHWISE_CONV2D)
               if c.knobs.get(PRECISION) == "bfloat16"]
        assert bool(low) == has and all(c.in_layout == c.out_layout != "NCHW" for c in low)
    grouped = conv2d_workload([1, 64, 28, 28], [64, 8, 3, 3], padding=[1, 1, 1, 1], groups=8)
    for target, has in ((SKYLAKE, False), (ZNVER4, True)):
        low = [c for c in x86_candidates(target, 4, "bfloat16")(grouped, Op.GROUP_CONV2D)
               if c.knobs.get(PRECISION) == "bfloat16"]
        assert bool(low) == has and all(c.knobs["ic_bn"] % 2 == 0 for c in low)
    # 3 channels: a zero fourth pairs them, the candidate reads plain NCHW and pads it itself
    stem = conv2d_workload([1, 3, 32, 32], [16, 3, 7, 7], [2, 2], [3, 3, 3, 3])
    low = [c for c in x86_candidates(ZNVER4, 4, "bfloat16")(stem, Op.CONV2D) if PRECISION in c.knobs]
    assert low and {(c.in_layout, c.knobs["ic_bn"] % 2) for c in low} == {("NCHW", 0)}
    with pytest.raises(graphtune.errors.ArgumentError, match="precision"):
        x86_candidates(ZNVER4, 4, "int4")


BOUND = 0.05
"""Largest |bfloat16 model - float32 ONNX Runtime| over the largest |output| the zoo may show."""


def _bfloat16_config(model: onnx.ModelProto) -> tuple[Config, int]:
    """The uniform config with every conv2d (depthwise, group) and dense that has a bfloat16
    candidate on its first one (the candidates ``x86_candidates(..., "bfloat16")`` gives)."""
    config, lowered = Config.uniform(model), 0
    offer = x86_candidates(HOST, 1, "bfloat16")
    for name, node in list(config.nodes.items()):
        if node.op not in (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.GROUP_CONV2D, Op.DENSE):
            continue
        found = [c.knobs for c in offer(node.workload, node.op) if c.knobs.get(PRECISION) == "bfloat16"]
        if not found:  # odd input channels: no bfloat16 pairs
            continue
        knobs = found[0]
        in_layout, out_layout = x86.layouts_of(node.workload, knobs, op=node.op)
        config.nodes[name] = NodeConfig(node.op, node.workload, in_layout, out_layout, knobs)
        lowered += 1
    return config, lowered


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n == "resnet18" else [pytest.mark.slow])
                                  for n in graphtune.models.names()])
def test_zoo_model_in_bfloat16_stays_within_the_bound_of_float32(name):
    """Every conv2d (depthwise, group) and dense that has a bfloat16 candidate runs it: the
    outputs on seeded inputs within :data:`BOUND` of ONNX Runtime float32's, the same top-1 for
    classifiers, never identical."""
    if not x86.isas_of(HOST, "bfloat16"):
        pytest.skip("the host has no AVX512-BF16")
    model = graphtune.models.get(name, image_size=32 if name == "resnet18" else None)
    config, lowered = _bfloat16_config(model)
    assert lowered
    compiled = graphtune.compile(model, config)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    result = accuracy(lambda a: compiled(*a), lambda a: session.run(None, dict(zip(names, a))),
                      [compiled.random_inputs(seed) for seed in range(2)], "onnxruntime float32")
    assert 0 < result.max_rel_diff <= BOUND
    assert result.top1_agree in (None, result.inputs)


def _two_convs(size: int, mid: int, residual: bool, seed: int) -> onnx.ModelProto:
    """input [1, 32, size, size] -> 3x3 conv (``mid`` channels, bias) -> ReLU = r1 -> 1x1 conv (32);
    with ``residual``, the output is that conv's plus r1 (``mid`` 32)."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.uniform(-0.2, 0.2, shape).astype(np.float32), name)
             for name, shape in (("c1.w", [mid, 32, 3, 3]), ("c1.b", [mid]), ("c2.w", [32, mid, 1, 1]))]
    nodes = [helper.make_node("Conv", ["input", "c1.w", "c1.b"], ["x1"], name="c1", pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3]),
             helper.make_node("Relu", ["x1"], ["r1"], name="relu"),
             helper.make_node("Conv", ["r1", "c2.w"], ["y" if residual else "output"], name="c2",
                              kernel_shape=[1, 1])]
    if residual:
        nodes.append(helper.make_node("Add", ["y", "r1"], ["output"], name="add"))
    shape = [1, 32, size, size]
    return onnx_model(nodes, inits, "residual" if residual else "chain", shape, output_shape=shape)


def _inverted_residual(size: int, seed: int) -> onnx.ModelProto:
    """input [1, 32, size, size] -> 1x1 conv (64, bias) -> ReLU = r1 -> depthwise 3x3 (bias) -> ReLU
    = r2 -> 1x1 conv (32): MobileNetV2's block without its residual add."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.uniform(-0.3, 0.3, shape).astype(np.float32), name)
             for name, shape in (("c1.w", [64, 32, 1, 1]), ("c1.b", [64]), ("dw.w", [64, 1, 3, 3]),
                                 ("dw.b", [64]), ("c2.w", [32, 64, 1, 1]))]
    nodes = [helper.make_node("Conv", ["input", "c1.w", "c1.b"], ["x1"], name="c1", kernel_shape=[1, 1]),
             helper.make_node("Relu", ["x1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "dw.w", "dw.b"], ["x2"], name="dw", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], group=64),
             helper.make_node("Relu", ["x2"], ["r2"], name="relu2"),
             helper.make_node("Conv", ["r2", "c2.w"], ["output"], name="c2", kernel_shape=[1, 1])]
    shape = [1, 32, size, size]
    return onnx_model(nodes, inits, "inverted_residual", shape, output_shape=shape)


def test_a_bfloat16_depthwise_conv_lets_its_block_keep_every_tensor_in_bfloat16():
    """An inverted residual block with every node in bfloat16: the expansion's and the depthwise
    conv's outputs are rounded in the functions writing them (no rounding call of their own), and
    the output is the float64 reference's on the rounded tensors."""
    if not x86.isas_of(HOST, "bfloat16"):
        pytest.skip("the host has no AVX512-BF16")
    model = _inverted_residual(8, 11)
    config = Config.uniform(model)
    offer = x86_candidates(HOST, 8, "bfloat16")
    for name in ("c1", "dw", "c2"):
        node = config.nodes[name]
        knobs = next(c.knobs for c in offer(node.workload, node.op) if c.knobs.get(PRECISION) == "bfloat16"
                     and c.in_layout == c.out_layout == "NCHW16c")
        config.nodes[name] = NodeConfig(node.op, node.workload, "NCHW16c", "NCHW16c", knobs)
    assert config.nodes["dw"].op == "depthwise_conv2d"
    compiled = graphtune.compile(model, config)
    standalone = [f for f in compiled.functions if f.startswith("bfloat16_rounding")]
    assert len(standalone) <= 1  # the model input's, read by c1 only

    weights = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    rounded = {k: bf16.np_to_float32(bf16.np_from_float32(v)) for k, v in weights.items() if k.endswith(".w")}

    def to_bits(v: np.ndarray) -> np.ndarray:
        return bf16.np_to_float32(bf16.np_from_float32(v.astype(np.float32)))

    def block(data: np.ndarray, rounding) -> np.ndarray:
        r1 = np.maximum(_conv64(rounding(data), rounded["c1.w"], 0) + weights["c1.b"].reshape(1, -1, 1, 1), 0)
        padded = np.pad(rounding(r1).astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
        dw = rounded["dw.w"].astype(np.float64)
        x2 = sum(padded[:, :, i:i + 8, j:j + 8] * dw[None, :, 0, i, j, None, None]
                 for i in range(3) for j in range(3))
        r2 = np.maximum(x2 + weights["dw.b"].reshape(1, -1, 1, 1), 0)
        return _conv64(rounding(r2), rounded["c2.w"], 0)

    data = np.random.default_rng(3).standard_normal((1, 32, 8, 8)).astype(np.float32)
    stored, unrounded = block(data, to_bits), block(data, lambda v: v)
    got = compiled(data)
    assert np.abs(got - stored).mean() < 0.05 * np.abs(stored - unrounded).mean()


def test_tune_measures_both_precisions_and_reports_accuracy(tmp_path):
    """Both precisions measured per node (records key conv2d and conv2d_bf16); where the config
    runs bfloat16, the result reports its outputs against ONNX Runtime float32."""
    if not x86.isas_of(HOST, "bfloat16"):
        pytest.skip("the host has no AVX512-BF16")
    model, records = _two_convs(14, 64, False, 5), tmp_path / "chain.records.jsonl"
    result = graphtune.tune(model, records=records, max_candidates=2, min_repeat_ms=1, repeat=1,
                            progress=False, final_check=False, feedback_rounds=0, precision="bf16")
    kinds = {json.loads(line)["kind"] for line in records.read_text().splitlines()}
    assert {"conv2d", "conv2d_bf16"} <= kinds
    lowered = [name for name, node in result.config.nodes.items() if node.knobs.get(PRECISION) == "bfloat16"]
    if not lowered:  # the tuner measured float32 faster everywhere: nothing to report
        assert result.accuracy is None
        return
    accuracy = result.accuracy
    assert accuracy is not None and accuracy.inputs == 4 and accuracy.top1_agree is None  # no classifier
    assert 0 < accuracy.max_rel_diff <= 0.05
    assert f"bfloat16: {len(lowered)} of 2 conv2d / depthwise / dense nodes" in result.summary()
    compiled = graphtune.compile(model, result.config)
    x = np.random.default_rng(1).standard_normal((1, 32, 14, 14)).astype("float32")
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"input": x})[0]
    assert 0 < np.abs(compiled(x) - want).max() <= 0.05 * np.abs(want).max()


def _conv64(data: np.ndarray, weight: np.ndarray, pad: int) -> np.ndarray:
    """float64 NCHW conv, stride 1."""
    data = np.pad(data.astype(np.float64), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    kh, kw = weight.shape[2:]
    h, w = data.shape[2] - kh + 1, data.shape[3] - kw + 1
    return sum(np.einsum("nchw,oc->nohw", data[:, :, y:y + h, x:x + w], weight[:, :, y, x].astype(np.float64))
               for y in range(kh) for x in range(kw))


def test_a_tensor_a_bfloat16_node_reads_is_stored_in_bfloat16_for_its_elementwise_readers():
    """x (r1) feeds a bfloat16 conv and the residual add: its producer writes it once, rounded, and the
    add reads those bits widened (no rounding call of its own); the output is the add of the
    rounded x, as a float64 reference computes it."""
    if not x86.isas_of(HOST, "bfloat16"):
        pytest.skip("the host has no AVX512-BF16")
    model = _two_convs(8, 32, True, 7)
    config = Config.uniform(model)
    offer = x86_candidates(HOST, 8, "bfloat16")
    for name in ("c1", "c2"):
        node = config.nodes[name]
        knobs = next(c.knobs for c in offer(node.workload, node.op)
                     if c.knobs.get(PRECISION) == "bfloat16" and c.knobs["ic_bn"] == c.knobs["oc_bn"] == 16)
        config.nodes[name] = NodeConfig(node.op, node.workload, "NCHW16c", "NCHW16c", knobs)
    compiled = graphtune.compile(model, config)
    assert [f for f in compiled.functions if "widening" in f and "add" in f]
    standalone = [f for f in compiled.functions if f.startswith("bfloat16_rounding")]
    assert len(standalone) <= 1  # the model input's, read by conv a only

    weights = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    rounded = {k: bf16.np_to_float32(bf16.np_from_float32(v)) for k, v in weights.items() if k.endswith(".w")}
    data = np.random.default_rng(3).standard_normal((1, 32, 8, 8)).astype(np.float32)
    x = np.maximum(_conv64(bf16.np_to_float32(bf16.np_from_float32(data)), rounded["c1.w"], 1)
                   + weights["c1.b"].reshape(1, -1, 1, 1), 0).astype(np.float32)
    x_bits = bf16.np_to_float32(bf16.np_from_float32(x))
    y = _conv64(x_bits, rounded["c2.w"], 0)
    stored, exact = y + x_bits, y + x
    got = compiled(data)
    assert np.abs(got - stored).mean() < 0.05 * np.abs(stored - exact).mean()
