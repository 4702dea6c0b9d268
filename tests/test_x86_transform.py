"""graphtune.x86 layout transforms: every pair among NCHW/NCHW4c/NCHW8c/NCHW16c, and Relax's."""

import itertools

import numpy as np
import pytest
import tvm
from tvm import relax

import graphtune.x86 as x86
from graphtune.layouts import block_of
from x86_reference import TARGET, random, run

pytestmark = pytest.mark.unit

LAYOUTS = ["NCHW", "NCHW4c", "NCHW8c", "NCHW16c"]
PAIRS = [(s, d) for s, d in itertools.product(LAYOUTS, LAYOUTS) if s != d]


def to_layout(x: np.ndarray, layout: str) -> np.ndarray:
    return x86.pack_data(x, block_of(layout)) if block_of(layout) else x


@pytest.mark.parametrize("src, dst", PAIRS, ids=[f"{s}-{d}" for s, d in PAIRS])
def test_transform_pair_matches_numpy(src, dst):
    shape = [2, 32, 5, 7]
    x = random(shape, np.random.default_rng(3))
    func = x86.transform_func(shape, src, dst)
    out = run(func, [to_layout(x, src)], x86.transform_shape(shape, dst))
    np.testing.assert_array_equal(out, to_layout(x, dst))
    script = func.script()
    assert "T.parallel" in script and "T.vectorized" in script


def test_transform_handles_channels_only_some_blocks_divide():
    shape = [1, 24, 3, 3]
    x = random(shape, np.random.default_rng(4))
    out = run(x86.transform_func(shape, "NCHW8c", "NCHW12c"), [to_layout(x, "NCHW8c")], [1, 2, 3, 3, 12])
    np.testing.assert_array_equal(out, to_layout(x, "NCHW12c"))


def relax_transforms() -> tvm.IRModule:
    """NCHW -> NCHW16c -> NCHW8c -> NCHW with relax.op.layout_transform, legalized by Relax."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([1, 32, 6, 5], "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.layout_transform(x, index_map=lambda n, c, h, w: (n, c // 16, h, w, c % 16)))
            y = bb.emit(
                relax.op.layout_transform(
                    y, index_map=lambda n, cc, h, w, c: (n, (cc * 16 + c) // 8, h, w, (cc * 16 + c) % 8)
                )
            )
            y = bb.emit(relax.op.layout_transform(y, index_map=lambda n, cc, h, w, c: (n, cc * 8 + c, h, w)))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return relax.transform.LegalizeOps()(bb.get())


def test_schedule_transform_on_relax_legalized_layout_transforms():
    mod = relax_transforms()
    scheduled = 0
    for gvar, func in list(mod.functions.items()):
        if isinstance(func, tvm.tirx.PrimFunc):
            mod[gvar] = x86.schedule_transform(func)
            script = mod[gvar].script()
            assert "T.parallel" in script and "T.vectorized" in script
            scheduled += 1
    assert scheduled == 3
    vm = relax.VirtualMachine(tvm.compile(mod, target=TARGET), tvm.cpu())
    x = random([1, 32, 6, 5], np.random.default_rng(5))
    np.testing.assert_array_equal(vm["main"](tvm.runtime.tensor(x, tvm.cpu())).numpy(), x)


def test_schedule_transform_loops_over_the_output():
    mod = relax_transforms()
    funcs = [f for f in mod.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
    func = next(f for f in funcs if len(f.params[0].shape) == 4)
    # Relax loops over the NCHW source (scattered stores); the schedule gathers into the
    # NCHW16c output so that its 16 channels are the vectorised innermost loop.
    assert "T.vectorized(T.int64(16))" in x86.schedule_transform(func).script()
