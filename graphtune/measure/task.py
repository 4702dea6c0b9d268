"""What to measure: a :class:`Task` is one kernel candidate or one layout transform.

A task is identified by its kind, workload and knobs. Together with the
target it runs on and the TVM version it was built with, its canonical JSON
form (sorted keys, no whitespace, lists for tuples) is the key of its record:
the same task gets the same key in every process and on every run.

Examples
--------
>>> t = Task("transform", {"shape": (1, 32, 8, 8), "src": "NCHW", "dst": "NCHW16c",
...                        "dtype": "float32"})
>>> t.key
'{"kind":"transform","knobs":{},"workload":{"dst":"NCHW16c","dtype":"float32","shape":[1,32,8,8],"src":"NCHW"}}'
>>> t == Task("transform", {"src": "NCHW", "dst": "NCHW16c", "dtype": "float32",
...                         "shape": [1, 32, 8, 8]})
True
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import MeasureError
from ..ops import TASK_KINDS, WORKLOAD_FIELDS, Op, as_op

__all__ = ["PROTOCOL_RENAMES", "TIMING", "Task", "canonical_json", "code_digest", "protocol_tag",
           "record_key", "tvm_version"]


def canonical_json(value: Any) -> str:
    """Canonical JSON text of ``value``: sorted keys, no spaces, tuples as lists.

    Examples
    --------
    >>> canonical_json({"b": (1, 2), "a": True})
    '{"a":true,"b":[1,2]}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _plain(value: Any, what: str) -> tuple[dict, str]:
    """A JSON round-trip copy of ``value`` (tuples become lists) and its canonical JSON text,
    or MeasureError."""
    if not isinstance(value, (dict, Mapping)):  # dict first: typing.Mapping checks are slow
        raise MeasureError(f"task {what} must be a dict, got {type(value).__name__}")
    try:
        text = canonical_json(dict(value))
    except (TypeError, ValueError) as err:
        raise MeasureError(f"task {what} {value!r} is not JSON-serialisable: {err}") from None
    return json.loads(text), text


@dataclass(frozen=True, eq=False)
class Task:
    """One thing to measure: a kernel candidate or a layout transform.

    Parameters
    ----------
    kind : Op or str
        One of :data:`graphtune.ops.TASK_KINDS` (stored as an :class:`~graphtune.ops.Op`).
    workload : dict
        The workload dict of the shared contract (conv2d/depthwise/dense), or
        ``{"shape": [N, C, H, W], "src": ..., "dst": ..., "dtype": ...}`` for a
        transform (``shape`` is the logical NCHW shape).
    knobs : dict, optional
        Schedule knobs of the candidate; empty for transforms.
    payload : str, optional
        Not part of the key: for an op group, the scheduled PrimFunc
        (``tvm.ir.save_json``) whose content hash is the workload's ``sha``.

    Examples
    --------
    >>> wl = {"data": [1, 16, 8, 8], "kernel": [16, 16, 3, 3], "strides": [1, 1],
    ...       "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1, "dtype": "float32"}
    >>> Task("conv2d", wl, {"ic_bn": 8, "oc_bn": 16, "reg_n": 8, "unroll_kw": True}).kind
    'conv2d'
    """

    kind: Op
    workload: dict
    knobs: dict = field(default_factory=dict)
    payload: str | None = field(default=None, repr=False)
    # derived in __post_init__: canonical_json of kind, knobs and workload, and the key
    _texts: tuple[str, str, str] = field(init=False, repr=False, compare=False)
    _key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            kind = as_op(self.kind, TASK_KINDS, "task kind")
        except ValueError as err:
            raise MeasureError(str(err)) from None
        object.__setattr__(self, "kind", kind)
        workload, workload_text = _plain(self.workload, "workload")
        missing = [k for k in WORKLOAD_FIELDS[kind] if k not in workload]
        if missing:
            raise MeasureError(
                f"{self.kind} task workload {workload} lacks field(s) {', '.join(missing)}"
            )
        knobs, knobs_text = _plain(self.knobs, "knobs")
        object.__setattr__(self, "workload", workload)
        object.__setattr__(self, "knobs", knobs)
        # canonical_json of {kind, knobs, workload}, from the texts at hand (sorted keys): a
        # records file of 50,000 lines makes as many tasks when it is read
        object.__setattr__(self, "_texts", (canonical_json(str(kind)), knobs_text, workload_text))
        object.__setattr__(self, "_key", '{"kind":%s,"knobs":%s,"workload":%s}' % self._texts)

    @property
    def key(self) -> str:
        """Canonical JSON of (kind, workload, knobs), identical in every process."""
        return self._key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Task) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Task({self.kind!r}, {self.workload!r}, {self.knobs!r})"


TIMING = "written-input"
"""The protocol kernels are timed with by default; part of every record key, so that records
taken another way never mix.

``written-input``: before every timed call the weights are flushed from the CPU caches and
the data input is rewritten by a copy parallel over its outermost axis, as its producer
leaves it inside a model; memory-bound tasks (depthwise convs, layout transforms, op groups
other than a fused conv / dense kernel) are handed to ``filled-cache``, which first also
fills the last-level cache with other data
(:func:`graphtune.measure.timing.task_protocol`). Records of other protocols are not
reused: lookups ignore them and the tasks are measured again. The rules of each protocol
are in :data:`graphtune.measure.timing.PROTOCOLS`; the measurements behind them in
``docs/timing.md``."""

PROTOCOL_RENAMES = {
    "flush-v1": "long-repeats",
    "flush-v2": "cold-output",
    "flush-v3": "hot-input",
    "flush-v4": "written-input",
    "flush-v5": "filled-cache",
}
"""Old timing tags (records written before the protocols were named by what they do) and the
protocol each one is: records carrying an old tag are read and matched as that protocol."""


def protocol_tag(name: str | None) -> str | None:
    """The current name of timing protocol ``name`` (an old tag of :data:`PROTOCOL_RENAMES`
    becomes its new name; any other name, or None, is returned as is).

    Examples
    --------
    >>> protocol_tag("flush-v4"), protocol_tag("written-input"), protocol_tag(None)
    ('written-input', 'written-input', None)
    """
    return PROTOCOL_RENAMES.get(name, name) if name is not None else None


@functools.cache
def tvm_version() -> str:
    """The version of the installed TVM and the name of graphtune's TIR pipeline
    (:data:`graphtune.x86.lowering.PIPELINE`, renamed when what it does changes), part of every
    record key: a kernel built another way is measured again.

    Examples
    --------
    >>> tvm_version().startswith("0.")
    True
    """
    import tvm

    from ..x86.lowering import PIPELINE

    return f"{tvm.__version__}+{PIPELINE}"


@functools.cache
def code_digest() -> str:
    """Content hash of graphtune's Python sources: part of the key of what is measured on a
    compiled model (in-model times, op-group probes), which any change to how graphtune compiles
    can alter -- those are measured again after an upgrade; kernel records are not keyed by it.

    Examples
    --------
    >>> len(code_digest())
    40
    """
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def record_key(task: Task, target: Mapping, tvm: str, timing: str | None = TIMING) -> str:
    """Key of ``task``'s record for target description ``target``, TVM ``tvm`` and ``timing``.

    Examples
    --------
    >>> t = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
    ...                        "dtype": "float32"})
    >>> record_key(t, {"kind": "llvm"}, "0.27.0")[:40]
    '{"kind":"transform","knobs":{},"target":'
    """
    kind, knobs, workload = task._texts  # canonical_json of the whole, keys in sorted order
    return ('{"kind":%s,"knobs":%s,"target":%s,"timing":%s,"tvm":%s,"workload":%s}'
            % (kind, knobs, canonical_json(dict(target)), canonical_json(timing),
               canonical_json(tvm), workload))
