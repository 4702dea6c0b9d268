"""measure(): isolation of failures, resume, Ctrl-C, on tiny TE kernels built in this file.

The kernels here are deliberately trivial (y = 2 * x) so that the tests are about
the engine: builds that raise, crash or hang, kernels that crash or hang when
run, records written as results finish, and resuming from them.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from graphtune.errors import KnobError, MeasureError
from graphtune.measure import LocalRunner, Records, Task, measure
from graphtune.measure.runner import Stage
from graphtune.procs import Cause, Child, ChildFailure, ChildPool, Mode

pytestmark = pytest.mark.serial  # worker pools with timeouts: never beside another test

FAST = {"min_repeat_ms": 2, "repeat": 2, "progress": False}


def tiny_func(task, target):
    """y = 2 * x over ``workload["shape"]``; ``knobs["mode"]`` asks for a failure, and a build
    with ``knobs["gate"]`` (a path) waits until that file exists."""
    from tvm import te, tirx

    if "gate" in task.knobs:
        pathlib.Path(task.knobs["gate"] + ".waiting").touch()  # the build has started
    while "gate" in task.knobs and not os.path.exists(task.knobs["gate"]):
        time.sleep(0.01)
    mode = task.knobs.get("mode", "ok")
    if mode == "raise":
        raise KnobError("mode=raise: knobs rejected before building")
    if mode == "crash_build":
        os.abort()
    if mode == "hang_build":
        time.sleep(3600)
    shape = task.workload["shape"]
    x = te.placeholder(shape, name="x")
    if mode == "crash_run":
        y = te.compute(shape, lambda *i: x(*i) + tirx.call_extern("float32", "abort"), name="y")
    elif mode == "hang_run":
        y = te.compute(shape, lambda *i: x(*i) + tirx.call_extern("int32", "sleep", 3600)
                       .astype("float32"), name="y")
    else:
        y = te.compute(shape, lambda *i: x(*i) * 2.0, name="y")
    return te.create_prim_func([x, y])


def task(c=16, mode="ok", size=8, gate=None):
    return Task("transform", {"shape": [1, c, size, size], "src": "NCHW", "dst": "NCHW",
                              "dtype": "float32"}, {"mode": mode} | ({"gate": gate} if gate else {}))


def runner(**kw):
    return LocalRunner(func_of=tiny_func, **kw)


def test_measures_and_writes_one_line_per_task(tmp_path):
    path = tmp_path / "t.records.jsonl"
    tasks = [task(c) for c in (8, 16, 24)]
    out = measure(tasks + [tasks[0]], records=path, runner=runner(n_parallel=2), **FAST)
    assert [r.task for r in out] == tasks + [tasks[0]]
    assert all(r.ok and len(r.ms) >= 2 and r.median_ms > 0 for r in out)
    assert all(r.threads >= 1 and r.number >= 1 for r in out)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert len(lines) == 3  # the duplicate task is measured once
    assert {line["knobs"]["mode"] for line in lines} == {"ok"}
    assert all(line["target"]["mcpu"] and line["error"] is None for line in lines)


def test_failures_become_error_records(tmp_path):
    path = tmp_path / "t.records.jsonl"
    tasks = [task(8), task(8, "raise"), task(8, "crash_build"), task(8, "hang_build"),
             task(16), task(8, "crash_run"), task(8, "hang_run"), task(24)]
    out = measure(tasks, records=path, runner=runner(n_parallel=2), timeout=5, **FAST)
    errors = {r.knobs["mode"]: r.error for r in out if not r.ok}
    assert [r.ok for r in out] == [True, False, False, False, True, False, False, True]
    assert errors["raise"].startswith("build: KnobError: mode=raise")
    assert errors["crash_build"] == "build: worker crashed (killed by signal SIGABRT)"
    assert errors["hang_build"] == "build: timed out after 5 s (worker killed)"
    assert errors["crash_run"] == "run: worker crashed (killed by signal SIGABRT)"
    assert errors["hang_run"] == "run: timed out after 5 s (worker killed)"
    assert len(path.read_text().splitlines()) == len(tasks)

    # A rerun reads every result back, errors included, and measures nothing.
    again = measure(tasks, records=path, runner=runner(), **FAST)
    assert again == out
    assert len(path.read_text().splitlines()) == len(tasks)


def test_retry_errors_measures_failed_tasks_again(tmp_path):
    path = tmp_path / "t.records.jsonl"
    measure([task(8, "raise")], records=path, runner=runner(n_parallel=1), **FAST)
    [again] = measure([task(8, "raise")], records=path, runner=runner(n_parallel=1),
                      retry_errors=True, **FAST)
    assert not again.ok
    assert len(path.read_text().splitlines()) == 2


def test_resume_after_partial_run(tmp_path):
    path = tmp_path / "t.records.jsonl"
    tasks = [task(c) for c in (8, 16, 24, 32)]
    first = measure(tasks[:2], records=path, runner=runner(n_parallel=1), **FAST)
    before = path.read_text()
    out = measure(tasks, records=path, runner=runner(n_parallel=1), **FAST)
    assert out[:2] == first  # read back, not re-measured
    assert path.read_text().startswith(before)
    assert len(path.read_text().splitlines()) == 4
    assert len(Records.load(path)) == 4


def ctrl_c_tasks(gate):
    """12 tasks; from the third on, each build waits until the file ``gate`` exists."""
    return [task(c, gate=gate if c > 16 else None) for c in range(8, 8 + 8 * 12, 8)]


def test_ctrl_c_keeps_finished_results_and_rerun_completes(tmp_path):
    """Ctrl-C while the third task waits for a gate that the test opens only afterwards: the
    two finished results are kept, however fast or slow the machine is. The Ctrl-C comes once
    the gated build runs (not while its worker starts)."""
    path, gate = tmp_path / "t.records.jsonl", str(tmp_path / "gate")
    script = textwrap.dedent(f"""
        import signal  # Ctrl-C as a user's shell delivers it, even if this test runs in a
        signal.signal(signal.SIGINT, signal.default_int_handler)  # background job (SIGINT ignored)
        from test_measure_engine import ctrl_c_tasks, runner
        from graphtune.measure import measure
        measure(ctrl_c_tasks({gate!r}), records={str(path)!r},
                runner=runner(n_parallel=1, batch_size=1), min_repeat_ms=2, repeat=2, progress=False)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and len(path.read_text().splitlines()) >= 2 and os.path.exists(gate + ".waiting"):
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1]  # still running: blocked at the gate
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert len(Records.load(path)) == 2
    pathlib.Path(gate).touch()
    tasks = ctrl_c_tasks(gate)
    out = measure(tasks, records=path, runner=runner(), **FAST)
    assert all(r.ok for r in out)
    assert len(path.read_text().splitlines()) == 12


def test_bad_arguments_raise():
    with pytest.raises(MeasureError, match=r"tasks\[1\] is a dict"):
        measure([task(), {"kind": "conv2d"}], progress=False)
    with pytest.raises(MeasureError, match="repeat must be an int >= 1"):
        measure([task()], repeat=0, progress=False)
    with pytest.raises(MeasureError, match="timeout must be > 0"):
        measure([task()], timeout=0, progress=False)


def test_child_reports_crash_and_recovers():
    with Child() as child:
        with pytest.raises(ChildFailure, match="crashed .*SIGABRT") as failure:
            child.call(os.abort, (), timeout=60)
        assert failure.value.cause is Cause.CRASHED
        assert child.call(sum, ([1, 2],), timeout=60) == 3


def test_child_hang_is_killed_and_names_the_stage():
    with Child() as child:
        with pytest.raises(ChildFailure) as failure:
            child.call(time.sleep, (60,), timeout=1, stage=Stage.RUN)
        assert str(failure.value) == "run: timed out after 1 s (worker killed)"
        assert (failure.value.cause, failure.value.stage) == (Cause.TIMED_OUT, Stage.RUN)
        assert child.call(abs, (-2,), timeout=60) == 2


def test_child_keeps_state_between_calls_until_restarted():
    with Child() as child:
        assert child.call(divmod, (7, 2), timeout=60, mode=Mode.KEEP) == 1  # keeps 3
        assert child.call(pow, (2,), timeout=60, mode=Mode.USE) == 9
        assert child.call(pow, (3,), timeout=60, mode=Mode.TAKE) == 27  # used once, dropped
        with pytest.raises(ChildFailure, match="needs the child's kept state"):
            child.call(pow, (2,), timeout=60, mode=Mode.USE)
        assert child.call(divmod, (7, 2), timeout=60, mode=Mode.KEEP) == 1
        with pytest.raises(ChildFailure, match="crashed"):
            child.call(os.abort, (), timeout=60)
        with pytest.raises(ChildFailure, match="RuntimeError: pow needs the child's kept state"):
            child.call(pow, (2,), timeout=60, mode=Mode.USE)


class Token:
    """An object a child keeps (Mode.KEEP); counts the live ones in that child."""

    alive = 0

    def __init__(self):
        Token.alive += 1

    def __del__(self):
        Token.alive -= 1


def keep_token():
    token = Token()
    return token, Token.alive


def tokens_alive(*kept):
    return Token.alive


def test_child_releases_what_it_no_longer_keeps():
    """An RPC session kept by a session process must end as soon as it is dropped."""
    with Child() as child:
        assert child.call(keep_token, (), timeout=60, mode=Mode.KEEP) == 1
        # the first token is released before the second is made
        assert child.call(keep_token, (), timeout=60, mode=Mode.KEEP) == 1
        assert child.call(tokens_alive, (), timeout=60) == 1
        assert child.call(tokens_alive, (), timeout=60, mode=Mode.TAKE) == 1  # in use
        assert child.call(tokens_alive, (), timeout=60) == 0  # released when TAKE returned


def test_pool_keeps_order_and_isolates_errors():
    with ChildPool(2) as pool:
        out = pool.map(divmod, [(7, 2), (1, 0), (9, 3)], timeout=60, stage=Stage.BUILD)
    assert out[0] == (True, (3, 1)) and out[2] == (True, (3, 0))
    assert out[1][0] is False and out[1][1].cause is Cause.RAISED
    assert str(out[1][1]).startswith("build: ZeroDivisionError")


def test_kept_workers_serve_several_runs_and_survive_crashes():
    with runner(n_parallel=1) as kept:
        first = measure([task(8), task(8, "crash_run")], runner=kept, **FAST)
        second = measure([task(16), task(8, "crash_build"), task(24)], runner=kept, **FAST)
    assert [r.ok for r in first + second] == [True, False, True, False, True]


def test_unpicklable_func_of_is_rejected():
    with pytest.raises(MeasureError, match="cannot be sent to a worker process"):
        measure([task()], runner=LocalRunner(func_of=lambda t, target: None), progress=False)
