"""Fast schedules for the ops that are not convs (issue 12 item 2): vectorisable activations,
branching epilogues folded into the conv, squeeze-excitation, pools and concat — in every channel
block the solver may pick, numerically against ONNX Runtime (rtol = atol = 1e-4)."""

import warnings

import numpy as np
import pytest
import tvm
from onnx import numpy_helper
from tvm import te

import graphtune
import graphtune.x86 as x86
from compile_check import assert_matches_ort
from graphtune.config import Config
from graphtune.x86.fastmath import COMPUTES
from graphtune.x86.generic import audit
from onnx_blocks import Builder

pytest.importorskip("onnxruntime")

BLOCKS = [4, 8, 16, 32, 64]
CHANNELS = 64  # every block divides it


# ------------------------------------------------------------------ fastmath
_NUMPY = {
    "relax.exp": np.exp,
    "relax.sigmoid": lambda a: 1 / (1 + np.exp(-a)),
    "relax.tanh": np.tanh,
    "relax.nn.silu": lambda a: a / (1 + np.exp(-a)),
}


@pytest.mark.parametrize("op", list(_NUMPY))
def test_fastmath_matches_numpy_and_calls_no_scalar_exp(op):
    x = te.placeholder((4096,), name="x")
    func = te.create_prim_func([x, COMPUTES[op](x)])
    executable = tvm.compile(func, target={"kind": "llvm"})
    assert "llvm.exp" not in executable.mod.inspect_source("ll")  # would be one expf call per element
    a = np.concatenate([np.linspace(-30, 30, 4000), [-1e4, -100, -87.5, -1e-6, 0, 1e-6, 87.5]])
    a = np.concatenate([a, np.zeros(4096 - a.size)]).astype("float32")
    out = tvm.runtime.tensor(np.zeros(4096, "float32"))
    executable.jit()(tvm.runtime.tensor(a), out)
    with np.errstate(over="ignore"):
        expected = _NUMPY[op](a.astype("float64"))
    if op == "relax.exp":  # clamped range: relative error there, saturation outside
        inside = (a > -87.3) & (a < 88)
        np.testing.assert_allclose(out.numpy()[inside], expected[inside], rtol=1e-6)
        assert np.all(np.isfinite(out.numpy())) and np.all(out.numpy() > 0)
    else:
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_round_is_ties_to_even_on_whole_vectors():
    """ONNX Round / QuantizeLinear's rounding as COMPUTES lowers it: numpy's rint, bit for bit,
    vectorized by TVM (its stock ``nearbyint`` stays a scalar loop LLVM gathers 8 lanes at a time)."""
    x = te.placeholder((4096,), name="x")
    sch = tvm.s_tir.Schedule(te.create_prim_func([x, COMPUTES["relax.round"](x)]))
    block = sch.get_sblock("round")
    sch.vectorize(sch.split(sch.get_loops(block)[0], [None, 16])[1])
    executable = tvm.compile(sch.mod, target=x86.host_target())
    ll = executable.mod.inspect_source("ll")
    assert "llvm.nearbyint.v16f32" in ll and "gather" not in ll and "scatter" not in ll
    rng = np.random.default_rng(0)
    a = np.concatenate([np.arange(-8, 8, 0.5), rng.uniform(-300, 300, 4064)]).astype("float32")
    out = tvm.runtime.tensor(np.zeros(4096, "float32"))
    executable(tvm.runtime.tensor(a), out)
    np.testing.assert_array_equal(out.numpy(), np.rint(a))


# ------------------------------------------------------------------ models
def _act(b: Builder, kind: str, h: str) -> str:
    """Append an activation as exporters write it."""
    if kind == "silu":  # x * sigmoid(x)
        return b.node("Mul", [h, b.node("Sigmoid", [h], "act.sig")], "act")
    if kind == "hardswish":  # x * hardsigmoid(x), the opset-13 spelling
        return b.node("Mul", [h, b.node("HardSigmoid", [h], "act.hs", alpha=1 / 6, beta=0.5)], "act")
    if kind == "hardswish_clip":  # torch's x * clip(x + 3, 0, 6) / 6
        shifted = b.node("Add", [h, b.const("three", ())], "act.add")
        clip = b.node("Clip", [shifted, b.const("lo", ()), b.const("hi", ())], "act.clip")
        return b.node("Div", [b.node("Mul", [h, clip], "act.mul"), b.const("six", ())], "act")
    if kind == "tanh":
        return b.node("Tanh", [h], "act")
    raise ValueError(kind)


def _fix_scalars(b: Builder) -> None:
    """Give the scalar constants of _act their values (Builder.const draws random ones)."""
    values = {"three": 3.0, "lo": 0.0, "hi": 6.0, "six": 6.0}
    for init in b.inits:
        if init.name in values:
            init.CopyFrom(numpy_helper.from_array(np.float32(values[init.name]), init.name))


def conv_act(kind: str, size: int = 8):
    """conv 3x3 -> activation -> conv 1x1 (the activation folds into the first conv)."""
    b = Builder(seed=1)
    h = b.conv("c1", "input", CHANNELS, CHANNELS)
    h = _act(b, kind, h)
    out = b.conv("c2", h, CHANNELS, CHANNELS, k=(1, 1))
    _fix_scalars(b)
    return b.model(f"conv_{kind}", [1, CHANNELS, size, size], out)


def squeeze_excitation(gate: str = "Sigmoid", size: int = 8):
    """conv -> SiLU -> SE (global pool, 1x1 convs, gate, broadcast multiply) -> 1x1 conv."""
    b = Builder(seed=2)
    h = _act(b, "silu", b.conv("c1", "input", CHANNELS, CHANNELS))
    s = b.node("GlobalAveragePool", [h], "se.pool")
    s = b.node("Relu", [b.conv("se.fc1", s, CHANNELS, 16, k=(1, 1))], "se.relu")
    s = b.conv("se.fc2", s, 16, CHANNELS, k=(1, 1))
    s = b.node(gate, [s], "se.gate")
    h = b.node("Mul", [h, s], "se.scale")
    out = b.conv("proj", h, CHANNELS, CHANNELS, k=(1, 1))
    return b.model("se", [1, CHANNELS, size, size], out)


def pools_and_concat(size: int = 12):
    """GoogLeNet / DenseNet-style: max pools (strided, same, ceil mode), upsample, concat, average
    pool, head pool."""
    b = Builder(seed=3)
    h = b.node("Relu", [b.conv("c1", "input", CHANNELS, CHANNELS)], "r1")
    p = b.node("MaxPool", [h], "mp_s2", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    q = b.node("MaxPool", [p], "mp_s1", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    q = b.node("MaxPool", [q], "mp_ceil", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)  # 6 -> 3
    q = b.node("Resize", [q, "", b.const("scales", (4,))], "up", mode="nearest")
    c = b.node("Relu", [b.conv("c2", p, CHANNELS, CHANNELS, k=(1, 1))], "r2")
    cat = b.node("Concat", [c, q], "cat", axis=1)
    a = b.node("AveragePool", [cat], "ap", kernel_shape=[2, 2], strides=[2, 2])
    a = b.node("AveragePool", [a], "ap_same", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    h = b.node("Relu", [b.conv("c3", a, 2 * CHANNELS, CHANNELS, k=(1, 1))], "r3")
    out = b.node("GlobalAveragePool", [h], "gap")
    return _fix_scales(b.model("pools", [1, CHANNELS, size, size], out))


def _fix_scales(model):
    for init in model.graph.initializer:
        if init.name == "scales":
            init.CopyFrom(numpy_helper.from_array(np.float32([1, 1, 2, 2]), "scales"))
    return model


def _compile(model, block):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every function scheduled, every node configured
        return graphtune.compile(model, Config.uniform(model, block=block))


def _check_scheduled(compiled):
    for name, func in compiled.functions.items():
        assert audit(func) == [], name
        script = func.script()
        assert "T.sigmoid(" not in script and "T.exp(" not in script and "T.tanh(" not in script, name


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("kind", ["silu", "hardswish", "hardswish_clip", "tanh"])
def test_activation_folds_into_the_conv(kind, block):
    model = conv_act(kind)
    compiled = _compile(model, block)
    assert_matches_ort(model, compiled)
    _check_scheduled(compiled)
    # the activation runs in the conv's register tile: no function of its own, no buffer for it
    assert set(compiled.schedules) <= {"conv2d", "layout_transform"}, compiled.schedules
    for func in compiled.functions.values():
        if str(func.attrs["graphtune.schedule"]) == "kernel":
            script = func.script()
            assert script.count("sblock_alloc_buffer(") == script.count('scope="local"'), script


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("gate", ["Sigmoid", "HardSigmoid"])
def test_squeeze_excitation(gate, block):
    model = squeeze_excitation(gate)
    compiled = _compile(model, block)
    assert_matches_ort(model, compiled)
    _check_scheduled(compiled)


@pytest.mark.parametrize("block", BLOCKS)
def test_pools_and_concat(block):
    model = pools_and_concat()
    compiled = _compile(model, block)
    assert_matches_ort(model, compiled)
    _check_scheduled(compiled)
    pools = [f.script() for f in compiled.functions.values() if str(f.attrs["graphtune.op"]) == "max_pool2d"]
    assert len(pools) == 3 and not any("if_then_else" in p or "pad_temp" in p for p in pools)


def _average_reference(x: np.ndarray, window, stride, pads, count_include_pad: bool) -> np.ndarray:
    """NCHW average pool of integers in float64 (sums exact, quotients correctly rounded),
    rounded half to even."""
    top, left, bottom, right = pads
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    ones = np.pad(np.ones(x.shape[2:]), ((top, bottom), (left, right)))
    out_h = (padded.shape[2] - window[0]) // stride[0] + 1
    out_w = (padded.shape[3] - window[1]) // stride[1] + 1
    out = np.zeros(x.shape[:2] + (out_h, out_w))
    for i in range(out_h):
        for j in range(out_w):
            rows = slice(i * stride[0], i * stride[0] + window[0])
            cols = slice(j * stride[1], j * stride[1] + window[1])
            count = window[0] * window[1] if count_include_pad else ones[rows, cols].sum()
            out[:, :, i, j] = padded[:, :, rows, cols].sum(axis=(2, 3)) / count
    return np.round(out).astype(x.dtype)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("window,stride,pads,count_include_pad", [
    ((3, 3), (1, 1), (1, 1, 1, 1), True),    # Inception's branch pools
    ((2, 2), (2, 2), (0, 0, 0, 0), True),    # DenseNet's transitions: a quarter of the means end in .5
    ((3, 3), (2, 2), (1, 1, 1, 1), False),   # windows of 4, 6 and 9 input elements
    ((3, 2), (1, 2), (0, 1, 2, 1), False),
    ((16, 16), (1, 1), (0, 0, 0, 0), True),  # too large a window for 16-bit sums
])
def test_avg_pool2d_is_the_mean_rounded_half_to_even(dtype, window, stride, pads, count_include_pad):
    """x86.pools.avg_pool2d in NCHW8c, scheduled as compile schedules it, against a float64
    reference: exact (16- or 32-bit sums, the quotient rounded half to even)."""
    from graphtune.x86.pools import avg_pool2d
    rng = np.random.default_rng(11)
    info = np.iinfo(dtype)
    size = max(9, max(window) + 1)
    x = rng.integers(info.min, info.max + 1, (1, 16, size, size + 1)).astype(dtype)
    x[0, 0] = info.max  # the largest sums
    x[0, 1] = info.min
    want = _average_reference(x, window, stride, pads, count_include_pad)
    blocked = x.reshape(1, 2, 8, size, size + 1).transpose(0, 1, 3, 4, 2)
    out_shape = (1, 2, want.shape[2], want.shape[3], 8)
    data = te.placeholder(blocked.shape, name="x", dtype=dtype)
    pool = avg_pool2d(data, "NCHW8c", window, stride, pads, count_include_pad, out_shape)
    scheduled, _ = x86.generic.schedule_generic(te.create_prim_func([data, pool]), x86.host_target())
    executable = tvm.compile(scheduled, target=x86.host_target())
    out = tvm.runtime.tensor(np.zeros(out_shape, dtype))
    executable(tvm.runtime.tensor(np.ascontiguousarray(blocked)), out)
    got = out.numpy().transpose(0, 1, 4, 2, 3).reshape(want.shape)
    np.testing.assert_array_equal(got, want)


def test_pools_on_plain_nchw_input():
    """Pools before the first conv run in plain NCHW (the input's layout)."""
    b = Builder(seed=4)
    p = b.node("MaxPool", ["input"], "mp", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    p = b.node("AveragePool", [p], "ap", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    out = b.conv("c1", p, 8, 16)
    model = b.model("nchw_pools", [1, 8, 15, 15], out)
    compiled = _compile(model, 8)
    assert_matches_ort(model, compiled)
    _check_scheduled(compiled)


@pytest.mark.parametrize("second_output", [False, True])
def test_te_conv_silu_epilogue(second_output):
    """A branching epilogue folds whole into the tile; with a second output, up to its fork."""
    from x86_reference import conv2d_reference, random, run

    wl = x86.conv2d_workload([1, 16, 8, 7], [32, 16, 3, 3], padding=[1, 1, 1, 1])
    knobs = {"ic_bn": 8, "oc_bn": 16, "reg_n": 7, "unroll_kw": True}
    d, k, o = x86.conv2d_nchwc_shapes(wl, knobs)
    data, kernel = te.placeholder(d, name="data"), te.placeholder(k, name="kernel")
    bias = te.placeholder([1, o[1], 1, 1, o[4]], name="bias")
    conv = x86.conv2d_nchwc(data, kernel, wl, knobs)
    y = te.compute(o, lambda n, c, h, w, b: conv[n, c, h, w, b] + bias[0, c, 0, 0, b], name="T_add")
    gate = COMPUTES["relax.sigmoid"](y)
    silu = te.compute(o, lambda *i: y(*i) * gate(*i), name="T_multiply")
    outputs = [y, silu] if second_output else [silu]
    func = te.create_prim_func([data, kernel, bias, *outputs]).with_attr("global_symbol", "main")
    func = x86.schedule_fused(func, wl, knobs)
    assert func.script().count("T.parallel") == (3 if second_output else 1)  # else: sigmoid, multiply
    rng = np.random.default_rng(5)
    x, w, b = random(wl["data"], rng), random(wl["kernel"], rng), random([32], rng)
    ref = conv2d_reference(x, w, wl["strides"], wl["padding"], wl["dilation"]) + b[None, :, None, None]
    inputs = [x86.pack_data(x, 8), x86.pack_conv_kernel(w, 8, 16), x86.pack_data(b.reshape(1, 32, 1, 1), 16)]
    if second_output:
        lib = tvm.compile(tvm.IRModule({"main": func}), target={"kind": "llvm"})
        outs = [tvm.runtime.tensor(np.full(o, np.nan, "float32")) for _ in range(2)]
        lib["main"](*[tvm.runtime.tensor(a) for a in inputs], *outs)
        got = [x86.unpack_data(t.numpy()) for t in outs]
    else:
        got = [None, x86.unpack_data(run(func, inputs, o))]
        got[0] = ref
    np.testing.assert_allclose(got[0], ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], ref / (1 + np.exp(-ref)), rtol=1e-4, atol=1e-4)


def test_average_pool_in_a_block_of_three_vectors():
    """NCHW48c: LLVM widens a 48-float vector and masks it; the window sums use whole vectors."""
    b = Builder(seed=5)
    h = b.conv("c1", "input", 48, 48, k=(1, 1), pads=[0, 0, 0, 0])
    a = b.node("AveragePool", [h], "ap", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    model = b.model("pool48", [1, 48, 9, 9], b.conv("c2", a, 48, 16, k=(1, 1), pads=[0, 0, 0, 0]))
    compiled = _compile(model, 48)
    assert_matches_ort(model, compiled)
    _check_scheduled(compiled)
    [pool] = [f.script() for f in compiled.functions.values() if str(f.attrs["graphtune.op"]) == "avg_pool2d"]
    assert "T.int64(1), T.int64(1), T.int64(9), T.int64(9), T.int64(48)" in pool
    update = pool[:pool.index('T.sblock("pool_sum_update")')]
    lanes = x86.vector_lanes()
    assert update.rindex(f"T.vectorized(T.int64({lanes}))") > update.rindex("T.grid(T.int64(3), T.int64(3))")
