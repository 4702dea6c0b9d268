"""Timings taken while other work holds the CPUs are measured as such (contention), taken again
after a pause, recorded, reported, and kept out of the closed loop's profiles."""

import json
import os
import subprocess
import sys
import time
import warnings

import pytest

from graphtune import feedback, profiling
from graphtune.errors import MeasureError
from graphtune.measure import LocalRunner, Task, contention, measure

pytestmark = pytest.mark.serial  # other processes are started to hold the CPUs

CPUS = len(os.sched_getaffinity(0))
TRANSFORM = Task("transform", {"shape": [1, 64, 28, 28], "src": "NCHW", "dst": "NCHW8c",
                               "dtype": "float32"})


class Hogs:
    """One busy process per usable CPU for ``seconds`` (they end by themselves)."""

    def __init__(self, seconds: float) -> None:
        loop = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"
        self.procs = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(CPUS)]
        time.sleep(0.05)  # running before the timing starts

    def __enter__(self) -> "Hogs":
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def busy_timing(seconds: float = 0.2) -> dict:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return {"ms": [seconds * 1e3]}


@pytest.fixture(autouse=True)
def fresh_streak(monkeypatch):
    monkeypatch.setattr(contention, "_streak", [0])
    monkeypatch.delenv(contention.RETRIES_ENV, raising=False)


@pytest.mark.unit
def test_share_is_other_work_over_window_and_cpus():
    before = contention.Reading(wall=10.0, waited=1.0, stolen=2.0)
    after = contention.Reading(wall=12.0, waited=1.0 + 0.5 * CPUS, stolen=2.0 + 0.5 * CPUS)
    assert contention.share(before, after) == pytest.approx(0.5)
    # counters that went back (a thread that ended) count nothing; no reading, no figure
    assert contention.share(after, contention.Reading(13.0, 0.0, 0.0)) == 0.0
    assert contention.share(None, after) is None and contention.share(after, before) is None


@pytest.mark.unit
def test_bad_retakes_variable_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(contention.RETRIES_ENV, "many")
    with pytest.raises(MeasureError, match="GRAPHTUNE_CONTENTION_RETRIES='many' must be a whole number"):
        measure([TRANSFORM], progress=False)


def test_an_idle_machine_reads_no_contention():
    out = contention.timed_alone(busy_timing)
    assert out["retakes"] == 0 and out["contention"] is not None and out["contention"] <= contention.LIMIT


def test_a_timing_while_every_cpu_is_busy_is_retaken_then_kept_with_its_contention():
    with Hogs(30):
        out = contention.timed_alone(busy_timing)
        assert out["retakes"] == len(contention.PAUSES_S)
        assert out["contention"] > contention.LIMIT
        # the load lasts: the next timing is not retaken (one timing's pauses, not every one's)
        assert contention.timed_alone(busy_timing)["retakes"] == 0
    assert contention.timed_alone(busy_timing)["contention"] <= contention.LIMIT  # alone again


def test_a_timing_disturbed_by_a_short_burst_is_taken_again_alone():
    with Hogs(0.3):
        out = contention.timed_alone(busy_timing)
    assert 1 <= out["retakes"] <= len(contention.PAUSES_S) and out["contention"] <= contention.LIMIT


def test_retakes_zero_records_without_retaking(monkeypatch):
    monkeypatch.setenv(contention.RETRIES_ENV, "0")
    with Hogs(30):
        out = contention.timed_alone(busy_timing)
    assert out["retakes"] == 0 and out["contention"] > contention.LIMIT


def test_measure_records_contention_and_warns_when_load_outlasts_every_retake(tmp_path):
    path = tmp_path / "r.records.jsonl"
    with Hogs(60), pytest.warns(UserWarning, match=r"1 timing\(s\) ran while other work took up to"):
        [record] = measure([TRANSFORM], records=path, runner=LocalRunner(n_parallel=1), progress=False)
    assert record.ok and record.contention > contention.LIMIT
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[-1]["contention"] == record.contention
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # alone: nothing to warn about, and the record says so
        [again] = measure([Task("transform", {**TRANSFORM.workload, "dst": "NCHW16c"})],
                          runner=LocalRunner(n_parallel=1), progress=False)
    assert again.contention is not None and again.contention <= contention.LIMIT


def test_a_profile_taken_while_other_work_holds_the_cpus_is_taken_again():
    hogs = [Hogs(30)]

    def profile():
        busy_timing(0.3)
        if hogs:
            hogs.pop().__exit__()  # the first profile ran beside them; the next one alone
        return profiling.CallTimes({}, {}, [], 1.0)

    _, state, taken = feedback.profile_in_shared_state(profile, host_ratio=None)
    assert (state, taken) == ("shared", 2)
