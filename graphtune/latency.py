"""Side-by-side latency measurement of several runtimes in one run.

Absolute times drift by several percent on shared machines while ratios
measured in the same rounds stay steady, so :func:`interleaved` times every
runtime once per round, rotates their order each round, and returns every
sample; report medians and their ratios. The rules, each of which fixed an
error measured on the benchmark machines (``docs/timing.md``, "Whole models,
side by side"):

- each timed call is preceded by untimed calls of the same runtime
  (``settle``, at least 3 of them and at least ``settle_ms`` = 50 ms), which
  wake its thread pool and outlast the previous runtime's still-spinning
  threads; a runtime is never left idle long enough for its pool to go cold;
- a thread pool spinning in *another process* is not settled away, so before
  each runtime's turn the rounds wait until the other runtimes' processes are
  idle (:func:`wait_idle`);
- with a gauge (:func:`gauged_rounds`), the host state is read right before
  and after each runtime's turn, so samples can be grouped by it.

Examples
--------
>>> samples = interleaved({"a": lambda: sum(range(1000)), "b": lambda: None},
...                       repeat=5, warmup=1)
>>> sorted(samples), len(samples["a"])
(['a', 'b'], 5)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, Union, cast

import numpy as np

__all__ = ["SETTLE_CALLS", "SETTLE_MS", "cpu_seconds", "gauged_rounds", "interleaved", "median_ms",
           "settled_call_ms", "wait_idle"]

SETTLE_CALLS = 3
"""Fewest untimed calls before a timed one (:func:`settled_call_ms`)."""
SETTLE_MS = 50.0
"""Least time of untimed calls before a timed one: outlasts another runtime's spinning workers."""


class TimedTurn(Protocol):
    """A runtime in another process that times itself (a :class:`graphtune.peers.PeerProcess`)."""

    @property
    def pid(self) -> int | None: ...

    def timed(self, settle: int, settle_ms: float = ...) -> float: ...


Runtime = Union[Callable[[], object], TimedTurn]
"""What :func:`interleaved` times: a zero-argument call, or a :class:`TimedTurn`."""


def interleaved(calls: Mapping[str, Runtime], repeat: int = 30, warmup: int = 3,
                settle: int = SETTLE_CALLS, settle_ms: float = SETTLE_MS) -> dict[str, np.ndarray]:
    """Time each zero-argument call ``repeat`` times, interleaved; milliseconds per call.

    Parameters
    ----------
    calls : mapping of str to callable or PeerProcess
        Name -> a call running one inference on bound inputs, or an object
        with ``timed(settle, settle_ms) -> ms`` that times itself and the
        ``pid`` of its process (a :class:`graphtune.peers.PeerProcess`).
    repeat : int
        Timed rounds; each round calls every runtime once, in a rotated order.
    warmup : int
        Untimed rounds first (JIT, caches, thread pools).
    settle : int
        Untimed calls of the same runtime right before each timed call (at least).
    settle_ms : float
        ... and untimed calls until at least this much time has passed.

    Returns
    -------
    dict of str to numpy.ndarray
        ``repeat`` latencies in ms per name.

    Examples
    --------
    >>> median_ms(interleaved({"noop": lambda: None}, repeat=3, warmup=0))["noop"] < 1
    True
    """
    return gauged_rounds(calls, None, repeat, warmup, settle, settle_ms)[0]


def gauged_rounds(calls: Mapping[str, Runtime], gauge: Callable[[], float] | None,
                  repeat: int = 30, warmup: int = 3, settle: int = 3,
                  settle_ms: float = 50.0) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """:func:`interleaved`, reading ``gauge()`` right before and right after each timed turn.

    The gauge tells the state of the machine a sample was timed in (e.g.
    :meth:`graphtune.hoststate.HandoffGauge.ratio`), so samples can be grouped by it;
    reading it around each runtime's turn (its settle calls and timed call), not once per
    round, keeps a state change during a long round from being charged to the wrong
    runtime (a round of a large model lasts seconds; the host's state can flip as often).
    Before each runtime's turn the processes of the others (this one, for a
    runtime in another process) are let fall idle (:func:`wait_idle`), after the
    gauge when the runtime is in another process (the gauge's threads spin too).

    Returns
    -------
    tuple
        (``{name: repeat latencies in ms}``, ``{name: array (repeat, 2) of the gauge
        before and after each timed turn}``; empty arrays without a gauge).

    Examples
    --------
    >>> samples, readings = gauged_rounds({"noop": lambda: None}, lambda: 1.0, repeat=4, warmup=1)
    >>> len(samples["noop"]), readings["noop"].tolist()
    (4, [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    """
    if repeat < 1 or warmup < 0 or settle < 0 or settle_ms < 0:
        raise ValueError(f"repeat must be >= 1, warmup, settle and settle_ms >= 0, got {repeat}, "
                         f"{warmup}, {settle} and {settle_ms}")
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    readings: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    peers = {name: cast(TimedTurn, calls[name]).pid for name in names if hasattr(calls[name], "timed")}
    for round_ in range(warmup + repeat):
        timed = round_ >= warmup
        shift = round_ % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            call = calls[name]
            others: list[int | None] = [pid for peer, pid in peers.items()
                                        if peer != name and pid is not None]
            this: list[int | None] = [None] if name in peers else []  # None: this process
            wait_idle(others + this)
            before = float(gauge()) if gauge is not None and timed else None
            if before is not None and this:
                wait_idle(this)
            if hasattr(call, "timed"):  # a runtime in another process times itself
                elapsed_ms = cast(TimedTurn, call).timed(settle, settle_ms)
            else:
                elapsed_ms = settled_call_ms(call, settle, settle_ms)
            if timed:
                samples[name].append(elapsed_ms)
                if before is not None and gauge is not None:
                    readings[name].append((before, float(gauge())))
    return ({name: np.asarray(values) for name, values in samples.items()},
            {name: np.asarray(values, dtype=float).reshape(-1, 2) for name, values in readings.items()})


def cpu_seconds(pid: int | None = None) -> float | None:
    """CPU time (s) used so far by every thread of process ``pid`` (None: this one).

    Another process's is read from Linux's ``/proc/PID/task/*/schedstat``
    (nanoseconds); None where that cannot be read (the process ended, another OS).

    Examples
    --------
    >>> cpu_seconds() > 0, cpu_seconds(os.getpid()) is None or cpu_seconds(os.getpid()) > 0
    (True, True)
    """
    if pid is None:
        return time.process_time()
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                total += int(stat.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


def wait_idle(pids: Iterable[int | None], busy: float = 0.1, window_ms: float = 10.0,
              timeout_ms: float = 2000.0) -> float:
    """Sleep until processes ``pids`` (None: this one) together use less than ``busy`` CPUs.

    Use is measured over windows of ``window_ms``; after ``timeout_ms`` it gives
    up (a process busy for another reason must not stall a benchmark).
    Processes whose CPU time cannot be read are not waited for.

    Returns
    -------
    float
        Milliseconds waited.

    Examples
    --------
    >>> waited = wait_idle([None], timeout_ms=50)  # this process sleeps in it: idle at once
    >>> 0 <= waited < 5000
    True
    """
    pids = list(pids)
    start = time.perf_counter()
    before = [cpu_seconds(pid) for pid in pids]
    while (time.perf_counter() - start) * 1e3 < timeout_ms:
        time.sleep(window_ms / 1e3)
        after = [cpu_seconds(pid) for pid in pids]
        used = sum(b - a for a, b in zip(before, after) if a is not None and b is not None)
        if used < busy * window_ms / 1e3:
            break
        before = after
    return (time.perf_counter() - start) * 1e3


def settled_call_ms(call: Callable[[], object], settle: int, settle_ms: float) -> float:
    """Untimed calls (at least ``settle`` of them and ``settle_ms`` of time), then one timed call (ms).

    Examples
    --------
    >>> settled_call_ms(lambda: None, settle=2, settle_ms=1.0) < 1
    True
    """
    end = time.perf_counter() + settle_ms / 1e3
    done = 0
    while done < settle or time.perf_counter() < end:
        call()
        done += 1
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1e3


def median_ms(samples: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Median of each name's samples.

    Examples
    --------
    >>> median_ms({"x": np.array([3.0, 1.0, 2.0])})
    {'x': 2.0}
    """
    return {name: float(np.median(values)) for name, values in samples.items()}
