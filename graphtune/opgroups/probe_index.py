"""The probe index: which op groups each compiled probe runs, so that a re-tune need not compile it.

:func:`graphtune.opgroups.pricing.op_costs` compiles the model once per probe
(rewrite, legalize, fuse, schedule: seconds each, 18 s for ResNet-18's probes)
to learn which PrimFuncs it runs and which node owns each; on a re-tune their
timings are in the records already. The index keeps the groups each probe
prices, one JSON line per probe, keyed by everything they depend on: the model
(the structural hash of the imported module, weights included), each node's
candidate (op, layouts, knobs) and join layout, the pairs the probe prices,
the target, the TVM version and graphtune's own source (any change to
graphtune's code is a new key: no stale list survives a new compiler). A probe
whose groups are known and all in the records is not compiled; one with a
group the records lack (deleted, or an error being retried) is compiled as
before, as that group's task must be built.

Lines are appended whole under a lock (several runs may share the file), after
a newline if the last one was torn; an unreadable line (a crash mid-write, a
hand edit, a line nested too deep or too long: :mod:`graphtune.safejson`) is
skipped, with one warning per file naming the first, and its probe compiled
again. Lines of older graphtune code are never matched again; deleting the
file only costs the next tune its probe compiles.
The index is a cache: a file that cannot be read or written (read-only, a
folder, a full disk...) costs a warning, once, and the tune goes on without it.

Examples
--------
>>> import os, tempfile
>>> from graphtune.measure import Task
>>> from graphtune.ops import Op
>>> index = ProbeIndex(os.path.join(tempfile.mkdtemp(), "m.probes.jsonl"), lambda task: True)
>>> t = Task(Op.OP_GROUP, {"ops": "add", "args": [[[1, 8], "float32"]], "sha": "0" * 16})
>>> index.add("key0", [{"node": "a", "layout": "NCHW8c", "label": "add", "task": t, "bare": None}])
>>> [g["task"] == t for g in ProbeIndex(index.path, lambda task: True).get("key0")]
[True]
>>> ProbeIndex(index.path, lambda task: False).get("key0") is None  # its task has no record
True
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import warnings
from typing import Any, Callable

from .. import safejson
from ..errors import MeasureError
from ..measure.task import Task, canonical_json, code_digest, tvm_version

__all__ = ["ProbeIndex", "probe_key", "index_path_of"]


def probe_key(model_hash: int, probe: dict, target_key: dict) -> str:
    """The index key of one probe of a model.

    Parameters
    ----------
    model_hash : int
        ``tvm_ffi.structural_hash`` of the imported module.
    probe : dict
        What the probe compiles and which of its groups are kept: e.g.
        ``{"nodes": {node: [op, in_layout, out_layout, knobs]}, "pairs": [...]}``.
    target_key : dict
        The target description (:func:`graphtune.measure.target_key_of`).

    Examples
    --------
    >>> probe = {"nodes": {"c": ["conv2d", "NCHW8c", "NCHW8c", {"ic_bn": 8}]}, "pairs": []}
    >>> a, b = probe_key(1, probe, {"kind": "llvm"}), probe_key(2, probe, {"kind": "llvm"})
    >>> len(a), a != b
    (40, True)
    """
    text = canonical_json({"model": str(model_hash), "probe": probe, "target": target_key,
                           "tvm": tvm_version(), "code": code_digest()})
    return hashlib.sha1(text.encode()).hexdigest()


def index_path_of(records_path: str | os.PathLike) -> str:
    """The probe index kept beside a records file (``X.records.jsonl`` -> ``X.probes.jsonl``).

    Examples
    --------
    >>> index_path_of("out/resnet18.records.jsonl")
    'out/resnet18.probes.jsonl'
    >>> index_path_of("my-records")
    'my-records.probes.jsonl'
    """
    path = os.fspath(records_path)
    stem = path.removesuffix(".jsonl").removesuffix(".records")
    return stem + ".probes.jsonl"


_FIELDS = {"node", "layout", "label", "task", "bare"}
"""What the index keeps of a group (the fields of :class:`~graphtune.opgroups.pricing.OpGroup`)."""


def _task_json(task: Task | None) -> dict | None:
    return None if task is None else {"kind": str(task.kind), "workload": task.workload,
                                      "knobs": task.knobs}


def _task_of(data: dict | None) -> Task | None:
    return None if data is None else Task(data["kind"], data["workload"], data["knobs"])


MAX_LINE_BYTES = 16 << 20
"""Longest line read (bytes); a probe's line lists its op groups, a few hundred bytes each."""

_TYPES: dict[str, type | tuple[type, ...]] = {
    "node": (str, type(None)), "layout": str, "label": str, "task": Task, "bare": (Task, type(None))}
"""What each field of a group read back must be."""


class ProbeIndex:
    """Op groups of compiled probes by :func:`probe_key`, in memory and optionally in a file.

    Parameters
    ----------
    path : str, os.PathLike or None
        JSON-lines file, read if it exists and appended to (None: memory only).
    recorded : callable
        ``recorded(task) -> bool``: whether the records hold ``task`` (then it
        needs no build); :meth:`get` answers only for probes whose every task is.
    """

    def __init__(self, path: str | os.PathLike | None, recorded: Callable[[Task], bool]) -> None:
        self.path = None if path is None else os.fspath(path)
        self.recorded = recorded
        self._groups: dict[str, list[dict]] = {}
        if self.path is not None and os.path.lexists(self.path):
            try:
                if not stat.S_ISREG(os.stat(self.path).st_mode):  # a folder, a device, a FIFO
                    raise OSError(0, "not a regular file")
                skipped = []  # (line, why) of each unreadable line: its probe is compiled again
                with open(self.path, "rb") as handle:
                    number = 0
                    while raw := handle.readline(MAX_LINE_BYTES + 1):
                        number += 1
                        why: str | None
                        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                            while (rest := handle.readline(MAX_LINE_BYTES)) and \
                                    not rest.endswith(b"\n"):
                                pass
                            why = f"longer than {MAX_LINE_BYTES >> 20} MiB"
                        else:
                            why = self._read(raw) if raw.strip() else None
                        if why is not None:
                            skipped.append((number, why))
            except OSError as err:
                self._give_up("read", err)
                return
            if skipped:
                line, why = skipped[0]
                warnings.warn(f"probe index {safejson.printable(self.path)}: skipping "
                              f"{len(skipped)} unreadable line(s) (line {line}: "
                              f"{safejson.printable(why)}); their probes are compiled again; "
                              "delete the file to silence this warning", UserWarning, stacklevel=2)

    def _give_up(self, doing: str, err: OSError) -> None:
        """Warn once that the index file cannot be used; keep the index in memory only."""
        warnings.warn(f"probe index {safejson.printable(self.path)} cannot be {doing} "
                      f"({err.strerror or err}); tuning goes on without it (probes it would "
                      "have spared are compiled); make the file writable or delete it",
                      UserWarning, stacklevel=3)
        self.path = None

    def _read(self, raw: bytes) -> str | None:
        """Index one line; return why it cannot be read (a torn or edited line), or None."""
        try:
            line = safejson.loads(raw, max_chars=MAX_LINE_BYTES)
            groups = [{**g, "task": _task_of(g["task"]), "bare": _task_of(g["bare"])}
                      for g in line["groups"]]
            if not isinstance(line["key"], str):
                return "its key is not a string"
            for g in groups:
                if set(g) != _FIELDS:
                    return f"a group's fields are not {', '.join(sorted(_FIELDS))}"
                wrong = [k for k, t in _TYPES.items() if not isinstance(g[k], t)]
                if wrong:
                    return f"a group's {wrong[0]} has the wrong type"
        except (ValueError, KeyError, TypeError, AttributeError, MeasureError) as err:
            why = " ".join(str(err).split())
            return f"{type(err).__name__}: {why if len(why) <= 200 else why[:197] + '...'}"
        self._groups[line["key"]] = groups
        return None

    def get(self, key: str) -> list[dict] | None:
        """The groups of probe ``key`` (``node``, ``layout``, ``label``, ``task``, ``bare``),
        or None if unknown or if one of their tasks is not recorded."""
        groups = self._groups.get(key)
        if groups is None or not all(self.recorded(t) for g in groups
                                     for t in (g["task"], g["bare"]) if t is not None):
            return None
        return groups

    def add(self, key: str, groups: list[dict[str, Any]]) -> None:
        """Keep the groups of probe ``key`` (appended to the file as one line)."""
        self._groups[key] = groups
        if self.path is None:
            return
        line = canonical_json({"key": key, "groups": [
            {**g, "task": _task_json(g["task"]), "bare": _task_json(g["bare"])} for g in groups]})
        try:
            with open(self.path, "a+b") as handle:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released when closed
                size = handle.seek(0, os.SEEK_END)
                torn = size > 0 and handle.seek(size - 1) >= 0 and handle.read(1) != b"\n"
                handle.write((b"\n" if torn else b"") + line.encode() + b"\n")
                handle.flush()
        except OSError as err:  # read-only, a folder, disk full...: a cache, not a failure
            self._give_up("written", err)
