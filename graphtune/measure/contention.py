"""How much of this process's CPUs other work took while something was timed (*contention*).

A timing is only as good as the CPUs were the timed code's alone. Linux accounts, per thread,
the time a runnable thread waited for a CPU (``/proc/self/task/*/schedstat``, second field, in
ns: another process ran there) and, per CPU, the time the hypervisor ran something else while
this guest wanted it (``steal`` in ``/proc/stat``, in clock ticks: a neighbour on a shared
cloud host). Over a timed window, their sum over (window x the CPUs this process may use) is
the contention: about 0 on an otherwise idle machine, a third to a half while one other
process keeps one of two CPUs busy, when kernels time 2-4x slower than alone
(``docs/timing.md``, "Contention").

:func:`timed_alone` runs a timing and takes it again, after a pause, while it was contended;
the timing worker of :class:`~graphtune.measure.LocalRunner` times every task through it and
its records keep the contention (:attr:`graphtune.measure.Record.contention`).

Examples
--------
>>> before = read()
>>> _ = sum(range(10 ** 5))
>>> share(before, read()) is None or 0 <= share(before, read()) < 1
True
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable

from ..errors import MeasureError

__all__ = ["LIMIT", "RETRIES_ENV", "Reading", "disturbed", "read", "retakes", "share", "timed_alone"]

LIMIT = 0.05
"""Contention above which a timing counts as disturbed (idle machines read 0-0.4%; one busy
process on a two-CPU guest 30-50%)."""

PAUSES_S = (0.25, 0.5, 1.0)
"""Seconds waited before each retake of a disturbed timing (their count: the retakes)."""

RETRIES_ENV = "GRAPHTUNE_CONTENTION_RETRIES"
"""Environment variable capping the retakes of a disturbed timing (default
``len(PAUSES_S)``). ``0`` only records the contention: no retake, no second timing at the end
of :func:`~graphtune.measure.measure`, no warning (the test suite's parallel workers, which
contend with each other by design)."""


@dataclass(frozen=True)
class Reading:
    """The counters at one moment: ``wall`` (s, ``time.perf_counter``), ``waited`` (s this
    process's threads waited for a CPU), ``stolen`` (s the hypervisor took from its CPUs)."""

    wall: float
    waited: float
    stolen: float


def _waited_seconds() -> float:
    total = 0
    for thread in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{thread}/schedstat") as stat:
                total += int(stat.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def _stolen_seconds(cpus: set[int]) -> float:
    ticks = 0
    with open("/proc/stat") as stat:
        for line in stat:
            fields = line.split()
            if not fields or not fields[0].startswith("cpu") or fields[0] == "cpu":
                continue
            if int(fields[0][3:]) in cpus and len(fields) > 8:
                ticks += int(fields[8])
    return ticks / os.sysconf("SC_CLK_TCK")


def read() -> Reading | None:
    """The counters now, or None where Linux does not provide them (another OS, no schedstat).

    Examples
    --------
    >>> r = read()
    >>> r is None or (r.waited >= 0 and r.stolen >= 0)
    True
    """
    try:
        return Reading(time.perf_counter(), _waited_seconds(),
                       _stolen_seconds(os.sched_getaffinity(0)))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def share(before: Reading | None, after: Reading | None) -> float | None:
    """Contention between two readings: the CPU time other work took from this process, over the
    window times the CPUs it may use (0 when nothing did); None if either reading is missing.

    Examples
    --------
    >>> import os
    >>> cpus = len(os.sched_getaffinity(0))
    >>> round(share(Reading(0.0, 1.0, 0.0), Reading(1.0, 1.0 + 0.5 * cpus, 0.0)), 3)
    0.5
    >>> share(None, Reading(1.0, 0.0, 0.0)) is None
    True
    """
    if before is None or after is None or after.wall <= before.wall:
        return None
    taken = max(0.0, after.waited - before.waited) + max(0.0, after.stolen - before.stolen)
    return taken / ((after.wall - before.wall) * len(os.sched_getaffinity(0)))


def disturbed(contention: float | None) -> bool:
    """Whether a timing with this :func:`share` was disturbed: above :data:`LIMIT` (unknown: no).

    Examples
    --------
    >>> disturbed(0.3), disturbed(0.01), disturbed(None)
    (True, False, False)
    """
    return contention is not None and contention > LIMIT


def retakes() -> int:
    """The most retakes of one disturbed timing: :data:`RETRIES_ENV`, else one per pause.

    Examples
    --------
    >>> 0 <= retakes() <= len(PAUSES_S)
    True
    """
    text = os.environ.get(RETRIES_ENV, "").strip()
    if not text:
        return len(PAUSES_S)
    try:
        return max(0, min(int(text), len(PAUSES_S)))
    except ValueError:
        raise MeasureError(f"{RETRIES_ENV}={text!r} must be a whole number of retakes "
                           f"(0 to {len(PAUSES_S)}); unset it for the default") from None


_streak = [0]  # timings in a row that stayed disturbed after every retake


def timed_alone(time_it: Callable[[], dict]) -> dict:
    """Run ``time_it`` (a timing returning a dict) and take it again after a pause
    (:data:`PAUSES_S`) while other work took more than :data:`LIMIT` of the CPUs meanwhile;
    return the least disturbed result, with ``"contention"`` (its :func:`share`, None where
    unknown) and ``"retakes"`` (how many times it was taken again) added.

    Under lasting load (the previous timing stayed disturbed through all its retakes) it
    does not retake, so a busy machine costs one timing's pauses, not every timing's; the
    environment variable :data:`RETRIES_ENV` caps the retakes.

    Examples
    --------
    >>> out = timed_alone(lambda: {"ms": [1.0]})
    >>> out["ms"], out["retakes"] >= 0, out["contention"] is None or out["contention"] >= 0
    ([1.0], True, True)
    """
    most = 0 if _streak[0] else retakes()
    best: dict | None = None
    for attempt in range(most + 1):
        if attempt:
            time.sleep(PAUSES_S[attempt - 1])
        before = read()
        result = time_it()
        result["contention"] = share(before, read())
        if best is None or (result["contention"] or 0.0) < (best["contention"] or 0.0):
            best = result
        if not disturbed(result["contention"]):
            break
    assert best is not None
    _streak[0] = _streak[0] + 1 if disturbed(best["contention"]) else 0
    return {**best, "retakes": attempt}
