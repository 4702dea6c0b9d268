"""Side-by-side latency measurement of several runtimes in one run.

Absolute times drift by several percent on shared machines while ratios
measured in the same rounds stay steady, so :func:`interleaved` times every
runtime once per round, rotates their order each round, pauses (untimed)
between calls so no runtime's leftover threads slow the next one, and
returns every sample; report medians and their ratios.

Examples
--------
>>> samples = interleaved({"a": lambda: sum(range(1000)), "b": lambda: None},
...                       repeat=5, warmup=1, pause_s=0)
>>> sorted(samples), len(samples["a"])
(['a', 'b'], 5)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import numpy as np

__all__ = ["interleaved", "median_ms"]


def interleaved(calls: Mapping[str, Callable[[], object]], repeat: int = 30, warmup: int = 3,
                pause_s: float = 0.05) -> dict[str, np.ndarray]:
    """Time each zero-argument call ``repeat`` times, interleaved; milliseconds per call.

    Parameters
    ----------
    calls : mapping of str to callable
        Name -> a call running one inference on bound inputs.
    repeat : int
        Timed rounds; each round calls every runtime once, in a rotated order.
    warmup : int
        Untimed rounds first (JIT, caches, thread pools).
    pause_s : float
        Untimed sleep after every call.

    Returns
    -------
    dict of str to numpy.ndarray
        ``repeat`` latencies in ms per name.

    Examples
    --------
    >>> median_ms(interleaved({"noop": lambda: None}, repeat=3, warmup=0, pause_s=0))["noop"] < 1
    True
    """
    if repeat < 1 or warmup < 0:
        raise ValueError(f"repeat must be >= 1 and warmup >= 0, got {repeat} and {warmup}")
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(warmup + repeat):
        shift = round_ % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            calls[name]()
            elapsed = time.perf_counter() - start
            if round_ >= warmup:
                samples[name].append(elapsed * 1e3)
            if pause_s:
                time.sleep(pause_s)
    return {name: np.asarray(values) for name, values in samples.items()}


def median_ms(samples: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Median of each name's samples.

    Examples
    --------
    >>> median_ms({"x": np.array([3.0, 1.0, 2.0])})
    {'x': 2.0}
    """
    return {name: float(np.median(values)) for name, values in samples.items()}
