"""Time a built kernel: random inputs, the data input rewritten in parallel and the weights flushed
before each call, calls per repeat from the wall time, repeats.

:func:`time_module` works on any TVM module and device (local or an RPC
session's); :func:`time_library` is what the local timing worker runs.

Examples
--------
>>> import tempfile, graphtune.x86 as x86
>>> from graphtune.measure import Task
>>> from graphtune.measure.build import build_task, prim_func_of
>>> t = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW8c",
...                        "dtype": "float32"})
>>> built = build_task(prim_func_of, t, x86.host_target(), tempfile.mkdtemp())
>>> out = time_library(built["path"], built["args"], repeat=3, min_repeat_ms=5)
>>> len(out["ms"]) >= 3, all(m > 0 for m in out["ms"]), out["number"] >= 1
(True, True, True)
"""

from __future__ import annotations

import functools
import glob
import math
import statistics
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import MeasureError
from ..ops import Op, op_class
from . import contention
from .task import TIMING, protocol_tag

__all__ = ["PROTOCOLS", "MAX_POLLUTION_BYTES", "Protocol", "protocol", "memory_bound",
           "task_protocol", "last_level_cache_bytes", "random_array", "time_module", "time_library"]

_FLUSH = "cache_flush_cpu_non_first_arg"
"""TVM runtime function flushing the CPU caches of every argument but the first."""
_FLUSH_WEIGHTS = "graphtune.flush_weights"
"""Ours: every argument but the first and the last (:func:`_flush_weights`)."""
_WRITE_INPUT = "graphtune.write_input_flush_weights"
"""Ours: the data input rewritten by a parallel copy, then the protocol's flush."""
_COPIERS: dict = {}  # dtype -> compiled parallel copy of a flat tensor of any length
_COPY_CHUNK = 4096

_INPUTS: dict = {}  # (position, shape, dtype) -> device tensor, reused by later kernels
_MAX_CACHED = 16


@dataclass(frozen=True)
class Protocol:
    """A timing protocol: what the caches hold before each timed call, and how calls per repeat,
    repeats and early cut-offs are decided.

    Every protocol flushes the weights from the caches before each timed call
    (inside a model they come from memory) and reports the mean time of the
    calls of each repeat. The protocols differ in what else they do before a
    call (:data:`PROTOCOLS`); ``docs/timing.md`` has the measurements behind each rule.

    Attributes
    ----------
    name : str
        The tag stored in records (:data:`graphtune.measure.task.TIMING` is the default).
    number_from : str
        ``"wall"``: calls per repeat from the measured wall time of one flushed
        call (kernel + flush + call overhead), so a repeat costs about
        ``min_repeat_ms`` of wall time however slow the flush is; ``"kernel"``:
        from the kernel time alone (``long-repeats``: a repeat costs
        ``min_repeat_ms`` × (kernel + flush) / kernel).
    noise : float
        Relative spread ``(max - min) / median`` of the repeats above which
        the timing is noisy and ``extra_repeats`` more repeats are taken.
    extra_repeats : int
        Repeats added once when noisy.
    cutoff : float or None
        A kernel candidate whose trial calls (the faster of two flushed calls) take more
        than ``cutoff`` times the best measured candidate of the same
        (op, workload, in_layout, out_layout) is not timed further: its record
        keeps the trial times and the bound it exceeded (``Record.cutoff_ms``).
        None: never cut off.
    flush_output : bool
        Also flush the output before each call (``long-repeats``, ``cold-output``).
        Inside a model the output lands in a buffer the runtime reuses, which is
        in cache, so memory-bound kernels timed this way run slower than in the model.
    write_input : bool
        Before each call, rewrite the data input (the first argument) with its
        own values by a copy parallel over its outermost axis on the runtime's
        threads (``written-input``, ``filled-cache``), so each core holds the half
        it wrote and reads the other half from the other core's cache, as after
        the producing op inside a model.
    pollute : bool
        Before the input is rewritten, fill the last-level cache with other
        data (:func:`last_level_cache_bytes`: a parallel copy between two
        buffers of half of it each, at most :data:`MAX_POLLUTION_BYTES`), as the
        layers before a producer leave it inside a model (``filled-cache``).
    memory_timing : str or None
        The protocol this one times :func:`memory_bound` tasks with
        (:func:`task_protocol`); None: the same.

    Examples
    --------
    >>> p = PROTOCOLS[TIMING]
    >>> p.number_from, p.write_input, p.flush_output, p.memory_timing
    ('wall', True, False, 'filled-cache')
    """

    name: str
    number_from: str
    noise: float
    extra_repeats: int
    cutoff: float | None
    flush_output: bool = True
    write_input: bool = False
    pollute: bool = False
    memory_timing: str | None = None


PROTOCOLS = {p.name: p for p in (
    Protocol("long-repeats", number_from="kernel", noise=math.inf, extra_repeats=0, cutoff=None),
    Protocol("cold-output", number_from="wall", noise=0.05, extra_repeats=3, cutoff=1.15),
    Protocol("hot-input", number_from="wall", noise=0.05, extra_repeats=3, cutoff=1.15,
             flush_output=False),
    Protocol("written-input", number_from="wall", noise=0.05, extra_repeats=3, cutoff=1.15,
             flush_output=False, write_input=True, memory_timing="filled-cache"),
    Protocol("filled-cache", number_from="wall", noise=0.05, extra_repeats=3, cutoff=1.15,
             flush_output=False, write_input=True, pollute=True),
)}
"""Known protocols by name (old tags ``flush-v1`` ... ``flush-v5``, in this order, are read as
these: :data:`graphtune.measure.task.PROTOCOL_RENAMES`). Before each timed call:

- ``long-repeats``: weights and output flushed; repeats of at least ``min_repeat_ms`` of
  *kernel* time (a slow flush makes them long). Kept to compare against
  (``benchmarks/tuning_cost.py``).
- ``cold-output``: weights and output flushed; repeats of ``min_repeat_ms`` of wall time,
  cut-off. What RPC servers time with: they cannot run graphtune's flush of the weights alone.
- ``hot-input``: weights flushed; the data input hot in every core's cache.
- ``written-input`` (default, :data:`~graphtune.measure.task.TIMING`): weights flushed, the data
  input rewritten in parallel as its producer leaves it. Times compute-bound tasks and hands
  memory-bound ones to ``filled-cache`` (:func:`task_protocol`).
- ``filled-cache``: the last-level cache filled with other data, then as ``written-input``.

A runner's lookups reuse only records of the protocol it times a task with."""

MAX_POLLUTION_BYTES = 64 << 20
"""Most data a ``filled-cache`` call moves through the caches before the kernel (a bound on its
cost: on a last-level cache of hundreds of MB, filling it would cost more than the kernels
timed; an LLC shared with other guests holds less of this process's data anyway)."""
_POLLUTERS: dict = {}  # bytes -> (source, target) of the pollution copy


def protocol(name: str) -> Protocol:
    """The :class:`Protocol` called ``name`` (or tagged ``name`` in older records).

    Raises
    ------
    MeasureError
        For an unknown name (the message lists the known ones).

    Examples
    --------
    >>> protocol("written-input").cutoff
    1.15
    >>> protocol("flush-v4").name  # an old tag
    'written-input'
    >>> protocol("hot")
    Traceback (most recent call last):
    ...
    graphtune.errors.MeasureError: unknown timing protocol 'hot'; known: long-repeats, cold-output, ...
    """
    current = protocol_tag(name)
    if current not in PROTOCOLS:
        raise MeasureError(f"unknown timing protocol {name!r}; known: {', '.join(PROTOCOLS)} "
                           "(old tags flush-v1 ... flush-v5)")
    return PROTOCOLS[current]


def memory_bound(task) -> bool:
    """Whether ``task``'s time depends on where its data sits more than on arithmetic.

    Every op but the compute-bound ones of :data:`graphtune.ops.OP_CLASSES` is: depthwise
    convs, layout transforms and every op group but a fused conv / dense kernel; conv, group
    conv, transposed conv and dense kernels (and their op groups) are not.

    Examples
    --------
    >>> from graphtune.measure import Task
    >>> memory_bound(Task(Op.OP_GROUP, {"ops": "max_pool2d", "args": [], "sha": "0"}))
    True
    >>> memory_bound(Task(Op.OP_GROUP, {"ops": "conv2d", "args": [], "sha": "0"}))
    False
    """
    op = task.workload["ops"] if task.kind == Op.OP_GROUP else task.kind
    return not op_class(op).compute_bound


def task_protocol(task, timing: str = TIMING) -> str:
    """Name of the protocol ``timing`` times ``task`` with (its ``memory_timing``, if any, for
    :func:`memory_bound` tasks).

    Examples
    --------
    >>> from graphtune.measure import Task
    >>> t = Task("transform", {"shape": [1, 16, 4, 4], "src": "NCHW", "dst": "NCHW8c",
    ...                        "dtype": "float32"})
    >>> task_protocol(t), task_protocol(t, "cold-output")
    ('filled-cache', 'cold-output')
    """
    proto = protocol(timing)
    if proto.memory_timing is not None and memory_bound(task):
        return proto.memory_timing
    return proto.name


@functools.cache
def last_level_cache_bytes() -> int:
    """Size of this CPU's largest cache as Linux reports it (sysfs, read once), 32 MiB if unknown.

    Examples
    --------
    >>> last_level_cache_bytes() > 0
    True
    """
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        with open(path) as file:
            text = file.read().strip().upper()
        if text and text[-1] in units and text[:-1].isdigit():
            sizes.append(int(text[:-1]) * units[text[-1]])
        elif text.isdigit():
            sizes.append(int(text))
    return max(sizes, default=32 << 20)


def random_array(shape: Sequence[int], dtype: str, seed: int = 0) -> np.ndarray:
    """Random values of ``shape`` and ``dtype`` (uniform in [-1, 1) for floats; ``uint16``: the
    bits of such bfloat16 values, how graphtune's kernels store bfloat16), never empty.

    Examples
    --------
    >>> a = random_array([2, 3], "float32")
    >>> a.shape, a.dtype.name, bool((a != 0).any()), bool((abs(a) <= 1).all())
    ((2, 3), 'float32', True, True)
    >>> b = random_array([64], "uint16")
    >>> bool((abs((b.astype("uint32") << 16).view("float32")) <= 1).all())
    True
    """
    rng = np.random.default_rng(seed)
    kind = np.dtype(dtype)
    if kind in (np.float32, np.float64):  # drawn in the target precision: 3x faster for fp32
        out = rng.random(size=tuple(shape), dtype=kind)
        out *= 2
        out -= 1
        return out
    if np.issubdtype(kind, np.floating):
        return rng.uniform(-1.0, 1.0, size=tuple(shape)).astype(dtype)
    if kind == np.uint16:  # bfloat16 bits (truncated: any bfloat16 in [-1, 1) will do)
        return (random_array(shape, "float32", seed).view(np.uint32) >> 16).astype(np.uint16)
    return rng.integers(-4, 5, size=tuple(shape)).astype(dtype)


def time_module(module, dev, args: Sequence, repeat: int, min_repeat_ms: float, *,
                timing: str = TIMING, cutoff_ms: float | None = None) -> dict:
    """Time ``module["main"](*args)`` on ``dev`` following the protocol ``timing``.

    After an unflushed warm-up call, two flushed *trial calls* measure the
    kernel time and the wall time of a flushed call; ``number`` calls per repeat are chosen so
    that a repeat lasts about ``min_repeat_ms`` (of wall time, or of kernel time for
    ``long-repeats``), then ``repeat`` repeats are timed (plus the protocol's extra repeats
    when they disagree). Before every timed call the weights are flushed from the caches
    (every argument but the first, the data input its producer just wrote, and the last, the
    output, unless the protocol flushes it too), so they come from memory as inside a model,
    and (``written-input``, ``filled-cache``) the data input is rewritten in parallel as its
    producer would leave it.

    Parameters
    ----------
    module, dev
        A TVM module with a ``main`` function and its device.
    args : sequence of tvm.runtime.Tensor
        The data input first, the output last.
    repeat : int
        Repeats (at least).
    min_repeat_ms : float
        Budget of one repeat (see above); at least one call.
    timing : str
        Protocol name (:data:`PROTOCOLS`).
    cutoff_ms : float, optional
        Stop after the trial calls if the kernel takes longer than this (the
        protocol's cut-off bound for its group, see :class:`Protocol`).

    Returns
    -------
    dict
        ``{"ms": [mean ms per call of each repeat], "number": calls per repeat,
        "wall_ms": wall ms of one flushed call, "cutoff_ms": cutoff_ms or None}``;
        after a cut-off ``ms`` holds the two trial calls and ``number`` is 1.

    Examples
    --------
    >>> import numpy as np, tvm
    >>> from tvm import te
    >>> x = te.placeholder((64,), name="x")
    >>> f = te.create_prim_func([x, te.compute((64,), lambda i: x[i] + 1.0)])
    >>> mod = tvm.compile(f.with_attr("global_symbol", "main"), target={"kind": "llvm"}).jit()
    >>> dev = tvm.cpu(0)
    >>> args = [tvm.runtime.tensor(random_array([64], "float32"), dev) for _ in range(2)]
    >>> out = time_module(mod, dev, args, repeat=3, min_repeat_ms=1)
    >>> len(out["ms"]) >= 3, out["number"] >= 1, out["cutoff_ms"] is None
    (True, True, True)
    >>> time_module(mod, dev, args, repeat=3, min_repeat_ms=1, cutoff_ms=1e-9)["cutoff_ms"]
    1e-09
    """
    proto = protocol(timing)
    flush = _FLUSH if proto.flush_output else _flush_weights(dev)
    if proto.write_input:
        flush = _write_input(args[0], flush, pollute=proto.pollute)
    module["main"](*args)  # warm-up (first-call costs would inflate the wall time below)
    dev.sync()
    trial = module.time_evaluator("main", dev, number=1, repeat=2, f_preproc=flush)
    start = time.perf_counter()
    trial_s = trial(*args).results
    wall = (time.perf_counter() - start) / len(trial_s)
    kernel = max(min(trial_s), 1e-7)
    result = {"wall_ms": wall * 1000.0, "cutoff_ms": None}
    if cutoff_ms is not None and kernel * 1000.0 > cutoff_ms:
        return {**result, "ms": [t * 1000.0 for t in trial_s], "number": 1, "cutoff_ms": cutoff_ms}
    per_call = {"wall": max(wall, kernel), "kernel": kernel}[proto.number_from]
    number = max(1, math.ceil(min_repeat_ms / 1000.0 / per_call))
    ms = _repeats(module, dev, args, number, repeat, flush)
    if (max(ms) - min(ms)) / statistics.median(ms) > proto.noise:
        ms += _repeats(module, dev, args, number, proto.extra_repeats, flush)
    return {**result, "ms": ms, "number": number}


def _flush_weights(dev) -> str:
    """Name of a global function flushing every argument but the first and the last (registered
    here, so the timing must run in this process: an RPC server cannot call it)."""
    import tvm
    from tvm.rpc.base import RPC_SESS_MASK

    if dev.dlpack_device_type() >= RPC_SESS_MASK:
        raise MeasureError("this protocol flushes the weights from a function of this process, "
                           "which an RPC server cannot call; time remote kernels with "
                           "timing='cold-output'")
    if tvm.get_global_func(_FLUSH_WEIGHTS, allow_missing=True) is None:
        flush = tvm.get_global_func(_FLUSH)
        tvm.register_global_func(_FLUSH_WEIGHTS, lambda *args: flush(*args[:-1]))
    return _FLUSH_WEIGHTS


def _write_input(data, flush: str, pollute: bool = False) -> str:
    """Name of a global function (optionally filling the last-level cache with other data, then)
    rewriting ``data`` with its own values by a parallel copy, then calling ``flush``
    (re-registered for every timing: it holds this timing's input)."""
    import tvm

    count = math.prod(int(d) for d in data.shape)
    source = tvm.runtime.tensor(data.numpy().reshape(-1), data.device)
    target = data._create_view((count,))
    copy = _copier(str(data.dtype))
    then = tvm.get_global_func(flush)
    others = (_copier("float32"), _polluter(data.device)) if pollute else None

    def write_then_flush(*args):
        if others is not None:
            others[0](*others[1])
        copy(source, target)
        then(*args)

    tvm.register_global_func(_WRITE_INPUT, write_then_flush, override=True)
    return _WRITE_INPUT


def _polluter(dev) -> tuple:
    """The two buffers a ``filled-cache`` call copies between: half of the last-level cache each
    (at most :data:`MAX_POLLUTION_BYTES` together), made once per process."""
    import tvm

    size = min(last_level_cache_bytes(), MAX_POLLUTION_BYTES) // 2
    if size not in _POLLUTERS:
        _POLLUTERS[size] = (tvm.runtime.tensor(random_array([size // 4], "float32"), dev),
                            tvm.runtime.tensor(np.zeros(size // 4, "float32"), dev))
    return _POLLUTERS[size]


def _copier(dtype: str):
    """A compiled copy of a flat ``dtype`` tensor of any length, parallel over chunks of
    :data:`_COPY_CHUNK` elements (contiguous ranges per thread, like a producer's outer loop)."""
    if dtype not in _COPIERS:
        import tvm
        from tvm import te

        n = te.var("n")
        src = te.placeholder((n,), dtype, name="src")
        dst = te.compute((n,), lambda i: src[i], name="dst")
        sch = tvm.s_tir.Schedule(te.create_prim_func([src, dst]))
        (axis,) = sch.get_loops(sch.get_sblock("dst"))
        outer, _ = sch.split(axis, [None, _COPY_CHUNK])
        sch.parallel(outer)
        _COPIERS[dtype] = tvm.compile(sch.mod, target={"kind": "llvm"})["main"]
    return _COPIERS[dtype]


def _repeats(module, dev, args: Sequence, number: int, repeat: int, flush: str) -> list[float]:
    """Mean ms per flushed call of each of ``repeat`` repeats of ``number`` calls."""
    # f_preproc runs once per TVM repeat: one call per TVM repeat, grouped into ours.
    timer = module.time_evaluator("main", dev, number=1, repeat=number * repeat,
                                  f_preproc=flush)
    calls = [t * 1000.0 for t in timer(*args).results]
    return [sum(calls[i:i + number]) / number for i in range(0, len(calls), number)]


def time_library(path: str, specs: Sequence, repeat: int, min_repeat_ms: float, *,
                 timing: str = TIMING, cutoff_ms: float | None = None) -> dict:
    """Load the library at ``path`` and time it on the local CPU with random arguments.

    Parameters
    ----------
    path : str
        Library exported by :func:`graphtune.measure.build.build_task`.
    specs : list of [shape, dtype]
        The kernel's parameters (inputs, then outputs).
    repeat, min_repeat_ms, timing, cutoff_ms
        See :func:`time_module`.

    Returns
    -------
    dict
        :func:`time_module`'s result plus ``"threads"`` (runtime threads used), ``"contention"``
        and ``"retakes"``: the timing is taken again while other work took the CPUs
        (:func:`graphtune.measure.contention.timed_alone`).

    Examples
    --------
    See the module docstring (a library built by ``build_task``, then timed).
    """
    import tvm

    from ..x86.amx import request_permission

    request_permission()  # before an AMX kernel runs in this process
    module = tvm.runtime.load_module(path)
    dev = tvm.cpu(0)
    args = []
    for position, (shape, dtype) in enumerate(specs):
        key = (position, tuple(shape), dtype)  # never the same tensor twice in one call
        if key not in _INPUTS:
            if len(_INPUTS) >= _MAX_CACHED:
                _INPUTS.clear()
            _INPUTS[key] = tvm.runtime.tensor(random_array(shape, dtype, seed=position), dev)
        args.append(_INPUTS[key])
    result = contention.timed_alone(lambda: time_module(module, dev, args, repeat, min_repeat_ms,
                                                        timing=timing, cutoff_ms=cutoff_ms))
    result["threads"] = int(tvm.runtime.num_threads())
    return result
