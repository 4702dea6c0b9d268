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
hand edit) is skipped, and its probe compiled again. Lines of older graphtune
code are never matched again; deleting the file only costs the next tune its
probe compiles.

Examples
--------
>>> import os, tempfile
>>> from graphtune.measure import Task
>>> index = ProbeIndex(os.path.join(tempfile.mkdtemp(), "m.probes.jsonl"), lambda task: True)
>>> t = Task("segment", {"ops": "add", "args": [[[1, 8], "float32"]], "sha": "0" * 16})
>>> index.add("key0", [{"node": "a", "layout": "NCHW8c", "label": "add", "task": t, "bare": None}])
>>> [g["task"] == t for g in ProbeIndex(index.path, lambda task: True).get("key0")]
[True]
>>> ProbeIndex(index.path, lambda task: False).get("key0") is None  # its task has no record
True
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

from ..errors import MeasureError
from ..measure.task import Task, canonical_json, tvm_version

__all__ = ["ProbeIndex", "probe_key", "index_path_of"]


@functools.cache
def _code_digest() -> str:
    """Content hash of graphtune's Python sources (what compiles a probe)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


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
                           "tvm": tvm_version(), "code": _code_digest()})
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
        if self.path is not None and os.path.exists(self.path):
            with open(self.path, "rb") as handle:
                for raw in handle:
                    self._read(raw)

    def _read(self, raw: bytes) -> None:
        try:
            line = json.loads(raw)
            groups = [{**g, "task": _task_of(g["task"]), "bare": _task_of(g["bare"])}
                      for g in line["groups"]]
            if not all(set(g) == _FIELDS for g in groups):
                return
        except (ValueError, KeyError, TypeError, AttributeError, MeasureError):
            return  # a torn or edited line: that probe is compiled again
        self._groups[line["key"]] = groups

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
        with open(self.path, "a+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released when closed
            size = handle.seek(0, os.SEEK_END)
            torn = size > 0 and handle.seek(size - 1) >= 0 and handle.read(1) != b"\n"
            handle.write((b"\n" if torn else b"") + line.encode() + b"\n")
            handle.flush()
