"""x86.shuffles: lane gathers inside one aligned block become a load and a shuffle, others stay."""

import numpy as np
import pytest
import tvm
from tvm import te, tirx
from tvm.sym import Analyzer

from graphtune.x86.lowering import PIPELINE
from graphtune.x86.shuffles import shuffled_load

pytestmark = pytest.mark.unit

TARGET = {"kind": "llvm", "mcpu": "skylake-avx512"}


def _gather(width: int, lane_of) -> tuple:
    """``y[p, l] = x[p, lane_of(l)]`` over 16 vectorised lanes: (LLVM IR, y, x)."""
    x = te.placeholder((8, width), "float32", name="x")
    y = te.compute((8, 16), lambda p, k: x[p, lane_of(k)], name="y")
    sch = tvm.s_tir.Schedule(te.create_prim_func([x, y]))
    sch.vectorize(sch.get_loops(sch.get_sblock("y"))[1])
    lib = tvm.compile(sch.mod, target=TARGET, tir_pipeline=PIPELINE)
    data = np.random.default_rng(0).standard_normal((8, width)).astype("float32")
    out = tvm.runtime.tensor(np.zeros((8, 16), "float32"))
    lib["main"](tvm.runtime.tensor(data), out)
    return lib.mod.inspect_source("ll"), out.numpy(), data


@pytest.mark.parametrize("case, lanes, expected, shuffled", [
    ("lanes of group g read lane 4g + 1", lambda k: (k // 4) * 4 + 1, [k // 4 * 4 + 1 for k in range(16)],
     True),
    ("reversed", lambda k: 15 - k, [15 - k for k in range(16)], True),
    ("every other lane of two blocks", lambda k: k * 2, [2 * k for k in range(16)], False),  # 31 elements
])
def test_gathers_inside_one_aligned_block_become_one_shuffle(case, lanes, expected, shuffled):
    ir, out, data = _gather(32, lanes)
    np.testing.assert_array_equal(out, data[:, expected])
    assert ("shufflevector" in ir and "insertelement" not in ir) == shuffled, case


def test_a_row_no_vector_divides_keeps_its_gather():
    ir, out, data = _gather(17, lambda k: (k // 4) * 4)  # row p starts at 17p: no aligned block
    np.testing.assert_array_equal(out, data[:, [(lane // 4) * 4 for lane in range(16)]])
    assert "insertelement" in ir


def test_an_index_through_a_cast_is_taken_apart_lane_by_lane():
    buf = tirx.decl_buffer((64,), "float32", name="x")
    p = tirx.Var("p", "int64")
    lanes = tirx.Cast("int64x16", tirx.Ramp(0, 1, 16) // 4 * 4)  # an int32 lane pattern widened
    shuffled = shuffled_load(tirx.BufferLoad(buf, [tirx.Broadcast(p * 16, 16) + lanes]), Analyzer())
    assert [int(i) for i in shuffled.indices] == [k // 4 * 4 for k in range(16)]
