"""RPCRunner on loopback: a real TVM RPC tracker and two servers on 127.0.0.1 (free ports).

Every process a test starts belongs to a :class:`LoopbackFleet` whose fixture
stops it on teardown, also when the test fails.
"""

import json
import math
import os
import signal

import pytest

import graphtune.x86 as x86
from graphtune.errors import MeasureError
from graphtune.measure import Records, RPCRunner, Task, measure
from loopback import LoopbackFleet, free_port  # benchmarks/loopback.py

pytestmark = pytest.mark.serial  # RPC servers with session timeouts: never beside another test

FAST = {"min_repeat_ms": 5, "repeat": 2, "progress": False}
WL = x86.conv2d_workload([1, 16, 8, 8], [16, 16, 3, 3], padding=[1, 1, 1, 1])
CONVS = [Task("conv2d", WL, knobs) for knobs in x86.candidates(WL, max_candidates=3)]
TRANSFORMS = [Task("transform", {"shape": [1, 16, 8, 8], "src": src, "dst": dst,
                                 "dtype": "float32"})
              for src, dst in [("NCHW", "NCHW16c"), ("NCHW16c", "NCHW8c"), ("NCHW8c", "NCHW")]]
TASKS = CONVS + TRANSFORMS


def _fleet(request, n_servers):
    fleet = LoopbackFleet(n_servers=n_servers, key="gt-test")
    request.addfinalizer(fleet.stop)  # runs even if start() or the test fails
    return fleet.start()


@pytest.fixture(scope="module")
def fleet(request):
    """Tracker + 2 servers shared by the tests that do not harm them."""
    return _fleet(request, 2)


@pytest.fixture
def own_fleet(request):
    """Tracker + 2 servers for a test that kills or stops one of them."""
    return _fleet(request, 2)


def _sessions_served(fleet, index):
    with open(os.path.join(fleet.log_dir, f"server{index}.log"), errors="replace") as fh:
        return fh.read().count("start serving")


def test_measures_through_tracker_on_every_server(fleet, tmp_path):
    path = tmp_path / "rpc.records.jsonl"
    runner = RPCRunner(fleet.tracker, fleet.key)
    recs = measure(TASKS, records=path, runner=runner, **FAST)

    assert [r.task for r in recs] == TASKS
    for rec in recs:
        assert rec.ok, rec.error
        assert all(0 < ms < 1000 and math.isfinite(ms) for ms in rec.ms)
        assert rec.number >= 1
    remote = runner.describe_remote()
    target = runner.resolve_target()
    assert target.attrs["mcpu"] == remote["mcpu"]
    for rec in recs:  # keyed by the remote target, apart from local records
        assert rec.target["rpc_key"] == fleet.key
        assert rec.target["mcpu"] == remote["mcpu"]
        assert rec.target["threads"] == rec.threads == remote["threads"]
    assert {rec.timing for rec in recs} == {runner.timing} == {"cold-output"}  # output flushed too
    saved = Records.load(path)
    assert all(saved.get(t, runner.target_key(target), runner.timing) is not None for t in TASKS)
    assert all(saved.get(t, target, runner.timing) is None for t in TASKS)  # a local lookup: none
    assert _sessions_served(fleet, 0) >= 1 and _sessions_served(fleet, 1) >= 1

    lines = path.read_text().splitlines()
    again = measure(TASKS, records=path, runner=runner, **FAST)  # resumes: nothing new
    assert again == recs and path.read_text().splitlines() == lines


def test_user_target_is_cross_compiled_and_keyed(fleet):
    runner = RPCRunner(fleet.tracker, fleet.key, max_sessions=1, n_parallel=1, build_ahead=False,
                       target={"kind": "llvm", "mcpu": "haswell", "num-cores": 2})
    recs = measure(TRANSFORMS, runner=runner, **FAST)
    assert [r.task for r in recs] == TRANSFORMS
    for rec in recs:
        assert rec.ok, rec.error
        assert (rec.target["mcpu"], rec.target["vector_bits"]) == ("haswell", 256)


@pytest.mark.slow  # starts a fleet of its own
def test_server_killed_mid_run_loses_nothing(own_fleet, tmp_path):
    path = tmp_path / "kill.records.jsonl"
    runner = RPCRunner(own_fleet.tracker, own_fleet.key, retries=2)
    tasks = CONVS + TRANSFORMS + [Task("transform", {"shape": [1, 32, 8, 8], "src": "NCHW",
                                                     "dst": dst, "dtype": "float32"})
                                  for dst in ("NCHW8c", "NCHW16c", "NCHW32c")]
    target = runner.resolve_target()
    records = Records(path)
    results = runner.run(tasks, target, repeat=2, min_repeat_ms=50, timeout=60)
    try:
        for record in results:
            records.append(record)
            if len(records) == 1:
                own_fleet.kill_server(0)
    finally:
        results.close()

    saved = Records.load(path)
    assert len(saved) == len(tasks)
    key = runner.target_key(target)
    for task in tasks:
        rec = saved.get(task, key, runner.timing)
        assert rec is not None
        assert rec.ok or "failed" in rec.error
    assert sum(rec.ok for rec in saved) >= len(tasks) - 1
    assert [json.loads(line)["kind"] for line in path.read_text().splitlines()].count(
        "transform") == len(tasks) - len(CONVS)


@pytest.mark.slow  # ~30 s: a connect to the stopped server is given up after 15 s
def test_hung_server_costs_one_session_timeout(own_fleet):
    runner = RPCRunner(own_fleet.tracker, own_fleet.key, session_timeout=3, retries=1)
    target = runner.resolve_target()
    own_fleet.wait_free()  # both servers granted from now on, the stopped one too
    os.killpg(own_fleet.servers[0].pid, signal.SIGSTOP)  # alive for the tracker, never answers
    recs = list(runner.run(TRANSFORMS, target, repeat=2, min_repeat_ms=5, timeout=30))
    assert sorted(r.task.key for r in recs) == sorted(t.key for t in TRANSFORMS)
    assert all(r.ok for r in recs), [r.error for r in recs]
    with pytest.raises(TimeoutError):  # the stopped server was handed out, and never came back
        own_fleet.wait_free(timeout=3)


def test_unreachable_tracker_names_tracker_and_key():
    tracker = f"127.0.0.1:{free_port()}"
    with pytest.raises(MeasureError, match=rf"cannot reach the RPC tracker at {tracker} "
                                           r"\(key 'x86'\)"):
        measure(TRANSFORMS, runner=RPCRunner(tracker, "x86"), **FAST)


def test_unknown_key_and_bad_address(fleet):
    with pytest.raises(MeasureError, match=rf"no RPC server is registered under key 'nope' at "
                                           rf"tracker {fleet.tracker} \(keys there: gt-test\)"):
        RPCRunner(fleet.tracker, "nope").resolve_target()
    with pytest.raises(MeasureError, match="must be 'host:port'"):
        RPCRunner("localhost", "x86").resolve_target()
