"""Runners: where and how tasks are built and timed.

A :class:`Runner` turns tasks into :class:`~graphtune.measure.records.Record`
objects, yielding each as soon as it is finished so that the caller can save
it at once. :class:`LocalRunner` (the default) builds in parallel worker
processes, then times the built kernels one at a time in a separate timing
process on this machine; a crash or hang in either becomes an error record.
A remote runner (e.g. over a TVM RPC tracker) implements the same three
methods: it resolves the target of the remote CPU, keys records by it, and
times remotely what the same build workers compiled.

Examples
--------
>>> from graphtune.measure import Task
>>> t = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW8c",
...                        "dtype": "float32"})
>>> runner = LocalRunner(n_parallel=1)
>>> target = runner.resolve_target(None)
>>> [r.ok for r in runner.run([t], target, repeat=2, min_repeat_ms=5, timeout=60)]
[True]
"""

from __future__ import annotations

import enum
import math
import os
import pickle
import shutil
import tempfile
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable, Generator, Sequence

from ..errors import MeasureError
from ..ops import KERNEL_OPS
from ..procs import Child, ChildFailure, ChildPool
from .build import build_task, prim_func_of
from .records import Record, target_key_of
from .task import TIMING, Task, canonical_json
from .timing import protocol, task_protocol, time_library

if TYPE_CHECKING:
    import tvm

__all__ = ["Runner", "LocalRunner", "Stage", "PRELOAD"]

PRELOAD = ("tvm",)
"""Modules a build or timing process imports before its first task."""


class Stage(enum.Enum):
    """Stage of a measurement; its value prefixes the error of a record that failed in it.

    Examples
    --------
    >>> from graphtune.procs import Cause, ChildFailure
    >>> str(ChildFailure(Cause.TIMED_OUT, "timed out after 5 s (worker killed)", Stage.RUN))
    'run: timed out after 5 s (worker killed)'
    """

    BUILD = "build"
    RUN = "run"


class Runner(ABC):
    """Builds and times tasks for one target; subclasses say where the timing runs.

    ``timing`` is the protocol its records are taken with (and looked up by).
    """

    timing: str = TIMING

    def timing_of(self, task: Task) -> str:
        """The protocol this runner times ``task`` with and records it under
        (:func:`~graphtune.measure.timing.task_protocol` of :attr:`timing`).

        Examples
        --------
        >>> t = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW8c",
        ...                        "dtype": "float32"})
        >>> LocalRunner().timing_of(t), LocalRunner(timing="hot-input").timing_of(t)
        ('filled-cache', 'hot-input')
        """
        return task_protocol(task, self.timing)

    def resolve_target(self, target: Any = None) -> "tvm.target.Target":
        """The TVM target kernels are built for (None: the machine that runs them).

        Examples
        --------
        >>> LocalRunner().resolve_target({"kind": "llvm", "mcpu": "haswell"}).kind.name
        'llvm'
        """
        from ..x86 import host_target

        return host_target(target)

    def target_key(self, target: "tvm.target.Target") -> dict:
        """The description records of ``target`` are stored under.

        Examples
        --------
        >>> runner = LocalRunner()
        >>> runner.target_key(runner.resolve_target(None))["kind"]
        'llvm'
        """
        return target_key_of(target)

    @abstractmethod
    def run(self, tasks: Sequence[Task], target: "tvm.target.Target", *,
            repeat: int, min_repeat_ms: float, timeout: float) -> Generator[Record, None, None]:
        """Build and time ``tasks``; yield one record per task as soon as it is done.

        Failures (bad knobs, build errors, crashes, time-outs) are yielded as
        error records, never raised. Closing the generator early (or an
        exception such as KeyboardInterrupt) stops every process it started.
        """


class LocalRunner(Runner):
    """Build in parallel worker processes, time one kernel at a time on this machine.

    Parameters
    ----------
    n_parallel : int, optional
        Build processes (default: the number of usable cores). Builds of a
        batch run in parallel; timing starts when the batch is built, so that
        compiling never disturbs a timed kernel.
    batch_size : int, optional
        Tasks built per batch (default ``4 * n_parallel``).
    func_of : callable, optional
        ``func_of(task, target) -> PrimFunc`` giving the kernel of a task,
        a picklable top-level function (default
        :func:`graphtune.measure.build.prim_func_of`, i.e. graphtune.x86).
    timing : str, optional
        Timing protocol (default :data:`graphtune.measure.task.TIMING`; see
        :data:`graphtune.measure.timing.PROTOCOLS`; an old tag such as
        ``flush-v4`` names the same protocol). With a cut-off, a kernel
        candidate whose two trial calls are slower than the protocol's factor
        times the fastest candidate of the same (op, workload, in_layout,
        out_layout) timed earlier in the run is recorded after its trial calls
        (``Record.cutoff_ms``); put likely winners first.

    Notes
    -----
    Each :meth:`run` starts its worker processes and stops them at the end.
    Used as a context manager, the runner keeps them between runs instead
    (saving the ~1 s start-up of each when measuring in many small calls).

    Examples
    --------
    >>> LocalRunner(n_parallel=2).n_parallel
    2
    >>> with LocalRunner(n_parallel=1) as runner:  # workers live until the block ends
    ...     pass
    """

    _kept: tuple[ChildPool, Child] | None  # workers kept by ``with`` (set by __enter__)

    def __init__(self, n_parallel: int | None = None, batch_size: int | None = None,
                 func_of: Callable = prim_func_of, timing: str = TIMING) -> None:
        self.n_parallel = n_parallel
        self.batch_size = batch_size
        self.func_of = func_of
        self.timing = protocol(timing).name

    def _settings(self) -> tuple[int, int]:
        n_parallel = self.n_parallel or len(os.sched_getaffinity(0))
        batch_size = self.batch_size or 4 * n_parallel
        if n_parallel < 1 or batch_size < 1:
            raise MeasureError(
                f"LocalRunner needs n_parallel >= 1 and batch_size >= 1, got "
                f"{n_parallel} and {batch_size}")
        return n_parallel, batch_size

    def __enter__(self) -> "LocalRunner":
        self._kept = (ChildPool(self._settings()[0], PRELOAD), Child(PRELOAD))
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker processes kept by ``with`` (a no-op otherwise)."""
        kept, self._kept = getattr(self, "_kept", None), None
        if kept is not None:
            kept[0].close()
            kept[1].close()

    def run(self, tasks: Sequence[Task], target: "tvm.target.Target", *,
            repeat: int, min_repeat_ms: float, timeout: float) -> Generator[Record, None, None]:
        """Build and time ``tasks`` locally (see :meth:`Runner.run`)."""
        n_parallel, batch_size = self._settings()
        try:
            pickle.dumps(self.func_of)
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            raise MeasureError(
                f"LocalRunner func_of={self.func_of!r} cannot be sent to a worker process "
                f"({err}); pass a top-level function of an importable module") from None
        key = self.target_key(target)
        kept = getattr(self, "_kept", None)
        pool, timer = kept or (ChildPool(min(n_parallel, max(1, len(tasks))), PRELOAD),
                               Child(PRELOAD))
        timer.start()  # its start-up overlaps the first builds
        out_dir = tempfile.mkdtemp(prefix="graphtune-measure-")
        cutoff = protocol(self.timing).cutoff
        best: dict[tuple, float] = {}  # cut-off group -> fastest complete median so far
        try:
            for start in range(0, len(tasks), batch_size):
                batch = tasks[start:start + batch_size]
                built = pool.map(build_task, [(self.func_of, t, target, out_dir) for t in batch],
                                 timeout, stage=Stage.BUILD)
                for task, (ok, value) in zip(batch, built):
                    if not ok:
                        yield Record.failure(task, key, str(value), timing=self.timing_of(task))
                        continue
                    group = _cutoff_group(task) if cutoff else None
                    bound = cutoff * best[group] if cutoff and group in best else None
                    record = self._time(task, key, value, timer, repeat, min_repeat_ms, timeout,
                                        self.timing_of(task), bound)
                    if (group is not None and record.ok and record.cutoff_ms is None
                            and record.median_ms is not None):  # an ok record has a median
                        best[group] = min(best.get(group, math.inf), record.median_ms)
                    yield record
        finally:  # kept workers survive, unless interrupted in the middle of a call
            pool.close(busy_only=kept is not None)
            if kept is None or timer.busy:
                timer.close()
            shutil.rmtree(out_dir, ignore_errors=True)

    @staticmethod
    def _time(task: Task, key: dict, built: dict, timer: Child, repeat: int,
              min_repeat_ms: float, timeout: float, timing: str,
              cutoff_ms: float | None) -> Record:
        try:
            out = timer.call(_time_built, (built, repeat, min_repeat_ms, timing, cutoff_ms),
                             timeout, stage=Stage.RUN)
            return Record.success(task, key, out["ms"], threads=out["threads"],
                                  number=out["number"], timing=timing,
                                  cutoff_ms=out["cutoff_ms"], contention=out.get("contention"))
        except ChildFailure as err:
            return Record.failure(task, key, str(err), timing=timing)
        finally:
            os.remove(built["path"])


def _time_built(built: dict, repeat: int, min_repeat_ms: float, timing: str,
                cutoff_ms: float | None) -> dict:
    """Timing worker: :func:`time_library` on what :func:`build_task` returned."""
    return time_library(built["path"], built["args"], repeat, min_repeat_ms, timing=timing,
                        cutoff_ms=cutoff_ms)


def _cutoff_group(task: Task) -> tuple | None:
    """Candidates of one group compete for one place: same op, workload and layouts.

    Transforms, op groups, and knobs graphtune.x86 cannot read (a custom
    ``func_of``), have no group and are never cut off.
    """
    from ..errors import GraphtuneError
    from ..x86 import layouts_of

    if task.kind not in KERNEL_OPS:
        return None
    try:
        return (task.kind, canonical_json(task.workload),
                *layouts_of(task.workload, task.knobs, op=task.kind))
    except (GraphtuneError, KeyError, TypeError):
        return None
