"""The timing protocol (written-input, filled-cache for memory-bound tasks): data input rewritten,
weights flushed, last-level cache filled first for memory-bound tasks, wall-time-bounded repeats,
early cut-off after two trial calls, superseded records, old protocol tags (flush-v1 ... flush-v5)
read as the protocols they name."""

import dataclasses
import json
import math

import pytest

import graphtune.x86 as x86
from graphtune.errors import MeasureError
from graphtune.measure import LocalRunner, Records, Task, measure
from graphtune.measure.task import PROTOCOL_RENAMES, TIMING
from graphtune.measure.timing import PROTOCOLS, time_module

pytestmark = pytest.mark.serial  # a slow candidate is cut off against a fast one: never beside other tests

CONV = x86.conv2d_workload([1, 16, 10, 10], [32, 16, 3, 3], padding=[1, 1, 1, 1])
FAST_KNOBS = {"ic_bn": 16, "oc_bn": 16, "reg_n": 5, "unroll_kw": True}
SLOW_KNOBS = {"ic_bn": 16, "oc_bn": 16, "reg_n": 2, "unroll_kw": True}  # same layout pair
OTHER_PAIR = {"ic_bn": 16, "oc_bn": 32, "reg_n": 2, "unroll_kw": True}


def sleepy_func(task, target):
    """A stand-in kernel: ``reg_n == 2`` sleeps 2 ms per call, any other knobs return at once."""
    from tvm import te, tirx

    x = te.placeholder([4], name="x")
    if task.knobs["reg_n"] == 2:
        y = te.compute([4], lambda i: x[i] + tirx.call_extern("int32", "usleep", 500)
                       .astype("float32"), name="y")
    else:
        y = te.compute([4], lambda i: x[i] * 2.0, name="y")
    return te.create_prim_func([x, y])


def full_repeats(protocol: str) -> set[int]:
    """Repeat counts of a timing measured in full: ``repeat``, plus the protocol's extra repeats
    when the first ones disagree (a 4-float kernel's calls often do)."""
    return {3, 3 + PROTOCOLS[protocol].extra_repeats}


def run(tasks, timing=TIMING):
    return measure(tasks, runner=LocalRunner(n_parallel=1, func_of=sleepy_func, timing=timing),
                   min_repeat_ms=5, repeat=3, progress=False)


def test_clearly_slower_candidate_of_the_same_layout_pair_is_cut_off_after_its_trial_calls():
    fast, slow = run([Task("conv2d", CONV, FAST_KNOBS), Task("conv2d", CONV, SLOW_KNOBS)])
    assert fast.ok and fast.cutoff_ms is None and len(fast.ms) in full_repeats(TIMING)
    assert slow.ok and slow.cutoff_ms == pytest.approx(PROTOCOLS[TIMING].cutoff * fast.median_ms)
    assert len(slow.ms) == 2 and slow.number == 1  # the two trial calls only
    assert slow.median_ms > slow.cutoff_ms > fast.median_ms  # it can never be its pair's best
    assert slow.timing == TIMING == "written-input"


def test_no_cut_off_across_layout_pairs_before_a_best_or_with_long_repeats():
    first_slow = run([Task("conv2d", CONV, SLOW_KNOBS), Task("conv2d", CONV, FAST_KNOBS)])
    other_pair = run([Task("conv2d", CONV, FAST_KNOBS), Task("conv2d", CONV, OTHER_PAIR)])
    old = run([Task("conv2d", CONV, FAST_KNOBS), Task("conv2d", CONV, SLOW_KNOBS)], "long-repeats")
    for records in (first_slow, other_pair, old):  # measured in full: every repeat, no cut-off
        assert all(r.ok and r.cutoff_ms is None and len(r.ms) in full_repeats(r.timing)
                   for r in records)
    assert {r.timing for r in old} == {"long-repeats"}


def test_calls_per_repeat_come_from_the_wall_time_of_a_flushed_call():
    """A kernel touching 16 floats next to a 64 MB argument: the count of calls per repeat is
    derived from the wall time of a flushed call (flush included), not from the kernel time
    (long-repeats' rule, which chose thousands here). Checks the rule, not a speed."""
    import tvm
    from tvm import te

    from graphtune.measure.timing import random_array

    x = te.placeholder([16], name="x")
    w = te.placeholder([1 << 24], name="w")
    y = te.compute([16], lambda i: x[i] * 2.0 + w[i], name="y")
    func = te.create_prim_func([x, w, y]).with_attr("global_symbol", "main")
    module = tvm.compile(func, target={"kind": "llvm"}).jit()
    dev = tvm.cpu(0)
    args = [tvm.runtime.tensor(random_array(s, "float32"), dev) for s in ([16], [1 << 24], [16])]
    out = time_module(module, dev, args, repeat=3, min_repeat_ms=20)
    assert out["number"] == max(1, math.ceil(20 / out["wall_ms"]))
    assert len(out["ms"]) >= 3 and out["cutoff_ms"] is None


def test_unknown_protocol_is_a_clear_error():
    with pytest.raises(MeasureError, match="unknown timing protocol 'hot'; known: long-repeats"):
        LocalRunner(timing="hot")


def test_records_of_older_protocols_are_superseded_and_measured_again(tmp_path):
    task = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW8c",
                              "dtype": "float32"})
    path = tmp_path / "old.records.jsonl"
    [fresh] = measure([task], records=path, min_repeat_ms=2, progress=False)
    old = dataclasses.replace(fresh, timing="cold-output", ms=[123.0], median_ms=123.0)
    path.write_text(old.to_json() + "\n")  # a file written by the old protocol only
    assert Records.load(path).get(task) is None  # never reused
    [again] = measure([task], records=path, min_repeat_ms=2, progress=False)
    assert again.timing == "filled-cache" and again.median_ms != 123.0  # a memory-bound task
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["timing"] for line in lines] == ["cold-output", "filled-cache"]
    assert Records.load(path).get(task).median_ms == again.median_ms
    assert Records.load(path).get(task, timing="cold-output").median_ms == 123.0  # kept, per protocol
    # a runner timing with cold-output (as RPCRunner does) finds its own records
    [v2] = measure([task], records=path, runner=LocalRunner(timing="cold-output"), progress=False)
    assert v2.median_ms == 123.0


def test_records_with_old_protocol_tags_are_read_and_matched_as_the_protocols_they_name(tmp_path):
    """A records file written before the protocols were renamed: its flush-v5 (memory-bound) and
    flush-v4 (compute-bound) records are the current protocols' and are reused, not re-measured."""
    transform = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW8c",
                                   "dtype": "float32"})
    conv = Task("conv2d", CONV, FAST_KNOBS)
    path = tmp_path / "old.records.jsonl"
    fresh = measure([transform, conv], records=path, min_repeat_ms=2, progress=False)
    tags = {"filled-cache": "flush-v5", "written-input": "flush-v4"}
    old = [dataclasses.replace(r, timing=tags[r.timing], ms=[7.0], median_ms=7.0) for r in fresh]
    path.write_text("".join(r.to_json() + "\n" for r in old))
    saved = Records.load(path)
    assert [saved.get(t).median_ms for t in (transform, conv)] == [7.0, 7.0]
    assert saved.get(conv, timing="flush-v4") == saved.get(conv, timing="written-input")
    again = measure([transform, conv], records=path, min_repeat_ms=2, progress=False)
    assert [r.median_ms for r in again] == [7.0, 7.0]  # reused: nothing measured
    assert len(path.read_text().splitlines()) == 2
    assert set(PROTOCOL_RENAMES.values()) == set(PROTOCOLS)


def test_hot_input_leaves_the_output_in_cache_cold_output_flushes_it():
    """A kernel writing 16 floats of a 64 MB output: flushing the output dominates a cold-output
    call; hot-input (and written-input) flush only the weights (none here). The margin is ~100x,
    not a speed bound."""
    import tvm
    from tvm.script import tirx as T

    from graphtune.measure.timing import random_array

    @T.prim_func
    def main(x: T.Buffer((16,), "float32"), y: T.Buffer((1 << 24,), "float32")):
        for i in range(16):
            y[i] = x[i] * T.float32(2)

    module = tvm.compile(main, target={"kind": "llvm"}).jit()
    dev = tvm.cpu(0)
    args = [tvm.runtime.tensor(random_array(s, "float32"), dev) for s in ([16], [1 << 24])]
    walls = {t: time_module(module, dev, args, repeat=3, min_repeat_ms=5, timing=t)["wall_ms"]
             for t in ("cold-output", "hot-input")}
    assert walls["cold-output"] > 10 * walls["hot-input"]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_written_input_rewrites_the_data_input_with_its_own_values_before_every_call(dtype):
    """A kernel that increments its own input in place: under written-input every call starts from
    the original values again (one increment seen at the end), under hot-input the increments add
    up."""
    import numpy as np
    import tvm
    from tvm.script import tirx as T

    from graphtune.measure.timing import random_array

    @T.prim_func
    def main(x: T.Buffer((3, 5, 7), dtype), y: T.Buffer((4,), dtype)):
        for i, j, k in T.grid(3, 5, 7):
            x[i, j, k] = x[i, j, k] + T.Cast(dtype, 1)
        for i in range(4):
            y[i] = x[0, 0, i]

    module = tvm.compile(main, target={"kind": "llvm"}).jit()
    dev = tvm.cpu(0)
    for timing, calls_seen in (("written-input", 1), ("hot-input", None)):
        start = random_array([3, 5, 7], dtype)
        args = [tvm.runtime.tensor(start, dev), tvm.runtime.tensor(np.zeros(4, dtype), dev)]
        out = time_module(module, dev, args, repeat=3, min_repeat_ms=1, timing=timing)
        increments = np.rint(args[0].numpy() - start)  # float sums round off after many calls
        assert (increments == increments.flat[0]).all()
        if calls_seen is None:  # warm-up, two trial calls and every timed call, never restored
            assert increments.flat[0] >= 3 + 3 * out["number"]
        else:
            assert increments.flat[0] == calls_seen


def test_memory_bound_tasks_are_timed_and_recorded_with_filled_cache_compute_bound_with_written_input(
        tmp_path):
    from graphtune.measure.timing import memory_bound, task_protocol

    transform = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW8c",
                                   "dtype": "float32"})
    depthwise = Task("depthwise_conv2d", x86.conv2d_workload([1, 16, 6, 6], [16, 1, 3, 3],
                                                             padding=[1, 1, 1, 1], groups=16),
                     {"bn": 16, "reg_n": 6})
    conv = Task("conv2d", CONV, FAST_KNOBS)
    pool = Task("segment", {"ops": "max_pool2d", "args": [], "sha": "0"})
    fused = Task("segment", {"ops": "conv2d", "args": [], "sha": "0"})
    assert [memory_bound(t) for t in (transform, depthwise, conv, pool, fused)] == \
        [True, True, False, True, False]
    assert [task_protocol(t) for t in (transform, conv)] == ["filled-cache", "written-input"]
    assert task_protocol(transform, "cold-output") == "cold-output"  # RPC: one protocol for all
    path = tmp_path / "r.records.jsonl"
    records = measure([transform, depthwise, conv], records=path, min_repeat_ms=2, progress=False)
    assert [r.ok for r in records] == [True] * 3
    assert [r.timing for r in records] == ["filled-cache", "filled-cache", "written-input"]
    saved = Records.load(path)
    assert all(saved.get(t) == r for t, r in zip((transform, depthwise, conv), records))
    assert saved.get(transform, timing="filled-cache") == records[0]


def test_filled_cache_fills_the_last_level_cache_before_every_call_written_input_does_not():
    """The pollution copy's target starts as zeros and holds the source once filled-cache has run."""
    import numpy as np
    import tvm
    from tvm.script import tirx as T

    from graphtune.measure import timing
    from graphtune.measure.timing import MAX_POLLUTION_BYTES, last_level_cache_bytes, random_array

    @T.prim_func
    def main(x: T.Buffer((16,), "float32"), y: T.Buffer((16,), "float32")):
        for i in range(16):
            y[i] = x[i] * T.float32(2)

    timing._POLLUTERS.clear()
    module = tvm.compile(main, target={"kind": "llvm"}).jit()
    dev = tvm.cpu(0)
    args = [tvm.runtime.tensor(random_array([16], "float32"), dev) for _ in range(2)]
    time_module(module, dev, args, repeat=3, min_repeat_ms=1, timing="written-input")
    assert not timing._POLLUTERS
    time_module(module, dev, args, repeat=3, min_repeat_ms=1, timing="filled-cache")
    [(size, (source, target))] = timing._POLLUTERS.items()
    assert size == min(last_level_cache_bytes(), MAX_POLLUTION_BYTES) // 2
    assert source.numpy().nbytes == size and np.array_equal(target.numpy(), source.numpy())

