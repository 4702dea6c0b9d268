"""Gauge whether this process's threads exchange data cheaply right now (the host-state gauge).

On a cloud VM the host moves vCPUs between cores; two vCPUs sharing a last-level cache
hand data to each other at cache speed, two that do not, at memory speed. The guest
cannot see or choose this, and it changes within seconds; memory-bound ops run several
times slower in the *split* state than in the *shared* one, compute-bound ones do not
(``docs/timing.md``, "Host state", has the measurements).

:meth:`HandoffGauge.ratio` times a parallel copy reading data the *other* thread just wrote
against one reading what the *same* thread wrote: about 1 when threads share a cache,
several times more when they do not. Benchmarks read the gauge right before and after every
runtime's timed turn (``benchmarks/e2e.py``, :func:`graphtune.latency.gauged_rounds`) and
group the samples by :func:`state_of` those readings, so figures taken in the two states are
not mixed unknowingly.

Examples
--------
>>> gauge = HandoffGauge(megabytes=1.0)
>>> ratio = gauge.ratio(calls=20)
>>> ratio > 0
True
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["HandoffGauge", "SHARED_LIMIT", "by_state", "state_of"]

SHARED_LIMIT = 1.5
"""A handoff ratio above this means the threads did not share a cache while gauged (the two
states give about 1 and several times that)."""


def state_of(ratios: Sequence[float]) -> str:
    """The host state over gauge readings ``ratios`` taken around one timing: ``shared`` when every one
    is at most :data:`SHARED_LIMIT`, ``split`` when every one is above it, ``mixed`` otherwise
    (the state changed while it was timed).

    Examples
    --------
    >>> state_of([0.9, 1.1]), state_of([4.0, 9.5]), state_of([1.0, 4.0])
    ('shared', 'split', 'mixed')
    """
    if all(r <= SHARED_LIMIT for r in ratios):
        return "shared"
    if all(r > SHARED_LIMIT for r in ratios):
        return "split"
    return "mixed"


def by_state(samples: Mapping[str, Iterable[float]],
             ratios: Sequence[float] | Mapping[str, Sequence[Sequence[float]]]) -> dict:
    """Median latency per runtime over the samples timed in each state (``shared`` / ``split`` cache).

    Parameters
    ----------
    samples : mapping of str to iterable of float
        Per runtime, one latency per round.
    ratios : sequence of float, or mapping of str to sequence of sequences of float
        The gauge's handoff ratio of each round (:meth:`HandoffGauge.ratio`), for
        every runtime alike; or per runtime, the ratios read around each of its
        samples (:func:`graphtune.latency.gauged_rounds`), whose state is then
        :func:`state_of` them: a sample timed while the state changed (``mixed``)
        is left out.

    Returns
    -------
    dict
        ``{"shared" | "split": {"rounds": n, "samples": {name: count}, "latency_ms":
        {name: median}}}`` for the states seen; ``rounds`` is the fewest samples any
        runtime has in that state, ``latency_ms`` holds the runtimes with at least one.

    Examples
    --------
    >>> by_state({"a": [1.0, 2.0, 5.0]}, [1.0, 0.9, 4.0])["split"]
    {'rounds': 1, 'samples': {'a': 1}, 'latency_ms': {'a': 5.0}}
    >>> by_state({"a": [1.0, 2.0, 5.0], "b": [3.0, 3.0, 3.0]},
    ...          {"a": [[1.0, 1.0], [1.0, 4.0], [4.0, 4.0]], "b": [[1.0, 1.0]] * 3})["split"]
    {'rounds': 0, 'samples': {'a': 1, 'b': 0}, 'latency_ms': {'a': 5.0}}
    """
    kept: dict[str, dict[str, list[float]]] = {"shared": {}, "split": {}}
    for name, values in samples.items():
        around = ratios[name] if isinstance(ratios, Mapping) else [[r] for r in ratios]
        for value, readings in zip(values, around):
            state = state_of(readings)
            if state in kept:
                kept[state].setdefault(name, []).append(value)
    return {state: {"rounds": min(len(per.get(name, [])) for name in samples),
                    "samples": {name: len(per.get(name, [])) for name in samples},
                    "latency_ms": {name: statistics.median(v) for name, v in per.items()}}
            for state, per in kept.items() if per}


class HandoffGauge:
    """Two parallel row copies of a ``megabytes`` buffer, rows split between threads in ranges:
    one copies row ``i`` to row ``i``, the other row ``i + rows/2`` (written by another thread).

    Parameters
    ----------
    megabytes : float
        Size of each of the two buffers: above a core's L2, within the shared L3.

    Examples
    --------
    >>> HandoffGauge(megabytes=0.5).megabytes
    0.5
    """

    def __init__(self, megabytes: float = 4.0) -> None:
        self.megabytes = megabytes

    def ratio(self, calls: int = 50) -> float:
        """Median time of copies reading the other thread's writes over copies reading their own.

        Parameters
        ----------
        calls : int
            Timed copy pairs of each kind (medians).

        Returns
        -------
        float
            About 1 when threads share a cache; above :data:`SHARED_LIMIT` when they do not.

        Examples
        --------
        >>> HandoffGauge(megabytes=0.5).ratio(calls=5) > 0
        True
        """
        same, shifted, a, b = self._kernels()
        handoff = _pair_ms(same, shifted, a, b, calls)
        local = _pair_ms(same, same, a, b, calls)
        return handoff / local

    def _kernels(self) -> tuple:
        """(copy row i to row i, copy row i + rows/2 to row i, buffer a, buffer b), built once."""
        import numpy as np
        import tvm

        if not hasattr(self, "_built"):
            columns = 1024
            rows = 2 * max(1, int(self.megabytes * 2**20 / 4 / columns / 2))
            dev = tvm.cpu(0)
            a = tvm.runtime.tensor(np.random.default_rng(0).random((rows, columns), "float32"), dev)
            b = tvm.runtime.tensor(np.zeros((rows, columns), "float32"), dev)
            self._built = (_row_copy((rows, columns), 0), _row_copy((rows, columns), rows // 2), a, b)
        return self._built


def _pair_ms(first, second, a, b, calls: int) -> float:
    """Median ms of ``first(a -> b)`` then ``second(b -> a)`` (3 untimed pairs first)."""
    times = []
    for _ in range(calls + 3):
        start = time.perf_counter()
        first(a, b)
        second(b, a)
        times.append(time.perf_counter() - start)
    return statistics.median(times[3:]) * 1e3


def _row_copy(shape: tuple, shift: int):
    """Compiled ``dst[i] = src[(i + shift) % rows]``, rows split between threads in ranges."""
    import tvm
    from tvm import s_tir, te

    from .x86 import host_target, schedule_elementwise, vector_lanes

    target = host_target()
    rows = shape[0]
    src = te.placeholder(shape, "float32", name="src")
    dst = te.compute(shape, lambda i, j: src[(i + shift) % rows, j], name="dst")
    sch = s_tir.Schedule(te.create_prim_func([src, dst]).with_attr("global_symbol", "main"))
    schedule_elementwise(sch, sch.get_sblock("dst"), vector_lanes(target))  # rows parallel
    return tvm.compile(sch.mod, target=target)["main"]
