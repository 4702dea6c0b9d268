"""The records file: append-only JSON lines of finished measurements, and queries over it.

Each line is one :class:`Record` (design.md, "Records file"). Lines are written,
flushed and fsync'ed one at a time as measurements finish, so a crash loses at
most the line being written; a torn last line is skipped with a warning when
the file is read and cut off before the next append. A rerun looks records up
by (target, kind, workload, knobs, TVM version) and measures only what is missing.

Examples
--------
>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "demo.records.jsonl")
>>> recs = Records(path)
>>> t = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW8c",
...                        "dtype": "float32"})
>>> recs.append(Record.success(t, {"kind": "llvm"}, [0.012, 0.010, 0.011], threads=2))
>>> Records.load(path).get(t, {"kind": "llvm"}).median_ms
0.011
"""

from __future__ import annotations

import json
import math
import os
import statistics
import warnings
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, Sequence

from ..errors import MeasureError
from .task import TIMING, Task, record_key, tvm_version

__all__ = ["Record", "Records", "target_key_of"]


def target_key_of(target: Any = None) -> dict:
    """The JSON description of ``target`` under which records are stored.

    Parameters
    ----------
    target : tvm.target.Target, dict or None
        A TVM target or target dict (described by
        :func:`graphtune.x86.target_key`), a description already in record
        form (a dict with ``vector_bits``, e.g. ``record.target``; used as is),
        or None for the host target.

    Examples
    --------
    >>> key = target_key_of({"kind": "llvm", "mcpu": "haswell", "num-cores": 2})
    >>> key["mcpu"], key["vector_bits"], target_key_of(key) == key
    ('haswell', 256, True)
    """
    if isinstance(target, Mapping) and "vector_bits" in target:
        return json.loads(json.dumps(dict(target)))
    from ..x86 import target_key

    return json.loads(json.dumps(target_key(target)))


@dataclass(frozen=True)
class Record:
    """One finished measurement (or failure) of a task on a target.

    Attributes
    ----------
    target : dict
        Target description (:func:`target_key_of`).
    kind, workload, knobs
        The measured :class:`Task`.
    ms : list of float
        Mean milliseconds per call of each repeat; empty for errors.
    median_ms : float or None
        Median of ``ms``; None for errors.
    error : str or None
        Why building or running failed; None on success.
    tvm : str
        TVM version the kernel was built with.
    threads : int or None
        Runtime threads the kernel ran with.
    time : str
        UTC time the measurement finished (ISO 8601).
    number : int or None
        Calls per repeat (chosen so that a repeat lasts at least ``min_repeat_ms``).
    timing : str or None
        Timing protocol (:data:`graphtune.measure.task.TIMING`); None for
        records older than the protocol tag, which lookups never match.
    cutoff_ms : float or None
        Set when timing stopped early: the probe was slower than this bound
        (the protocol's cut-off times the best candidate of the same layout
        pair), so ``ms`` holds only the probe calls and the candidate cannot be
        the best of its pair. None for complete measurements.

    Examples
    --------
    >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
    ...                        "dtype": "float32"})
    >>> Record.failure(t, {"kind": "llvm"}, "build: boom").ok
    False
    """

    target: dict
    kind: str
    workload: dict
    knobs: dict
    ms: list
    median_ms: float | None
    error: str | None
    tvm: str
    threads: int | None
    time: str
    number: int | None = None
    timing: str | None = None
    cutoff_ms: float | None = None

    @classmethod
    def success(cls, task: Task, target: Mapping, ms: Sequence[float], *,
                threads: int | None, number: int | None = None, timing: str = TIMING,
                cutoff_ms: float | None = None) -> "Record":
        """A successful record of ``task`` with per-repeat times ``ms`` (milliseconds).

        Examples
        --------
        >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
        ...                        "dtype": "float32"})
        >>> Record.success(t, {"kind": "llvm"}, [2.0, 1.0, 3.0], threads=1).median_ms
        2.0
        """
        ms = [float(m) for m in ms]
        if not ms or not all(math.isfinite(m) and m > 0 for m in ms):
            raise MeasureError(f"{task!r}: times must be positive and finite, got {ms}")
        return cls(target_key_of(target), task.kind, task.workload, task.knobs, ms,
                   statistics.median(ms), None, tvm_version(), threads, _now(), number,
                   timing, cutoff_ms)

    @classmethod
    def failure(cls, task: Task, target: Mapping, error: str, *,
                threads: int | None = None) -> "Record":
        """An error record: ``task`` could not be built or run, ``error`` says why.

        Examples
        --------
        >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
        ...                        "dtype": "float32"})
        >>> Record.failure(t, {"kind": "llvm"}, "run: timed out").error
        'run: timed out'
        """
        return cls(target_key_of(target), task.kind, task.workload, task.knobs, [], None,
                   str(error), tvm_version(), threads, _now(), None, TIMING)

    @property
    def ok(self) -> bool:
        """True if the task was measured (``error`` is None)."""
        return self.error is None

    @property
    def task(self) -> Task:
        """The measured :class:`Task`."""
        return Task(self.kind, self.workload, self.knobs)

    @property
    def key(self) -> str:
        """The record key (:func:`graphtune.measure.task.record_key`)."""
        return record_key(self.task, self.target, self.tvm, self.timing)

    def to_json(self) -> str:
        """One line of the records file (without the newline).

        Examples
        --------
        >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
        ...                        "dtype": "float32"})
        >>> rec = Record.failure(t, {"kind": "llvm"}, "build: boom")
        >>> Record.from_dict(json.loads(rec.to_json())) == rec
        True
        """
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Mapping) -> "Record":
        """Rebuild a record from a parsed records-file line.

        Raises ``KeyError``/``TypeError`` for missing or unexpected fields and
        MeasureError for an invalid task; see :meth:`to_json` for an example.
        """
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        fields.setdefault("number", None)
        fields.setdefault("timing", None)
        fields.setdefault("cutoff_ms", None)
        record = cls(**fields)
        Task(record.kind, record.workload, record.knobs)  # validates kind and workload
        return record


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Records:
    """Measurements of tasks, in memory and (optionally) backed by an append-only file.

    Parameters
    ----------
    path : str or os.PathLike, optional
        The records file (``*.records.jsonl``). It is read if it exists and
        appended to by :meth:`append`; its directory must exist. None keeps
        records in memory only.

    Notes
    -----
    When a task has several records (e.g. an error, then a success after a
    retry), the last one wins.

    Examples
    --------
    >>> recs = Records()
    >>> len(recs)
    0
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        self._index: dict[str, Record] = {}
        self._good_size: int | None = None  # bytes of intact lines when the tail is torn
        if self.path is not None:
            folder = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(folder):
                raise MeasureError(
                    f"records file {self.path}: folder {folder} does not exist; create it first")
            if os.path.exists(self.path):
                self._read()

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Records":
        """Read an existing records file.

        Raises
        ------
        MeasureError
            If ``path`` does not exist.

        Examples
        --------
        >>> Records.load("/nonexistent.records.jsonl")
        Traceback (most recent call last):
        ...
        graphtune.errors.MeasureError: records file /nonexistent.records.jsonl does not exist; \
pass it to measure(..., records=PATH) to create it
        """
        if not os.path.exists(path):
            raise MeasureError(
                f"records file {os.fspath(path)} does not exist; "
                "pass it to measure(..., records=PATH) to create it"
            )
        return cls(path)

    def _read(self) -> None:
        with open(self.path, "rb") as fh:
            data = fh.read()
        lines = data.split(b"\n")
        offset = 0
        for number, raw in enumerate(lines, start=1):
            start, offset = offset, offset + len(raw) + 1
            if not raw.strip():
                continue
            try:
                record = Record.from_dict(json.loads(raw))
            except (ValueError, KeyError, TypeError, MeasureError) as err:
                if all(not rest.strip() for rest in lines[number:]):
                    warnings.warn(
                        f"{self.path}: skipping torn last line {number} ({len(raw)} bytes: "
                        f"{type(err).__name__}); it is cut off before the next append",
                        stacklevel=3)
                    self._good_size = start
                    return
                warnings.warn(f"{self.path}: skipping unreadable line {number} ({err}); "
                              "delete that line to silence this warning", stacklevel=3)
                continue
            self._index[record.key] = record
        if data and not data.endswith(b"\n"):
            self._good_size = -1  # last record lacks its newline: add it before appending

    def __len__(self) -> int:
        return len(self._index)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._index.values())

    def append(self, record: Record) -> None:
        """Add ``record``; with a file, write it as one line, flushed and fsync'ed.

        Examples
        --------
        >>> recs = Records()
        >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
        ...                        "dtype": "float32"})
        >>> recs.append(Record.failure(t, {"kind": "llvm"}, "build: boom"))
        >>> len(recs)
        1
        """
        if self.path is not None:
            line = record.to_json() + "\n"
            if self._good_size is not None:
                if self._good_size >= 0:
                    os.truncate(self.path, self._good_size)
                else:
                    line = "\n" + line
                self._good_size = None
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
        self._index[record.key] = record

    def get(self, task: Task, target: Any = None) -> Record | None:
        """The record of ``task`` on ``target`` with the installed TVM, or None.

        Parameters
        ----------
        task : Task
        target : tvm.target.Target, dict or None
            See :func:`target_key_of`; None is the host target.

        Examples
        --------
        >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
        ...                        "dtype": "float32"})
        >>> Records().get(t, {"kind": "llvm"}) is None
        True
        """
        return self._index.get(record_key(task, target_key_of(target), tvm_version()))

    def _successes(self, workload: Mapping, target: Any) -> list[Record]:
        tkey, tvm = target_key_of(target), tvm_version()
        wl = json.loads(json.dumps(dict(workload)))
        return [r for r in self._index.values()
                if r.ok and r.kind != "transform" and r.workload == wl
                and r.target == tkey and r.tvm == tvm and r.timing == TIMING]

    def top_k(self, workload: Mapping, k: int, target: Any = None) -> list[Record]:
        """The ``k`` fastest successful kernel records of ``workload``, fastest first.

        Examples
        --------
        >>> Records().top_k({"data": [1, 4], "weight": [2, 4], "dtype": "float32"}, 3,
        ...                 target={"kind": "llvm"})
        []
        """
        return sorted(self._successes(workload, target), key=lambda r: r.median_ms)[:k]

    def best(self, workload: Mapping, in_layout: str | None = None,
             out_layout: str | None = None, target: Any = None) -> Record | None:
        """The fastest successful kernel record of ``workload`` with the given layouts.

        Parameters
        ----------
        workload : dict
        in_layout, out_layout : str, optional
            Required input/output layouts (``graphtune.x86.layouts_of``); None
            accepts any.
        target : tvm.target.Target, dict or None
            See :func:`target_key_of`; None is the host target.

        Examples
        --------
        >>> Records().best({"data": [1, 4], "weight": [2, 4], "dtype": "float32"},
        ...                target={"kind": "llvm"}) is None
        True
        """
        found = self._successes(workload, target)
        if in_layout is not None or out_layout is not None:
            from ..x86 import layouts_of

            def fits(record: Record) -> bool:
                lin, lout = layouts_of(record.workload, record.knobs)
                return in_layout in (None, lin) and out_layout in (None, lout)

            found = [r for r in found if fits(r)]
        return min(found, key=lambda r: r.median_ms, default=None)
