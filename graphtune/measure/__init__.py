"""Measure kernel candidates and layout transforms on a target, with a resumable records file.

:func:`measure` builds each :class:`Task` (a graphtune.x86 kernel with its
knobs, or a layout transform) in isolated worker processes
(:mod:`graphtune.procs`), times it with random inputs, and appends one
:class:`Record` per task to an append-only JSON-lines file; :class:`Records`
reads such a file back and finds the record of a task on a target. Where the
timing happens is a :class:`Runner`'s job (:class:`LocalRunner` by default).

Examples
--------
>>> t = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW16c",
...                        "dtype": "float32"})
>>> [rec] = measure([t], min_repeat_ms=5, progress=False)
>>> rec.ok, rec.kind
(True, 'transform')
"""

from .engine import measure
from .records import Record, Records, target_key_of
from .rpc import RPCRunner
from .runner import LocalRunner, Runner
from .task import Task

__all__ = ["LocalRunner", "RPCRunner", "Record", "Records", "Runner", "Task", "measure",
           "target_key_of"]
