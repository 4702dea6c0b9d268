"""graphtune.x86.schedule_fused on PrimFuncs with epilogues (TE-built and Relax FuseOps/FuseTIR-built)."""

import numpy as np
import pytest
import tvm
from tvm import relax, te

import graphtune.x86 as x86
from graphtune.errors import KnobError
from x86_reference import TARGET, conv2d_reference, random, run

pytestmark = pytest.mark.unit

CONV = x86.conv2d_workload([1, 16, 8, 7], [32, 16, 3, 3], padding=[1, 1, 1, 1])
CONV_KNOBS = [
    {"ic_bn": 8, "oc_bn": 16, "reg_n": 3, "unroll_kw": True},
    {"ic_bn": 16, "oc_bn": 32, "reg_n": 7, "unroll_kw": False},
    {"ic_bn": 1, "oc_bn": 1, "reg_n": 7, "unroll_kw": True, "oc_tile": 4, "oh_bn": 2},
]


def conv_inputs(knobs: dict, rng) -> tuple:
    x, w = random(CONV["data"], rng), random(CONV["kernel"], rng)
    bias, residual = random([32], rng), random([1, 32, 8, 7], rng)
    ref = conv2d_reference(x, w, CONV["strides"], CONV["padding"], CONV["dilation"])
    ref = np.maximum(ref + bias[None, :, None, None], 0.0) + residual
    ib, ob = knobs["ic_bn"], knobs["oc_bn"]
    packed = [
        x86.pack_data(x, ib),
        x86.pack_conv_kernel(w, ib, ob),
        x86.pack_data(bias.reshape(1, 32, 1, 1), ob),
        x86.pack_data(residual, ob),
    ]
    return packed, ref


def te_conv_bias_relu_add(knobs: dict) -> tvm.tirx.PrimFunc:
    d, k, o = x86.conv2d_nchwc_shapes(CONV, knobs)
    data, kernel = te.placeholder(d, name="data"), te.placeholder(k, name="kernel")
    bias = te.placeholder([1, o[1], 1, 1, o[4]], name="bias")
    residual = te.placeholder(o, name="residual")
    conv = x86.conv2d_nchwc(data, kernel, CONV, knobs)
    biased = te.compute(o, lambda n, c, h, w, b: conv[n, c, h, w, b] + bias[0, c, 0, 0, b], name="T_add")
    relu = te.compute(o, lambda *i: te.max(biased(*i), 0.0), name="T_relu")
    out = te.compute(o, lambda *i: relu(*i) + residual(*i), name="T_add_residual")
    return te.create_prim_func([data, kernel, bias, residual, out]).with_attr("global_symbol", "main")


@pytest.mark.parametrize("knobs", CONV_KNOBS, ids=["8c-16c-reg3", "16c-32c-reg7", "plain-width-oc4-rows2"])
def test_te_fused_conv_bias_relu_residual(knobs):
    func = x86.schedule_fused(te_conv_bias_relu_add(knobs), CONV, knobs)
    script = func.script()
    # one parallel loop nest: padding and every epilogue block folded into the conv tile
    assert script.count("T.parallel") == 1
    assert 'sblock("T_add")' not in script and 'sblock("T_relu")' not in script
    assert 'sblock("data_pad")' not in script
    inputs, ref = conv_inputs(knobs, np.random.default_rng(1))
    out = run(func, inputs, x86.kernel_shapes(CONV, knobs)[2])
    np.testing.assert_allclose(x86.unpack_data(out), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shift, folded", [(0, True), (1, False)], ids=["corner", "shifted"])
def test_epilogue_over_fewer_columns_folds_only_when_read_in_place(shift, folded):
    """A relu writing the first 6 of the conv's 7 columns reads each element where it lies: it
    folds into the register tile (an int8 conv over a padded width ends so). Reading the next
    column instead it is no epilogue: the conv is written out first, and both stay correct."""
    knobs = CONV_KNOBS[1]
    d, k, o = x86.conv2d_nchwc_shapes(CONV, knobs)
    data, kernel = te.placeholder(d, name="data"), te.placeholder(k, name="kernel")
    conv = x86.conv2d_nchwc(data, kernel, CONV, knobs)
    out_shape = [*o[:3], 6, o[4]]
    relu = te.compute(out_shape, lambda n, c, h, w, b: te.max(conv[n, c, h, w + shift, b], 0.0),
                      name="T_relu")
    func = te.create_prim_func([data, kernel, relu]).with_attr("global_symbol", "main")
    func = x86.schedule_fused(func, CONV, knobs)
    assert (func.script().count("T.parallel") == 1) == folded
    rng = np.random.default_rng(3)
    x, w = random(CONV["data"], rng), random(CONV["kernel"], rng)
    ref = conv2d_reference(x, w, CONV["strides"], CONV["padding"], CONV["dilation"])[..., shift:shift + 6]
    lib = tvm.compile(tvm.IRModule({"main": func}), target=TARGET)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(a, dev) for a in (x86.pack_data(x, 16), x86.pack_conv_kernel(w, 16, 32))]
    out = tvm.runtime.tensor(np.full(out_shape, np.nan, "float32"), dev)
    lib["main"](*args, out)
    np.testing.assert_allclose(x86.unpack_data(out.numpy()), np.maximum(ref, 0), rtol=1e-4, atol=1e-4)


def test_second_output_falls_back_to_a_correct_schedule():
    knobs = CONV_KNOBS[0]
    d, k, o = x86.conv2d_nchwc_shapes(CONV, knobs)
    data, kernel = te.placeholder(d, name="data"), te.placeholder(k, name="kernel")
    conv = x86.conv2d_nchwc(data, kernel, CONV, knobs)
    relu = te.compute(o, lambda *i: te.max(conv(*i), 0.0), name="T_relu")
    func = te.create_prim_func([data, kernel, conv, relu]).with_attr("global_symbol", "main")
    func = x86.schedule_fused(func, CONV, knobs)
    rng = np.random.default_rng(2)
    x, w = random(CONV["data"], rng), random(CONV["kernel"], rng)
    ref = conv2d_reference(x, w, CONV["strides"], CONV["padding"], CONV["dilation"])
    lib = tvm.compile(tvm.IRModule({"main": func}), target=TARGET)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(a, dev) for a in (x86.pack_data(x, 8), x86.pack_conv_kernel(w, 8, 16))]
    outs = [tvm.runtime.tensor(np.full(o, np.nan, "float32"), dev) for _ in range(2)]
    lib["main"](*args, *outs)
    np.testing.assert_allclose(x86.unpack_data(outs[0].numpy()), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(x86.unpack_data(outs[1].numpy()), np.maximum(ref, 0), rtol=1e-4, atol=1e-4)


FLAT_PIXELS = [
    ({"ic_bn": 1, "oc_bn": 1, "reg_n": 12, "flat": 4, "unroll_kw": False, "oc_tile": 5}, "T.vectorized(4)"),
    ({"ic_bn": 2, "oc_bn": 5, "reg_n": 5, "flat": 1, "unroll_kw": False}, "T.vectorized(5)"),  # a tail
]


@pytest.mark.parametrize("second_output", [False, True])
@pytest.mark.parametrize("knobs, vector", FLAT_PIXELS, ids=["plain", "blocked"])
def test_flat_pixel_pointwise_conv_writes_its_tile_through_the_epilogue(second_output, knobs, vector):
    """knob ``flat``: tiles span rows (12 or 5 pixels of 4-wide rows), the epilogue follows the tile."""
    workload = x86.conv2d_workload([1, 6, 3, 4], [10, 6, 1, 1])
    d, k, o = x86.conv2d_nchwc_shapes(workload, knobs)
    data, kernel = te.placeholder(d, name="data"), te.placeholder(k, name="kernel")
    bias = te.placeholder([10], name="b")
    conv = x86.conv2d_nchwc(data, kernel, workload, knobs)
    block = knobs["oc_bn"]
    relu = te.compute(o, lambda n, c, h, w, b: te.max(conv[n, c, h, w, b] + bias[c * block + b], 0.0),
                      name="T_relu")
    outputs = [conv, relu] if second_output else [relu]
    func = x86.schedule_fused(te.create_prim_func([data, kernel, bias, *outputs]), workload, knobs)
    script = func.script()
    # a second output leaves the relu to a loop nest of its own
    assert script.count("T.parallel") == 1 + second_output and vector in script
    rng = np.random.default_rng(5)
    x, w, b = random(workload["data"], rng), random(workload["kernel"], rng), random([10], rng)
    ref = conv2d_reference(x, w, workload["strides"], workload["padding"], workload["dilation"])
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=TARGET)
    dev = tvm.cpu()
    packed = (x86.pack_data(x, knobs["ic_bn"]), x86.pack_conv_kernel(w, knobs["ic_bn"], block), b)
    args = [tvm.runtime.tensor(a, dev) for a in packed]
    outs = [tvm.runtime.tensor(np.full(o, np.nan, "float32"), dev) for _ in outputs]
    lib["main"](*args, *outs)
    expected = [ref, np.maximum(ref + b[None, :, None, None], 0.0)][-len(outputs):]
    for got, want in zip(outs, expected):
        np.testing.assert_allclose(x86.unpack_data(got.numpy()), want, rtol=1e-4, atol=1e-4)


DEPTHWISE_FUSED = [
    (x86.conv2d_workload([1, 16, 7, 7], [16, 1, 3, 3], [2, 2], [1, 1, 1, 1], groups=16),
     {"bn": 8, "reg_n": 2}),
    # plain NCHW, width vectorised: the padding is copied per tile, the clip reads the tile
    (x86.conv2d_workload([1, 16, 7, 7], [16, 1, 3, 3], padding=[1, 1, 1, 1], groups=16),
     {"bn": 1, "reg_n": 7, "c_tile": 2, "oh_bn": 3}),
]


@pytest.mark.parametrize("workload, knobs", DEPTHWISE_FUSED, ids=["8c-stride2", "plain-width-c2-rows3"])
def test_fused_depthwise_bias_clip(workload, knobs):
    bn = knobs["bn"]
    d, k, o = x86.depthwise_nchwc_shapes(workload, knobs)
    data, kernel = te.placeholder(d, name="data"), te.placeholder(k, name="kernel")
    bias = te.placeholder([1, 16 // bn, 1, 1, bn], name="bias")
    conv = x86.depthwise_conv2d_nchwc(data, kernel, workload, knobs)
    biased = te.compute(o, lambda n, c, h, w, b: conv[n, c, h, w, b] + bias[0, c, 0, 0, b], name="T_add")
    clip = te.compute(o, lambda *i: te.min(te.max(biased(*i), 0.0), 6.0), name="T_clip")
    func = x86.schedule_fused(te.create_prim_func([data, kernel, bias, clip]), workload, knobs)
    assert func.script().count("T.parallel") == 1
    rng = np.random.default_rng(3)
    x, w, b = random(workload["data"], rng) * 8, random(workload["kernel"], rng), random([16], rng)
    ref = conv2d_reference(x, w, workload["strides"], workload["padding"], workload["dilation"], groups=16)
    ref = np.clip(ref + b[None, :, None, None], 0.0, 6.0)
    inputs = [x86.pack_data(x, bn), x86.pack_depthwise_kernel(w, bn),
              x86.pack_data(b.reshape(1, 16, 1, 1), bn)]
    out = run(func.with_attr("global_symbol", "main"), inputs, o)
    np.testing.assert_allclose(x86.unpack_data(out), ref, rtol=1e-4, atol=1e-4)


def test_fused_dense_bias_relu():
    workload = x86.dense_workload([2, 24], [20, 24])
    knobs = {"oc_bn": 10, "k_bn": 4}
    d, w, o = x86.dense_packed_shapes(workload, knobs)
    data, weight = te.placeholder(d, name="x"), te.placeholder(w, name="w")
    bias = te.placeholder([20], name="b")
    dense = x86.dense_packed(data, weight, workload, knobs)
    out = te.compute(o, lambda n, m: te.max(dense[n, m] + bias[m], 0.0), name="T_relu")
    func = x86.schedule_fused(te.create_prim_func([data, weight, bias, out]), workload, knobs)
    assert func.script().count("T.parallel") == 1
    rng = np.random.default_rng(4)
    xv, wv, bv = random(d, rng), random([20, 24], rng), random([20], rng)
    got = run(func.with_attr("global_symbol", "main"), [xv, x86.pack_dense_weight(wv, 10), bv], o)
    np.testing.assert_allclose(got, np.maximum(xv @ wv.T + bv, 0.0), rtol=1e-4, atol=1e-4)


def test_knobs_that_do_not_match_the_function_raise():
    func = te_conv_bias_relu_add(CONV_KNOBS[0])
    with pytest.raises(KnobError, match=r"no conv2d block .* reduction blocks found: \['conv2d_NCHWc"):
        x86.schedule_fused(func, CONV, CONV_KNOBS[1])


def relax_fused_module(knobs: dict) -> tvm.IRModule:
    """conv2d (NCHW{ic}c -> NCHW{oc}c) + bias + relu + residual, legalized to our TE compute, fused."""
    d, k, o = x86.conv2d_nchwc_shapes(CONV, knobs)
    ib, ob = knobs["ic_bn"], knobs["oc_bn"]
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(d, "float32"))
    w = relax.Var("w", relax.TensorType(k, "float32"))
    b = relax.Var("b", relax.TensorType([1, o[1], 1, 1, ob], "float32"))
    r = relax.Var("r", relax.TensorType(o, "float32"))
    with bb.function("main", [x, w, b, r]):
        with bb.dataflow():
            y = bb.emit(
                relax.op.nn.conv2d(
                    x, w, strides=CONV["strides"], padding=CONV["padding"], dilation=CONV["dilation"],
                    data_layout=f"NCHW{ib}c", kernel_layout=f"OIHW{ib}i{ob}o", out_layout=f"NCHW{ob}c",
                )
            )
            y = bb.emit(relax.op.add(relax.op.nn.relu(bb.emit(relax.op.add(y, b))), r))
            out = bb.emit_output(y)
        bb.emit_func_output(out)

    def legalize(builder, call):
        return builder.call_te(
            lambda data, kernel: x86.conv2d_nchwc(data, kernel, CONV, knobs), call.args[0], call.args[1]
        )

    mod = relax.transform.LegalizeOps(customize_legalize_map={"relax.nn.conv2d": legalize})(bb.get())
    mod = relax.transform.AnnotateTIROpPattern()(mod)
    return relax.transform.FuseTIR()(relax.transform.FuseOps()(mod))


@pytest.mark.parametrize("knobs", CONV_KNOBS[:1], ids=["8c-16c"])
def test_relax_fuseops_fusetir_function(knobs):
    mod = relax_fused_module(knobs)
    prims = [(gv, f) for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert len(prims) == 1, "FuseOps should fuse conv2d + add + relu + add into one PrimFunc"
    gvar, func = prims[0]
    mod[gvar] = x86.schedule_fused(func, CONV, knobs)
    assert mod[gvar].script().count("T.parallel") == 1
    vm = relax.VirtualMachine(tvm.compile(mod, target=TARGET), tvm.cpu())
    inputs, ref = conv_inputs(knobs, np.random.default_rng(6))
    out = vm["main"](*[tvm.runtime.tensor(a, tvm.cpu()) for a in inputs]).numpy()
    np.testing.assert_allclose(x86.unpack_data(out), ref, rtol=1e-4, atol=1e-4)


def test_epilogue_followed_by_a_layout_transform_stays_correct():
    knobs = CONV_KNOBS[0]
    d, k, o = x86.conv2d_nchwc_shapes(CONV, knobs)
    data, kernel = te.placeholder(d, name="data"), te.placeholder(k, name="kernel")
    conv = x86.conv2d_nchwc(data, kernel, CONV, knobs)
    relu = te.compute(o, lambda *i: te.max(conv(*i), 0.0), name="T_relu")
    out = x86.layout_transform(relu, "NCHW16c", "NCHW8c")
    func = x86.schedule_fused(te.create_prim_func([data, kernel, out]), CONV, knobs)
    rng = np.random.default_rng(8)
    x, w = random(CONV["data"], rng), random(CONV["kernel"], rng)
    ref = np.maximum(conv2d_reference(x, w, CONV["strides"], CONV["padding"], CONV["dilation"]), 0.0)
    inputs = [x86.pack_data(x, 8), x86.pack_conv_kernel(w, 8, 16)]
    got = run(func.with_attr("global_symbol", "main"), inputs, [1, 4, 8, 7, 8])
    np.testing.assert_allclose(x86.unpack_data(got), ref, rtol=1e-4, atol=1e-4)


def test_already_scheduled_function_is_rejected_with_a_message():
    knobs = CONV_KNOBS[0]
    scheduled = x86.kernel_func(CONV, knobs)
    with pytest.raises(KnobError, match="already scheduled|cannot apply the conv2d schedule"):
        x86.schedule_fused(scheduled, CONV, knobs)
