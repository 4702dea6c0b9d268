"""Resize runs in the blocked NCHW{x}c layout of its input (issue 12, U-Net): no layout transform
around it, one scheduled function for it, numerically equal to ONNX Runtime (rtol = atol = 1e-4)
in every mode and block; what a resize gathers from is computed once, not per neighbour."""

import warnings

import numpy as np
import pytest
from onnx import numpy_helper
from tvm import relax, te, topi

import graphtune
from compile_check import assert_matches_ort, transforms_in
from graphtune import extract, models, x86
from graphtune.compiler.driver import rewrite_model
from graphtune.config import Config
from graphtune.frontend import Form, Role, import_model, walk
from graphtune.measure.timing import random_array
from graphtune.x86.generic import audit, schedule_generic
from graphtune.x86.resize import bilinear_resize2d
from graphtune.x86.schedule import VECTOR_SPLIT_ATTR
from onnx_blocks import Builder
from x86_reference import run_prim_func

pytest.importorskip("onnxruntime")

RESIZES = {  # name: (ONNX attrs, roi and scales or sizes of the 6x7 feature map)
    "linear_align_corners": ({"mode": "linear", "coordinate_transformation_mode": "align_corners"},
                             {"scales": [1, 1, 2, 2]}),
    "linear_half_pixel": ({"mode": "linear", "coordinate_transformation_mode": "half_pixel"},
                          {"sizes": [1, 16, 9, 14]}),
    "nearest": ({"mode": "nearest"}, {"scales": [1, 1, 2, 2]}),
    "nearest_down_floor": ({"mode": "nearest", "coordinate_transformation_mode": "half_pixel",
                            "nearest_mode": "floor"}, {"sizes": [1, 16, 4, 5]}),
    "cubic": ({"mode": "cubic", "coordinate_transformation_mode": "half_pixel"},
              {"sizes": [1, 16, 9, 14]}),
    "crop_extrapolate": ({"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
                          "extrapolation_value": 0.5},
                         {"roi": [0, 0, 0.1, -0.2, 1, 1, 0.9, 1.1], "sizes": [1, 16, 9, 14]}),
}
_DTYPES = {"roi": np.float32, "scales": np.float32, "sizes": np.int64}


def resize_block(kind: str):
    """conv 3x3 (8 -> 16) -> relu -> Resize -> conv 1x1 (16 -> 16) on a 6x7 input."""
    attrs, target = RESIZES[kind]
    b = Builder(seed=6)
    h = b.node("Relu", [b.conv("c1", "input", 8, 16)], "r1")
    for name, values in target.items():
        b.inits.append(numpy_helper.from_array(np.array(values, _DTYPES[name]), name))
    inputs = [h, *(name if name in target else "" for name in _DTYPES)]
    up = b.node("Resize", inputs, "up", **attrs)
    return b.model(f"resize_{kind}", [1, 8, 6, 7], b.conv("c2", up, 16, 16, k=(1, 1)))


@pytest.mark.parametrize("block", [4, 8, 16])
@pytest.mark.parametrize("kind", list(RESIZES))
def test_resize_runs_blocked_and_matches_onnxruntime(kind, block):
    model = resize_block(kind)
    config = Config.uniform(model, block=block)
    c1, c2 = config.nodes["c1"], config.nodes["c2"]
    new_mod = rewrite_model(import_model(model), config, x86.host_target())[0]
    # the only transforms are into the first conv and out of the last: none around the resize
    assert transforms_in(new_mod) == [f"NCHW->{c1.in_layout}", f"{c2.out_layout}->NCHW"]
    resized = [line for line in new_mod["main"].script().splitlines() if "R.image.resize2d" in line]
    assert len(resized) == 1 and f'layout="{c1.out_layout}"' in resized[0], resized
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every function scheduled (no generic fallback warning)
        compiled = graphtune.compile(model, config)
    assert_matches_ort(model, compiled)
    assert compiled.schedules["resize2d"] == {"injective": 1}, compiled.schedules
    for name, func in compiled.functions.items():
        assert audit(func) == [], name


def _resize_mod(layout: str, shape: tuple) -> tuple:
    """A Relax conv -> resize2d (in ``layout``) -> relu, the walk's steps."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 6, 6), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            w = relax.const(np.ones((8, 8, 1, 1), "float32"))
            y = bb.emit(relax.op.nn.conv2d(x, w))
            y = bb.emit(relax.op.image.resize2d(y, shape, layout=layout))
            out = bb.emit_output(relax.op.nn.relu(y))
        bb.emit_func_output(out)
    return {s.op_name: (s.role, s.form) for s in walk(bb.get())}


def test_only_nchw_resizes_of_rank_4_tensors_pass_their_layout():
    assert _resize_mod("NCHW", (12, 12))["relax.image.resize2d"] == (Role.PASS, Form.RESIZE)
    # NHWC reads the 8 channels as width: it needs the plain tensor
    assert _resize_mod("NHWC", (12, 12))["relax.image.resize2d"] == (Role.FIXED, None)


def test_unet_has_no_boundary_at_its_resizes():
    model = models.get("unet", image_size=16)
    resizes = [n.name for n in model.graph.node if n.op_type == "Resize"]
    steps = walk(import_model(model))
    assert [s.form for s in steps if s.op_name == "relax.image.resize2d"] == [Form.RESIZE] * len(resizes)
    graph = extract(model, max_candidates=2)
    assert sorted(n for n in graph.nodes if graph.op(n) == "boundary") == ["input", "output"]
    # each decoder concat reads the conv below it directly (through its relu and resize)
    joins = ("up1.concat", "up2.concat", "up3.concat")
    assert {join: sorted(graph.nx.predecessors(join)) for join in joins} == {
        "up1.concat": ["down2.conv.3", "down3.conv.3"], "up2.concat": ["down1.conv.3", "up1.conv.3"],
        "up3.concat": ["inc.conv.3", "up2.conv.3"]}


@pytest.mark.parametrize("layout", ["NCHW", "NCHW4c"])
def test_a_join_gathered_by_a_bilinear_resize_is_computed_once_per_input_element(layout):
    """LR-ASPP's head (two convs -> Add -> 8x bilinear Resize -> output): inlined into the resize,
    the add (and the transforms into it) ran once per gathered neighbour, four times per output
    element (21 x 224 x 224 output: 2.5 ms; computed once: 1.4 ms)."""
    shape = [1, 16, 6, 7] if layout == "NCHW" else [1, 4, 6, 7, 4]
    x, y = te.placeholder(shape, name="x"), te.placeholder(shape, name="y")
    joined = te.compute(shape, lambda *i: x(*i) + y(*i), name="join")
    up = topi.image.resize2d(joined, [0.0] * 4, [24, 28], layout=layout, method="linear",
                             coordinate_transformation_mode="half_pixel")
    func = te.create_prim_func([x, y, up])
    scheduled, kind = schedule_generic(func, x86.host_target())
    assert kind == "injective" and audit(scheduled) == []
    assert 'sblock("join")' in scheduled.script()  # its own loop nest, over the 6 x 7 input
    args = [random_array(shape, "float32", seed) for seed in (1, 2)]
    want, got = (run_prim_func(f, args) for f in (func, scheduled))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"])
@pytest.mark.parametrize("layout, size", [("NCHW", (13, 3)), ("NCHW4c", (1, 16)), ("NCHW", (4, 1)),
                                          ("NCHW", (12, 28)), ("NCHW", (5, 112))])
def test_separable_bilinear_resize_equals_tvms_resize(mode, layout, size):
    """Row pass then column pass (x86/resize.py) against TVM's one-pass resize: up, down, to 1."""
    if mode == "align_corners" and 1 in size:
        pytest.skip("TVM's resize divides by (out - 1) there")
    shape = [1, 8, 6, 7] if layout == "NCHW" else [1, 2, 6, 7, 4]
    x = te.placeholder(shape, name="x")
    ours = bilinear_resize2d(x, layout, size, mode)
    stock = topi.image.resize2d(x, [0.0] * 4, list(size), layout=layout, method="linear",
                                coordinate_transformation_mode=mode)
    data = random_array(shape, "float32", 3)
    got, want = (run_prim_func(te.create_prim_func([x, y]), [data]) for y in (ours, stock))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"])
@pytest.mark.parametrize("factor", [2, 4, 16, 40])
def test_integer_width_factors_vectorise_over_phases(mode, factor):
    """A width grown by an integer factor >= 4 reads one column per vector of phases: scheduled,
    the column loop is split by the factor and still equals TVM's resize."""
    shape = [1, 3, 5, 7]
    x = te.placeholder(shape, name="x")
    y = bilinear_resize2d(x, "NCHW", (9, 7 * factor), mode)
    func = te.create_prim_func([x, y])
    scheduled, kind = schedule_generic(func, x86.host_target())
    assert kind == "injective" and audit(scheduled) == []
    phased = factor >= 4 and mode != "align_corners"
    assert (VECTOR_SPLIT_ATTR in func.script()) == phased  # the column pass computed per phase
    lanes = max(d for d in range(1, 4 * x86.vector_lanes(x86.host_target()) + 1) if factor % d == 0)
    # scheduled: a vector of phases (with 16 lanes an unphased 16x width may vectorise alike)
    assert not phased or f"T.vectorized({lanes})" in scheduled.script(), scheduled.script()
    stock = topi.image.resize2d(x, [0.0] * 4, [9, 7 * factor], layout="NCHW", method="linear",
                                coordinate_transformation_mode=mode)
    data = random_array(shape, "float32", 4)
    got = run_prim_func(scheduled, [data])
    want = run_prim_func(te.create_prim_func([x, stock]), [data])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("block", [4, 16])
def test_bilinear_resizes_are_separable_where_the_block_does_not_fill_a_vector(block):
    model = resize_block("linear_half_pixel")
    compiled = graphtune.compile(model, Config.uniform(model, block=block))
    assert_matches_ort(model, compiled)
    (name,) = [n for n in compiled.functions if "resize2d" in n]
    separable = 'sblock("resize_rows")' in compiled.functions[name].script()
    assert separable == (block < x86.vector_lanes(x86.host_target())), name


@pytest.mark.parametrize("mode, consumer", [("half_pixel", None), ("asymmetric", None),
                                            ("half_pixel", "Relu"), ("align_corners", None)])
def test_an_upsampling_head_resizes_in_nchw_after_moving_its_small_input(mode, consumer):
    """conv (8 -> 21) -> 16x bilinear resize -> model output: the transform to NCHW moves the
    conv's 6x7 output, not the 96x112 resize, when the resize runs per phase and every reader
    wants NCHW; otherwise (a Relu reader keeps the block, align_corners has no phases) the
    resize runs blocked."""
    b = Builder(seed=9)
    b.inits.append(numpy_helper.from_array(np.array([1, 21, 96, 112], np.int64), "sizes"))
    up = b.node("Resize", [b.conv("head", "input", 8, 21, k=(1, 1)), "", "", "sizes"], "up",
                mode="linear", coordinate_transformation_mode=mode)
    out = b.node("Relu", [up], "up.relu") if consumer else up
    model = b.model("upsampling_head", [1, 8, 6, 7], out)
    config = Config.uniform(model, block=7)
    new_mod = rewrite_model(import_model(model), config, x86.host_target())[0]
    moved_first = mode != "align_corners" and consumer is None
    assert transforms_in(new_mod) == [f"NCHW->{config.nodes['head'].in_layout}", "NCHW7c->NCHW"]
    lines = new_mod["main"].script().splitlines()
    (moved,) = [line for line in lines if "layout_transform_NCHW7c_NCHW" in line]
    assert ("(1, 21, 6, 7)" in moved) == moved_first, moved
    resized = [line for line in lines if "R.image.resize2d" in line]
    assert ('layout="NCHW"' in resized[0]) == moved_first, resized
    compiled = graphtune.compile(model, config)
    assert_matches_ort(model, compiled)
