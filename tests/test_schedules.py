"""No unscheduled PrimFunc reaches the build: generic schedules, schedule counts, odd models.

Every function of every compiled model carries a graphtune schedule, checked
in its TIR (tests/schedule_check.py), never by timing. The zoo models compiled
by tests/test_compile.py are checked there; the others here.
"""

import warnings

import numpy as np
import pytest
from tvm import te, topi

import graphtune  # noqa: F401  (sets TVM_NUM_THREADS before TVM starts)
from compile_check import SMALL, assert_matches_ort, ort_outputs
from graphtune import models
from graphtune.compiler import compile
from graphtune.config import Config
from graphtune.x86 import host_target
from graphtune.x86.generic import SCHEDULE_ATTR, audit, schedule_generic
from odd_models import convnext_model, nms_model
from schedule_check import assert_scheduled
from x86_reference import run_prim_func

TARGET = host_target()


# ------------------------------------------------------------------ generic schedules, op by op
def _x(shape, name="x"):
    return te.placeholder(shape, name=name)


def _softmax():
    x = _x((8, 1000))
    return [x], topi.nn.softmax(x, axis=-1), "reduction"


def _layer_norm():
    x, g, b = _x((1, 14, 14, 96)), _x((96,), "g"), _x((96,), "b")
    return [x, g, b], topi.nn.layer_norm(x, g, b, axis=[3], epsilon=1e-6), "reduction"


def _sum_over_channels():  # reduces a non-innermost axis: the output's last axis is vectorised
    x = _x((1, 64, 28, 28))
    return [x], topi.sum(x, axis=1, keepdims=True), "reduction"


def _mean_over_width():
    x = _x((1, 64, 28, 28))
    return [x], topi.divide(topi.sum(x, axis=3), 28.0), "reduction"


def _max_pool():
    x = _x((1, 32, 28, 28))
    return [x], topi.nn.pool2d(x, [3, 3], [2, 2], [1, 1], [1, 1, 1, 1], "max"), "reduction"


def _batch_matmul():
    a, b = _x((4, 96, 64), "a"), _x((4, 64, 80), "b")
    return [a, b], topi.nn.batch_matmul(a, b, transpose_b=False), "matmul"


def _matmul_4d_by_2d_gelu():  # the ConvNeXt pointwise layer on an NHWC activation
    a, w = _x((1, 14, 14, 96), "a"), _x((96, 384), "w")
    y = topi.matmul(topi.reshape(a, (196, 96)), w)
    y = topi.multiply(y, topi.add(topi.fast_erf(topi.multiply(y, 0.7071)), 1.0))
    return [a, w], topi.reshape(y, (1, 14, 14, 384)), "matmul"


def _transpose():
    x = _x((1, 64, 28, 28))
    return [x], topi.transpose(x, [0, 2, 3, 1]), "injective"


def _concat_pad_resize():
    x, y = _x((1, 16, 14, 14)), _x((1, 8, 14, 14), "y")
    cat = topi.concatenate([x, y], axis=1)
    padded = topi.nn.pad(cat, [0, 0, 1, 1], [0, 0, 1, 1])
    return [x, y], topi.image.resize2d(padded, [0.0] * 4, [32, 32], method="linear"), "injective"


CASES = {f.__name__.lstrip("_"): f for f in (
    _softmax, _layer_norm, _sum_over_channels, _mean_over_width, _max_pool, _batch_matmul,
    _matmul_4d_by_2d_gelu, _transpose, _concat_pad_resize)}


@pytest.mark.parametrize("case", sorted(CASES))
def test_generic_schedule_is_parallel_vectorised_and_exact(case):
    args, out, expected_kind = CASES[case]()
    func = te.create_prim_func(args + [out])
    assert audit(func), "the unscheduled function must fail the audit (else the test proves nothing)"
    scheduled, kind = schedule_generic(func, TARGET)
    assert kind == expected_kind and str(scheduled.attrs[SCHEDULE_ATTR]) == kind
    assert audit(scheduled) == []
    script = scheduled.script()
    assert "T.parallel" in script and "T.vectorized" in script
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal([int(d) for d in a.shape]).astype("float32") for a in args]
    np.testing.assert_allclose(run_prim_func(scheduled, inputs), run_prim_func(func, inputs),
                               rtol=1e-5, atol=1e-5)


def test_generic_matmul_matches_numpy_and_is_register_tiled():
    args, out, _ = _batch_matmul()
    scheduled, _ = schedule_generic(te.create_prim_func(args + [out]), TARGET)
    script = scheduled.script()
    assert "T.unroll(4)" in script and 'scope="local"' in script  # a 4-row register tile
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in args)
    np.testing.assert_allclose(run_prim_func(scheduled, [a, b]), a @ b, rtol=1e-4, atol=1e-4)


def test_softmax_matches_numpy():
    args, out, _ = _softmax()
    scheduled, _ = schedule_generic(te.create_prim_func(args + [out]), TARGET)
    x = np.random.default_rng(2).standard_normal((8, 1000)).astype("float32")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(run_prim_func(scheduled, [x]), e / e.sum(axis=1, keepdims=True),
                               rtol=1e-4, atol=1e-6)


def test_conv_without_kernel_is_generic():
    """A contraction graphtune has no kernel for (here conv1d) gets the generic fallback."""
    x, w = _x((1, 16, 64)), _x((32, 16, 3), "w")
    out = topi.nn.conv1d(x, w, 1, 1, 1)
    scheduled, kind = schedule_generic(te.create_prim_func([x, w, out]), TARGET)
    assert kind == "generic" and audit(scheduled) == []


# ------------------------------------------------------------------ whole models
# every zoo model not compiled in test_compile (which checks the same there)
# densenet201 (30+ s) runs with -m slow: densenet121 in test_compile has the same ops
@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n == "densenet201" else [])
                                  for n in models.names() if n not in dict(SMALL)])
def test_zoo_model_runs_only_scheduled_functions(name):
    model = models.get(name, image_size=32)
    compiled = compile(model, Config.uniform(model))
    assert_scheduled(compiled)
    assert "generic" not in str(compiled.schedules) and "none" not in str(compiled.schedules)
    assert compiled.schedules["conv2d"] == {"kernel": compiled.schedules["conv2d"]["kernel"]}
    assert_matches_ort(model, compiled)


def _compile_quietly(model):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = compile(model, Config.uniform(model))
    return compiled, [str(w.message) for w in caught]


def test_convnext_style_model_matches_ort_with_every_op_scheduled():
    model = convnext_model(image_size=32)
    compiled, messages = _compile_quietly(model)
    assert_scheduled(compiled)
    schedules = compiled.schedules
    # pw1 (+ GELU) and pw2 (+ bias), 4-D by 2-D, are graphtune dense nodes (rows = the leading
    # dims), like the head; no matmul is left to the generic matmul schedule
    assert schedules["dense"] == {"kernel": 3} and "matmul" not in schedules
    assert schedules["layer_norm"] == {"reduction": 1}
    assert schedules["depthwise_conv2d"] == {"kernel": 1}
    assert not any("generic parallel schedule" in m for m in messages)
    assert "generic" not in compiled.schedule_summary()
    assert_matches_ort(model, compiled)


def test_data_dependent_output_shape_compiles_and_matches_ort():
    """Conv -> ReduceMean -> Reshape -> NonMaxSuppression (issue 13, failure 2)."""
    model = nms_model()
    compiled, messages = _compile_quietly(model)
    assert_scheduled(compiled)
    assert compiled.schedules["all_class_non_max_suppression"] == {"generic": 1}
    assert any("all_class_non_max_suppression (1x)" in m for m in messages)
    assert "(generic: all_class_non_max_suppression)" in compiled.schedule_summary()
    x = compiled.random_inputs(seed=3)[0]
    expected = ort_outputs(model, [x])[0]
    got = compiled(x)
    assert got.shape == expected.shape == (5, 3)
    np.testing.assert_array_equal(got, expected)
