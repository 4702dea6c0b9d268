"""The records file: append-only JSON lines of finished measurements, and queries over it.

Each line is one :class:`Record` (``docs/files.md``, "Records file"). Lines are written,
flushed and fsync'ed one at a time as measurements finish, so a crash loses at
most the line being written; a torn last line (no newline) is skipped with a
warning when the file is read and cut off at the next append, which holds an
exclusive lock, so several processes can share one file. Invalid lines are
skipped with a warning naming the file and line, and so is a line no record can be
(longer than :data:`MAX_LINE_CHARS`, nested deeper than any record, a number of
thousands of digits, a time that is not a positive finite number of ms up to
:data:`graphtune.safejson.MAX_MS`...: :mod:`graphtune.safejson`). A rerun looks records up
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

import fcntl
import functools
import json
import math
import os
import statistics
import warnings
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, Sequence, cast

from .. import safejson
from ..errors import MeasureError
from ..ops import Op
from . import contention
from .task import TIMING, Task, protocol_tag, record_key, tvm_version
from .timing import task_protocol

__all__ = ["Record", "Records", "target_key_of", "MAX_LINE_CHARS"]

MAX_LINE_CHARS = 16 << 20
"""Longest records line read (characters); a record is a few hundred, an error's message a few
thousand."""


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
        records older than the protocol tag, which lookups never match. An old
        tag (``flush-v4``...) is matched as the protocol it names
        (:data:`graphtune.measure.task.PROTOCOL_RENAMES`).
    cutoff_ms : float or None
        Set when timing stopped early: the trial calls were slower than this bound
        (the protocol's cut-off times the best candidate of the same layout
        pair), so ``ms`` holds only the trial calls and the candidate cannot be
        the best of its pair. None for complete measurements.
    contention : float or None
        The share of the timing worker's CPUs that other work (other processes, the
        hypervisor) took while the task was timed, after retakes
        (:mod:`graphtune.measure.contention`): about 0 alone; above
        :data:`~graphtune.measure.contention.LIMIT` the times are slower than the kernel's.
        None where unknown (older records, remote runners, errors).

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
    contention: float | None = None

    @classmethod
    def success(cls, task: Task, target: Mapping, ms: Sequence[float], *,
                threads: int | None, number: int | None = None, timing: str = TIMING,
                cutoff_ms: float | None = None, contention: float | None = None) -> "Record":
        """A successful record of ``task`` with per-repeat times ``ms`` (milliseconds), taken by a
        runner timing with ``timing`` (stored: the protocol that times ``task``,
        :func:`~graphtune.measure.timing.task_protocol`).

        Examples
        --------
        >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
        ...                        "dtype": "float32"})
        >>> r = Record.success(t, {"kind": "llvm"}, [2.0, 1.0, 3.0], threads=1)
        >>> r.median_ms, r.timing
        (2.0, 'filled-cache')
        """
        ms = [float(m) for m in ms]
        if not ms or not all(math.isfinite(m) and m > 0 for m in ms):
            raise MeasureError(f"{task!r}: times must be positive and finite, got {ms}")
        return cls(target_key_of(target), task.kind, task.workload, task.knobs, ms,
                   statistics.median(ms), None, tvm_version(), threads, _now(), number,
                   task_protocol(task, timing), cutoff_ms,
                   None if contention is None else round(float(contention), 4))

    @classmethod
    def failure(cls, task: Task, target: Mapping, error: str, *,
                threads: int | None = None, timing: str = TIMING) -> "Record":
        """An error record: ``task`` could not be built or run, ``error`` says why (``timing`` as
        in :meth:`success`).

        Examples
        --------
        >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
        ...                        "dtype": "float32"})
        >>> Record.failure(t, {"kind": "llvm"}, "run: timed out").error
        'run: timed out'
        """
        return cls(target_key_of(target), task.kind, task.workload, task.knobs, [], None,
                   str(error), tvm_version(), threads, _now(), None, task_protocol(task, timing))

    @property
    def ok(self) -> bool:
        """True if the task was measured (``error`` is None)."""
        return self.error is None

    @functools.cached_property
    def task(self) -> Task:
        """The measured :class:`Task` (made once: a records file is tens of thousands of lines)."""
        # Task.__post_init__ turns the kind string into an Op (MeasureError if it names none)
        return Task(cast(Op, self.kind), self.workload, self.knobs)

    @functools.cached_property
    def key(self) -> str:
        """The record key (:func:`graphtune.measure.task.record_key`); a record with an old
        protocol tag is keyed under the protocol's current name (lookups ask by that name)."""
        return record_key(self.task, self.target, self.tvm, protocol_tag(self.timing))

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
        MeasureError for an invalid task or a value no measurement can have (a
        median that is not a positive finite number...); see :meth:`to_json`
        for an example.
        """
        if not isinstance(data, (dict, Mapping)):
            raise MeasureError(f"expected a JSON object, got {type(data).__name__}")
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        fields.setdefault("number", None)
        fields.setdefault("timing", None)
        fields.setdefault("cutoff_ms", None)
        fields.setdefault("contention", None)
        record = cls(**fields)
        _ = record.task  # validates kind and workload
        _check_fields(record)
        return record


def _positive(value: Any) -> bool:
    """True for a finite number of ms > 0 and at most :data:`graphtune.safejson.MAX_MS` (not a bool)."""
    return safejson.bounded_ms(value, zero=False)


def _check_fields(record: Record) -> None:
    """Raise MeasureError naming the first field of ``record`` that no measurement can have."""
    optional_types = {"error": str, "threads": int, "number": int, "timing": str}
    problems = [f"{name} must be a {kind.__name__} or null, got {_short(getattr(record, name))}"
                for name, kind in optional_types.items()
                if not isinstance(getattr(record, name), (kind, type(None)))
                or isinstance(getattr(record, name), bool)]
    if not isinstance(record.target, dict):
        problems.append(f"target must be an object, got {_short(record.target)}")
    for name in ("tvm", "time"):
        if not isinstance(getattr(record, name), str):
            problems.append(f"{name} must be a string, got {_short(getattr(record, name))}")
    if record.cutoff_ms is not None and not _positive(record.cutoff_ms):
        problems.append(f"cutoff_ms must be null or a positive finite number, got "
                        f"{_short(record.cutoff_ms)}")
    if record.contention is not None and not (
            isinstance(record.contention, (int, float)) and not isinstance(record.contention, bool)
            and math.isfinite(record.contention) and record.contention >= 0):
        problems.append(f"contention must be null or a finite number >= 0, got "
                        f"{_short(record.contention)}")
    if not isinstance(record.ms, list):
        problems.append(f"ms must be a list, got {_short(record.ms)}")
    elif record.error is None:
        if not record.ms or not all(_positive(m) for m in record.ms):
            problems.append(f"ms must hold positive finite times, got {_short(record.ms)} "
                            f"(at most {safejson.MAX_MS:g} ms)")
        if not _positive(record.median_ms):
            problems.append(f"median_ms must be a positive finite number, got "
                            f"{_short(record.median_ms)} (at most {safejson.MAX_MS:g} ms)")
    elif record.median_ms is not None:
        problems.append(f"median_ms must be null in an error record, got "
                        f"{_short(record.median_ms)}")
    if problems:
        raise MeasureError(problems[0])


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters (a warning stays one readable line)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Records:
    """Measurements of tasks, in memory and (optionally) backed by an append-only file.

    Parameters
    ----------
    path : str or os.PathLike, optional
        The records file (``*.records.jsonl``). It is read if it exists,
        created if not, and appended to by :meth:`append`; its folder must
        exist and be writable (checked at once, before any measurement). None
        keeps records in memory only.
    writable : bool
        False only reads the file (:meth:`load`); appending still needs write access.

    Notes
    -----
    When a task has several records (e.g. an error, then a success after a
    retry), the last one wins. Several processes may share one file: each
    append takes an exclusive lock (``flock``), first reads the lines others
    appended since, and never removes a byte it did not see as a torn tail
    under that lock. Invalid lines (not JSON, unknown task, a median that is
    not a positive finite number...) are skipped with a warning naming the
    file and line.

    Examples
    --------
    >>> recs = Records()
    >>> len(recs)
    0
    """

    def __init__(self, path: str | os.PathLike | None = None, *, writable: bool = True) -> None:
        self.path = None if path is None else os.fspath(path)
        self._index: dict[str, Record] = {}
        self._line: dict[str, int] = {}  # record key -> line number in the file
        self._offset = 0  # bytes of complete lines read so far
        self._lines = 0  # complete lines read so far
        if self.path is not None:
            folder = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(folder):
                raise MeasureError(
                    f"records file {self.path}: folder {folder} does not exist; create it first")
            try:
                with open(self.path, "a+b" if writable else "rb") as handle:
                    tail = self._read_new(handle)
            except OSError as err:
                raise MeasureError(f"records file {self.path} cannot be opened for "
                                   f"{'writing' if writable else 'reading'} ({err.strerror}); "
                                   "choose another path") from None
            if tail.strip() and self._parse(tail, self._lines + 1, quiet=True) is None:
                warnings.warn(
                    f"{self.path}: skipping torn last line {self._lines + 1} ({len(tail)} "
                    "bytes, no newline); it is cut off before the next append", stacklevel=2)

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
give the records file a tune wrote (tune(..., records=PATH), graphtune tune --records PATH)
        """
        if not os.path.exists(path):
            raise MeasureError(
                f"records file {os.fspath(path)} does not exist; give the records file a tune "
                "wrote (tune(..., records=PATH), graphtune tune --records PATH)"
            )
        return cls(path, writable=False)

    def _parse(self, raw: bytes, number: int, quiet: bool = False) -> Record | None:
        """Index the record on line ``number``; warn (unless ``quiet``) and skip a bad one."""
        try:
            record = Record.from_dict(safejson.loads(raw, max_chars=MAX_LINE_CHARS))
        except (ValueError, KeyError, TypeError, MeasureError) as err:
            if not quiet:
                why = safejson.printable(" ".join(str(err).split()))
                why = why if len(why) <= 300 else why[:297] + "..."
                warnings.warn(f"{safejson.printable(self.path)}: skipping unreadable line "
                              f"{number} ({type(err).__name__}: {why}); delete that line to "
                              "silence this warning", stacklevel=4)
            return None
        self._index[record.key] = record
        self._line[record.key] = number
        return record

    def _read_new(self, handle: Any) -> bytes:
        """Index the complete lines after ``self._offset``; return the bytes after the last one."""
        handle.seek(self._offset)
        data = handle.read()
        end = data.rfind(b"\n") + 1
        for raw in data[:end].split(b"\n")[:-1]:
            self._lines += 1
            if raw.strip():
                self._parse(raw, self._lines)
        self._offset += end
        return data[end:]

    def line_of(self, task: Task, target: Any = None, timing: str = TIMING) -> int | None:
        """The line of the records file holding the record :meth:`get` returns, or None.

        Examples
        --------
        >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
        ...                        "dtype": "float32"})
        >>> Records().line_of(t, {"kind": "llvm"}) is None
        True
        """
        return self._line.get(record_key(task, target_key_of(target), tvm_version(),
                                         task_protocol(task, timing)))

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
            try:
                handle = open(self.path, "a+b")
            except OSError as err:
                raise MeasureError(f"records file {self.path} cannot be written "
                                   f"({err.strerror}); choose another path") from None
            with handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released when closed
                self._append_locked(handle, record)
            return
        self._index[record.key] = record

    def _append_locked(self, handle: Any, record: Record) -> None:
        """Append under the lock: read what others appended, mend a torn tail, write, fsync."""
        tail = self._read_new(handle)
        prefix = b""
        if tail and self._parse(tail, self._lines + 1, quiet=True) is not None:
            prefix = b"\n"  # a complete record lacking its newline (edited by hand)
            self._lines += 1
        elif tail:
            # no writer is mid-line while we hold the lock: these bytes are a crashed write
            os.ftruncate(handle.fileno(), self._offset)
        handle.write(prefix + record.to_json().encode() + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
        self._lines += 1
        self._offset = os.fstat(handle.fileno()).st_size
        self._index[record.key] = record
        self._line[record.key] = self._lines

    def reusable(self, task: Task, target: Any = None, timing: str = TIMING,
                 retry_errors: bool = False) -> Record | None:
        """The record :func:`~graphtune.measure.measure` takes instead of measuring ``task``:
        :meth:`get`'s, unless it is an error and ``retry_errors`` asks to measure it again, or it
        was timed while other work held the CPUs (``contention`` above
        :data:`graphtune.measure.contention.LIMIT`) and disturbed timings are retaken
        (:func:`graphtune.measure.contention.retakes`): a rerun on a quieter machine heals it.

        Examples
        --------
        >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
        ...                        "dtype": "float32"})
        >>> recs = Records()
        >>> recs.append(Record.failure(t, {"kind": "llvm"}, "build: boom"))
        >>> recs.reusable(t, {"kind": "llvm"}).ok
        False
        >>> recs.reusable(t, {"kind": "llvm"}, retry_errors=True) is None  # measured again
        True
        """
        record = self.get(task, target, timing)
        if record is None or (not record.ok and retry_errors):
            return None
        if contention.disturbed(record.contention) and contention.retakes():
            return None
        return record

    def get(self, task: Task, target: Any = None, timing: str = TIMING) -> Record | None:
        """The record of ``task`` on ``target`` with the installed TVM and protocol ``timing``, or None.

        Parameters
        ----------
        task : Task
        target : tvm.target.Target, dict or None
            See :func:`target_key_of`; None is the host target.
        timing : str
            Timing protocol of the runner (default the current one); the record is the one
            of the protocol it times ``task`` with
            (:func:`~graphtune.measure.timing.task_protocol`).

        Examples
        --------
        >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
        ...                        "dtype": "float32"})
        >>> Records().get(t, {"kind": "llvm"}) is None
        True
        """
        return self._index.get(record_key(task, target_key_of(target), tvm_version(),
                                          task_protocol(task, timing)))
