"""``measure()``: measure what the records lack, save each result as it finishes.

Examples
--------
>>> from graphtune.measure import Task
>>> t = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW8c",
...                        "dtype": "float32"})
>>> [rec] = measure([t], min_repeat_ms=5, progress=False)
>>> rec.ok, rec.median_ms > 0
(True, True)
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Iterable

from tqdm.auto import tqdm

from ..errors import MeasureError
from . import contention
from .records import Record, Records
from .runner import LocalRunner, Runner
from .task import Task

__all__ = ["measure"]


def measure(tasks: Iterable[Task], target: Any = None,
            records: Records | str | os.PathLike | None = None, *,
            runner: Runner | None = None, min_repeat_ms: float = 10.0, repeat: int = 3,
            timeout: float = 60.0, retry_errors: bool = False,
            progress: bool = True, desc: str = "measure") -> list[Record]:
    """Measure kernel and transform tasks, reusing and extending a records file.

    Tasks already in ``records`` for this target and TVM version are not
    measured again; every new result (success or error) is appended to the
    records file as soon as it finishes, so an interrupted run (Ctrl-C, crash)
    loses at most the measurement in flight and a rerun resumes.

    Parameters
    ----------
    tasks : iterable of Task
        What to measure; duplicates are measured once.
    target : tvm.target.Target or dict, optional
        Target to build for; None asks the runner (the host CPU for
        :class:`LocalRunner`).
    records : Records, path or None
        Records to read and append to; a path is created if missing. None
        keeps results in memory only.
    runner : Runner, optional
        Where to build and time (default :class:`LocalRunner`).
    min_repeat_ms : float
        Duration of one repeat: calls per repeat are chosen from the wall time
        of one cache-flushed call (flush included) to fill it (timing
        protocol :data:`~graphtune.measure.task.TIMING`).
    repeat : int
        Repeats per task; the record keeps each repeat's mean and their median.
    timeout : float
        Seconds allowed to build one task, and again to time it, before it
        becomes an error record.
    retry_errors : bool
        Measure again tasks whose record is an error.
    progress : bool
        Show a progress bar (counts, errors, ETA); False for quiet scripts.
    desc : str
        Label of the progress bar.

    Returns
    -------
    list of Record
        One record per task, in the order of ``tasks`` (errors have ``ok`` False).

    Raises
    ------
    MeasureError
        On invalid arguments (not a Task, repeat < 1...).
    KeyboardInterrupt
        Re-raised after the worker processes are stopped; results finished
        before it are in the records file.

    Examples
    --------
    >>> t = Task("transform", {"shape": [1, 8, 4, 4], "src": "NCHW8c", "dst": "NCHW",
    ...                        "dtype": "float32"})
    >>> recs = Records()
    >>> first = measure([t], records=recs, min_repeat_ms=5, progress=False)
    >>> measure([t], records=recs, progress=False) == first  # read back, not re-measured
    True
    """
    tasks = list(tasks)
    for index, task in enumerate(tasks):
        if not isinstance(task, Task):
            raise MeasureError(f"tasks[{index}] is a {type(task).__name__}, expected a Task")
    if not (isinstance(repeat, int) and repeat >= 1):
        raise MeasureError(f"repeat must be an int >= 1, got {repeat!r}")
    if not min_repeat_ms >= 0:
        raise MeasureError(f"min_repeat_ms must be >= 0, got {min_repeat_ms!r}")
    if not timeout > 0:
        raise MeasureError(f"timeout must be > 0 seconds, got {timeout!r}")
    contention.retakes()  # a bad GRAPHTUNE_CONTENTION_RETRIES fails here, not in the timing worker
    runner = LocalRunner() if runner is None else runner
    if not isinstance(records, Records):
        records = Records(records)
    target = runner.resolve_target(target)
    key = runner.target_key(target)

    found: dict[Task, Record] = {}
    todo: list[Task] = []
    for task in dict.fromkeys(tasks):
        record = records.reusable(task, key, runner.timing, retry_errors)
        if record is not None:
            found[task] = record
        else:
            todo.append(task)

    if todo:
        cached, errors = len(found), 0
        bar = tqdm(total=len(todo), desc=desc, unit="task", disable=not progress,
                   dynamic_ncols=True)
        bar.set_postfix(cached=cached, errors=0)
        results = runner.run(todo, target, repeat=repeat, min_repeat_ms=min_repeat_ms,
                             timeout=timeout)
        try:
            for record in results:
                records.append(record)
                found[record.task] = record
                errors += not record.ok
                bar.set_postfix(cached=cached, errors=errors, refresh=False)
                bar.update()
        finally:
            results.close()
            bar.close()
        _measure_disturbed_again([task for task in todo if _disturbed(found[task])], found, records,
                                 runner, target, repeat, min_repeat_ms, timeout, desc)
    return [found[task] for task in tasks]


def _disturbed(record: Record) -> bool:
    return record.ok and contention.disturbed(record.contention)


def _measure_disturbed_again(disturbed: list[Task], found: dict[Task, Record], records: Records,
                             runner: Runner, target: Any, repeat: int, min_repeat_ms: float,
                             timeout: float, desc: str) -> None:
    """Time ``disturbed`` tasks (timed while other work held the CPUs, even after retakes) once
    more at the end of the run, when the load may have passed; keep (append) a new record only
    where it is less disturbed, and warn once about those that stay disturbed."""
    if not disturbed or not contention.retakes():
        return
    results = runner.run(disturbed, target, repeat=repeat, min_repeat_ms=min_repeat_ms, timeout=timeout)
    try:
        for record in results:
            old = found[record.task]
            if record.ok and (record.contention or 0.0) < (old.contention or 0.0):
                records.append(record)
                found[record.task] = record
    finally:
        results.close()
    still = [found[task] for task in disturbed if _disturbed(found[task])]
    if still:
        worst = max(r.contention or 0.0 for r in still)
        warnings.warn(
            f"{desc}: {len(still)} timing(s) ran while other work took up to {worst:.0%} of the CPUs "
            f"(more than {contention.LIMIT:.0%}, also when timed again), so they are slower than the "
            "kernels alone and may mislead the choice; measure on an otherwise idle machine "
            "(their records say so in 'contention'; a rerun measures them again)",
            stacklevel=3)
