"""graphtune.latency: interleaved rounds and settling before each timed call."""

import os
import time

import numpy as np
import pytest

from graphtune.latency import cpu_seconds, interleaved, median_ms, settled_call_ms, wait_idle

pytestmark = pytest.mark.serial  # times processes against each other: never beside another test


def _counter(sleep_s: float = 0.0):
    calls = []

    def call():
        calls.append(time.perf_counter())
        if sleep_s:
            time.sleep(sleep_s)

    return call, calls


def test_settling_lasts_at_least_settle_ms_and_settle_calls():
    call, calls = _counter(sleep_s=0.001)
    settled_call_ms(call, settle=2, settle_ms=30.0)
    # the settle calls span >= 30 ms before the timed (last) call starts
    assert calls[-1] - calls[0] >= 0.030
    assert len(calls) >= 3

    call, calls = _counter()
    settled_call_ms(call, settle=5, settle_ms=0.0)
    assert len(calls) == 6  # 5 untimed + 1 timed: the count holds when time is no bound


def test_interleaved_times_every_runtime_every_round_after_settling():
    a, a_calls = _counter()
    b, b_calls = _counter()
    samples = interleaved({"a": a, "b": b}, repeat=4, warmup=1, settle=1, settle_ms=0.0)
    assert {k: len(v) for k, v in samples.items()} == {"a": 4, "b": 4}
    assert len(a_calls) == len(b_calls) == (4 + 1) * 2
    assert set(median_ms(samples)) == {"a", "b"} and all(np.isfinite(list(median_ms(samples).values())))


@pytest.mark.parametrize("bad", [dict(repeat=0), dict(settle=-1), dict(settle_ms=-1.0)])
def test_interleaved_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="repeat must be"):
        interleaved({"a": lambda: None}, **bad)


def _spinning_process(seconds: float):
    """A process spinning for ``seconds`` once started; returns it and the wall-clock time
    (``time.time()``) it stops at, read after it started (its interpreter's start-up, slow on
    a loaded host, is not spinning)."""
    import subprocess
    import sys

    code = (f"import time\nend = time.time() + {seconds!r}\nprint(end, flush=True)\n"
            "while time.time() < end:\n    pass\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    return process, float(process.stdout.readline())


def test_wait_idle_waits_for_a_spinning_thread_of_this_process():
    import threading

    end = time.perf_counter() + 0.3

    def spin():
        while time.perf_counter() < end:
            pass

    thread = threading.Thread(target=spin)
    thread.start()
    wait_idle([None], timeout_ms=3000)
    returned = time.perf_counter()
    thread.join()
    assert returned >= end  # not while the thread spun


@pytest.mark.skipif(cpu_seconds(os.getpid()) is None, reason="no /proc/PID/task/*/schedstat here")
def test_a_runtime_waits_until_the_other_runtimes_processes_are_idle():
    """TVM's workers spin ~150 ms after a parallel call, ONNX Runtime's ~40 ms: a runtime timed
    meanwhile in another process shares the CPUs with them."""
    busy, end = _spinning_process(0.4)
    try:
        class Peer:  # a runtime in the busy process (times nothing itself)
            pid = busy.pid

            def timed(self, settle, settle_ms):
                return 0.0

        called = []
        interleaved({"gt": lambda: called.append(time.time()), "peer": Peer()}, repeat=1,
                    warmup=0, settle=0, settle_ms=0.0)
        assert called[0] >= end  # "gt" ran once the peer's process had stopped spinning
    finally:
        busy.wait()
