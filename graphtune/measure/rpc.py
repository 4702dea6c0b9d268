"""Measure on other machines: a runner that times kernels on the servers of a TVM RPC tracker.

Servers on the target machines register with a tracker under a *key*
(``python -m tvm.exec.rpc_server --tracker HOST:PORT --key KEY``).
:class:`RPCRunner` builds every task here, in the measure package's build
worker processes, for the remote CPU, uploads each library to a free server
of the key and times it there with random inputs filled on the remote device,
with the same warm-up / ``number`` / ``repeat`` / ``min_repeat_ms`` rules as
:class:`~graphtune.measure.LocalRunner` (:func:`~graphtune.measure.timing.time_module`).

What the remote tells about itself (through its TVM global functions):
its CPU name (``target.llvm_get_system_cpu``, hence ``mcpu`` and, via
LLVM's CPU tables, the vector width), its LLVM triple
(``target.llvm_get_system_triple``), its core count
(``s_tir.meta_schedule.cpu_count``, present on Python servers) and the
thread count of its runtime (``runtime.NumThreads``). A runtime-only server
(C++ ``tvm_rpc``) lacks the first and the third: give ``target=`` then.

Each measurement runs in its own RPC session (TVM's convention: the server
forks a fresh process per session, ~0.1 s, and ends it after
``session_timeout``), driven by one of the local *session processes* (one per
server of the key, or ``max_sessions``): a request to the tracker, a connect,
an upload and a timing. A server that dies or hangs costs only that
measurement: its session process is killed (a connect that hangs for
``_CONNECT_TIMEOUT + _SLACK`` = 15 s, a timing that outlives
``session_timeout`` + 5 s), and the measurement is retried on whichever
server the tracker hands out next (a dead or hung server is no longer handed
out), at most ``retries`` times, then becomes an error record. While the
servers time, the build workers compile the next tasks (``build_ahead``).

Examples
--------
>>> runner = RPCRunner("127.0.0.1:9190", "x86", max_sessions=4)
>>> runner.tracker, runner.key, runner.retries
('127.0.0.1:9190', 'x86', 2)
>>> RPCRunner("127.0.0.1:1", "x86", request_timeout=2).resolve_target()  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
graphtune.errors.MeasureError: cannot reach the RPC tracker at 127.0.0.1:1 (key 'x86'): ...
"""

from __future__ import annotations

import collections
import enum
import os
import shutil
import socket
import struct
import tempfile
import time
from typing import TYPE_CHECKING, Any, Callable, Generator, Sequence

from ..errors import MeasureError
from ..procs import Child, ChildFailure, ChildPool, Mode
from .build import build_task, prim_func_of
from .records import Record, target_key_of
from .runner import PRELOAD, Runner, Stage
from .task import Task
from .timing import time_module

if TYPE_CHECKING:
    import tvm

__all__ = ["RPCRunner", "SessionStage", "tracker_status"]

_CONNECT_TIMEOUT = 10.0  # seconds to reach the tracker or a server before giving up
_SLACK = 5.0  # extra seconds a session process gets beyond the server-side time limit
_POLL = 0.005  # seconds between polls of busy workers


class SessionStage(enum.Enum):
    """What a session process is doing for its measurement; its value names failures in it."""

    IDLE = "idle"
    REQUEST = "requesting a server"  #: asking the tracker for a free server
    CONNECT = "connecting"  #: opening a session (a hung server fails here within seconds)
    TIME = "timing"  #: uploading the library and timing it remotely


def _parse_address(tracker: str, key: str) -> tuple[str, int]:
    """``(host, port)`` of ``"host:port"`` or ``"[ipv6]:port"``; MeasureError naming the fix.

    Examples
    --------
    >>> _parse_address("[::1]:9190", "x86"), _parse_address("localhost:9190", "x86")
    (('::1', 9190), ('localhost', 9190))
    """
    host, sep, port = str(tracker).rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        host = ""  # a bare IPv6 address is ambiguous: it needs brackets
    if not sep or not host or not (port.isdigit() and 0 < int(port) < 65536):
        raise MeasureError(f"RPC tracker address {tracker!r} (key {key!r}) must be 'host:port' "
                           "with a port from 1 to 65535 (IPv6: '[::1]:9190'), e.g. "
                           "'127.0.0.1:9190'")
    return host, int(port)


def _tracker_call(host: str, port: int, message: list, timeout: float) -> Any:
    """Send one JSON message to the tracker on a new connection; its reply, or None on time-out."""
    from tvm.rpc import base

    sock = socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT)
    try:
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        magic = struct.unpack("<i", base.recvall(sock, 4))[0]
        if magic != base.RPC_TRACKER_MAGIC:
            raise ConnectionError(f"{host}:{port} answers but is not a TVM RPC tracker")
        base.sendjson(sock, message)
        sock.settimeout(timeout)
        try:
            reply = base.recvjson(sock)
        except socket.timeout:
            return None
    finally:
        sock.close()
    if not reply or reply[0] != base.TrackerCode.SUCCESS:
        raise ConnectionError(f"tracker {host}:{port} refused {message[:2]}: {reply}")
    return reply[1]


def tracker_status(tracker: str, key: str) -> dict:
    """Servers registered under ``key`` at ``tracker``: ``{"servers", "free", "pending"}``.

    ``servers`` counts every registered server, ``free`` those idle now,
    ``pending`` the session requests waiting for one.

    Raises
    ------
    MeasureError
        If the tracker cannot be reached, or no server is registered under
        ``key`` (the message names the tracker, the key and the keys it has).

    Examples
    --------
    >>> tracker_status("127.0.0.1:1", "x86")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    graphtune.errors.MeasureError: cannot reach the RPC tracker at 127.0.0.1:1 (key 'x86'): ...
    """
    from tvm.rpc import base

    host, port = _parse_address(tracker, key)
    try:
        summary = _tracker_call(host, port, [base.TrackerCode.SUMMARY], _CONNECT_TIMEOUT)
    except (OSError, ValueError) as err:
        raise MeasureError(
            f"cannot reach the RPC tracker at {tracker} (key {key!r}): {err}; start it with "
            f"`python -m tvm.exec.rpc_tracker --host {host} --port {port}` or fix the address"
        ) from None
    if summary is None:
        raise MeasureError(f"the RPC tracker at {tracker} (key {key!r}) did not answer within "
                           f"{_CONNECT_TIMEOUT:g} s")
    keys = [str(item["key"]).split(":")[1] for item in summary.get("server_info", [])
            if str(item["key"]).startswith("server:")]
    if key not in keys:
        known = ", ".join(sorted(set(keys))) or "none"
        raise MeasureError(
            f"no RPC server is registered under key {key!r} at tracker {tracker} (keys there: "
            f"{known}); start one with `python -m tvm.exec.rpc_server --tracker {tracker} "
            f"--key {key}` or fix the key")
    queue = summary.get("queue_info", {}).get(key, {})
    return {"servers": keys.count(key), "free": int(queue.get("free", 0)),
            "pending": int(queue.get("pending", 0))}


def _remote_call(session: Any, name: str, *args: Any) -> Any:
    """Call the remote global function ``name``; None if the server does not have it."""
    try:
        func = session.get_function(name)
    except Exception:  # an unknown name raises an FFI error
        return None
    return func(*args)


def _remote_features(session: Any) -> dict[str, bool] | None:
    """The server's CPU features as LLVM detects them (``{"avx512f": False, ...}``), or None
    when it cannot tell (a runtime-only build). The map travels as TVM's JSON text."""
    import tvm

    features = _remote_call(session, "tvm.codegen.llvm.GetHostCPUFeatures")
    text = None if features is None else _remote_call(session, "ffi.ToJSONGraphString", features, None)
    if not text:
        return None
    return {str(k): bool(v) for k, v in tvm.ir.load_json(str(text)).items()}


def _request_server(tracker: str, key: str, request_timeout: float) -> list | None:
    """Ask the tracker for a free server of ``key``: ``[host, port, matchkey]``.

    Returns None if no server was free within ``request_timeout`` seconds.
    The server stays taken until its session ends.
    """
    from tvm.rpc import base

    host, port = _parse_address(tracker, key)
    grant = _tracker_call(host, port, [base.TrackerCode.REQUEST, key, "", 1], request_timeout)
    return None if grant is None else list(grant)


def _open_session(grant: Sequence, session_timeout: float) -> tuple[Any, dict]:
    """Session process: connect to the granted server and ask what it is.

    Runs in a session process (a :class:`~graphtune.procs.Child`, with
    :attr:`~graphtune.procs.Mode.KEEP`), which keeps the session for the next
    :func:`_time_in_session` call; the server ends the session after
    ``session_timeout`` seconds.

    Returns
    -------
    session : tvm.rpc.RPCSession
        Kept by the session process.
    info : dict
        ``{"server", "mcpu", "features", "triple", "cores", "threads"}`` (``mcpu`` and
        ``cores`` None when the server cannot tell).
    """
    from tvm import rpc

    url, port, matchkey = grant
    session = rpc.connect(url, port, matchkey, session_timeout)
    cores = _remote_call(session, "s_tir.meta_schedule.cpu_count", True)
    cpu = _remote_call(session, "target.llvm_get_system_cpu")
    return session, {
        "server": f"{url}:{port}", "mcpu": None if cpu is None else str(cpu),
        "features": _remote_features(session),
        "triple": str(_remote_call(session, "target.llvm_get_system_triple") or ""),
        "cores": None if cores is None else int(cores),
        "threads": int(_remote_call(session, "runtime.NumThreads"))}


def _time_in_session(session: Any, path: str, specs: Sequence, repeat: int,
                     min_repeat_ms: float) -> dict:
    """Session process: upload the library at ``path``, time it remotely, end the session.

    Runs with :attr:`~graphtune.procs.Mode.TAKE`: the session process drops
    the session (one measurement per session), whatever happens.

    Inputs are allocated on the remote CPU and filled there with random
    values (``tvm.contrib.random.random_fill``); a server
    without it gets random values uploaded from here. Timing follows
    :func:`~graphtune.measure.timing.time_module`.

    Returns
    -------
    dict
        ``{"ms": [...], "number": calls per repeat}``.
    """
    import tvm

    from .timing import random_array

    name = os.path.basename(path)
    session.upload(path)
    module = session.load_module(name)
    dev = session.cpu(0)
    fill = _remote_fill(session)
    args = []
    for position, (shape, dtype) in enumerate(specs):
        if fill is not None:
            arr = tvm.runtime.empty(tuple(shape), dtype, dev)
            fill(arr)
        else:
            arr = tvm.runtime.tensor(random_array(shape, dtype, seed=position), dev)
        args.append(arr)
    return time_module(module, dev, args, repeat, min_repeat_ms, timing=RPCRunner.timing)


def _remote_fill(session: Any) -> Any:
    try:
        return session.get_function("tvm.contrib.random.random_fill")
    except Exception:  # not compiled into the server's runtime
        return None


class _Slot:
    """One session process and the measurement it is working on."""

    def __init__(self) -> None:
        self.child = Child(PRELOAD)
        self.job: list | None = None  # [task, built, failures]
        self.stage = SessionStage.IDLE  # IDLE -> REQUEST -> CONNECT -> TIME -> IDLE
        self.server = ""


class RPCRunner(Runner):
    """Build here, time on the servers registered under ``key`` at an RPC tracker.

    Parameters
    ----------
    tracker : str
        Tracker address ``"host:port"``.
    key : str
        Device key the servers registered under (``rpc_server --key``); all
        servers of a key must be the same kind of machine.
    session_timeout : float, optional
        Seconds one remote measurement (upload, inputs, timing) may last
        before the server kills it; default the ``timeout`` passed to
        :meth:`run` (``measure(..., timeout=)``).
    max_sessions : int, optional
        At most this many measurements at once (default: one per server
        registered under the key when a run starts).
    target : tvm.target.Target or dict, optional
        Target to build for, overriding what the remote reports (needed for
        servers that cannot name their CPU).
    retries : int
        Times a failed remote measurement is retried (on whichever server is
        free next) before it becomes an error record.
    request_timeout : float
        Seconds to wait for a free server; past it the run stops with a
        :class:`~graphtune.errors.MeasureError` (finished records are kept).
    n_parallel : int, optional
        Local build processes (default: the number of usable cores).
    build_ahead : bool
        Compile the next tasks while the servers time (default). False
        alternates building a batch and timing it, as
        :class:`~graphtune.measure.LocalRunner` does: for servers that share
        this machine's cores (loopback), where compiling would slow the timed
        kernels down.
    func_of : callable, optional
        ``func_of(task, target) -> PrimFunc`` as for
        :class:`~graphtune.measure.LocalRunner`.

    Notes
    -----
    Records are keyed by the remote target: its ``mcpu``, ``num-cores``,
    vector width and runtime thread count, plus ``"rpc_key"``, so that
    records from different machines (or a local run) never mix. Remote
    kernels are timed with the ``cold-output`` protocol (:attr:`timing`): a
    server can flush only through TVM's own functions, which flush the output
    too (:data:`graphtune.measure.timing.PROTOCOLS`).

    Examples
    --------
    Creating a runner checks the address only; the tracker is asked when measuring
    (``measure(tasks, runner=runner, records="x86.records.jsonl")``):

    >>> runner = RPCRunner("127.0.0.1:9190", "x86", max_sessions=2)
    >>> runner.tracker, runner.key
    ('127.0.0.1:9190', 'x86')
    >>> RPCRunner("127.0.0.1:99999", "x86")
    Traceback (most recent call last):
    ...
    graphtune.errors.MeasureError: RPC tracker address ...port from 1 to 65535...
    """

    timing = "cold-output"

    def __init__(self, tracker: str, key: str, *, session_timeout: float | None = None,
                 max_sessions: int | None = None, target: Any = None, retries: int = 2,
                 request_timeout: float = 60.0, n_parallel: int | None = None,
                 build_ahead: bool = True, func_of: Callable = prim_func_of) -> None:
        _parse_address(tracker, key)  # a malformed address fails here, before any work
        self.tracker = tracker
        self.key = key
        self.session_timeout = session_timeout
        self.max_sessions = max_sessions
        self.target = target
        self.retries = retries
        self.request_timeout = request_timeout
        self.n_parallel = n_parallel
        self.build_ahead = build_ahead
        self.func_of = func_of

    def _where(self) -> str:
        return f"tracker {self.tracker}, key {self.key!r}"

    def describe_remote(self) -> dict:
        """What a server of the key reports about itself (asked once, then remembered).

        Returns
        -------
        dict
            ``{"server", "mcpu", "features", "triple", "cores", "threads"}``.

        Raises
        ------
        MeasureError
            Unreachable tracker, unknown key, or no free server within
            ``request_timeout``.

        Examples
        --------
        With a server registered under the key this returns e.g. ``{'server':
        '127.0.0.1:9091', 'mcpu': 'znver5', 'triple': 'x86_64-conda-linux-gnu', 'cores': 2,
        'threads': 2}``; without a tracker it says how to start one:

        >>> RPCRunner("127.0.0.1:1", "x86").describe_remote()
        Traceback (most recent call last):
        ...
        graphtune.errors.MeasureError: cannot reach the RPC tracker at 127.0.0.1:1 (key 'x86'): ...
        """
        cached = getattr(self, "_remote", None)
        if cached is not None:
            return cached
        tracker_status(self.tracker, self.key)
        try:
            with Child(PRELOAD) as child:
                grant = child.call(_request_server,
                                   (self.tracker, self.key, self.request_timeout),
                                   self.request_timeout + _SLACK, stage=SessionStage.REQUEST)
                if grant is None:
                    raise self._no_server()
                info = child.call(_open_session, (grant, self.session_timeout or 60.0),
                                  _CONNECT_TIMEOUT + _SLACK, stage=SessionStage.CONNECT,
                                  mode=Mode.KEEP)
        except ChildFailure as err:
            raise MeasureError(f"could not open an RPC session ({self._where()}): {err}") from None
        self._remote = info
        return info

    def _no_server(self) -> MeasureError:
        return MeasureError(f"no free RPC server within {self.request_timeout:g} s "
                            f"({self._where()}); measurements finished so far are saved, "
                            "rerun to resume")

    def resolve_target(self, target: Any = None) -> "tvm.target.Target":
        """The target of the remote CPU (``target``, else the runner's, else asked from a server).

        Raises
        ------
        MeasureError
            As :meth:`describe_remote`, or when the server cannot name its CPU
            and no target was given.

        Examples
        --------
        A given target is used as is (the server is still asked for its thread count):
        ``RPCRunner(tracker, "x86").resolve_target()`` returns e.g.
        ``{"kind":"llvm","keys":["cpu"],"num-cores":2,"mcpu":"znver5"}``. Without a
        tracker:

        >>> RPCRunner("127.0.0.1:1", "x86").resolve_target({"kind": "llvm"})
        Traceback (most recent call last):
        ...
        graphtune.errors.MeasureError: cannot reach the RPC tracker at 127.0.0.1:1 (key 'x86'): ...
        """
        import tvm

        from ..x86 import host_target
        from ..x86.target import with_host_features

        info = self.describe_remote()
        target = self.target if target is None else target
        if target is None:
            if info["mcpu"] is None:
                raise MeasureError(
                    f"the RPC server {info['server']} ({self._where()}) does not report its CPU "
                    "(a runtime-only TVM build); pass target={'kind': 'llvm', 'mcpu': ..., "
                    "'num-cores': ...} to RPCRunner")
            target = {"kind": "llvm", "mcpu": info["mcpu"],
                      "num-cores": info["cores"] or info["threads"]}
            if info.get("features"):
                target = with_host_features(target, info["features"])
            local_triple = str(tvm.get_global_func("target.llvm_get_system_triple")())
            if info["triple"] and info["triple"] != local_triple:
                target["mtriple"] = info["triple"]
        return host_target(target)

    def target_key(self, target: "tvm.target.Target") -> dict:
        """Record key of ``target`` measured through this runner (remote threads, ``rpc_key``).

        Examples
        --------
        With a server, ``runner.target_key(runner.resolve_target())`` is e.g.
        ``{'kind': 'llvm', 'mcpu': 'znver5', 'num-cores': 2, 'vector_bits': 512,
        'threads': 2, 'rpc_key': 'x86'}``: the local key plus the remote thread count
        and the device key, so remote and local records never mix.

        >>> from graphtune.x86 import host_target
        >>> RPCRunner("127.0.0.1:1", "x86").target_key(host_target())
        Traceback (most recent call last):
        ...
        graphtune.errors.MeasureError: cannot reach the RPC tracker at 127.0.0.1:1 (key 'x86'): ...
        """
        key = target_key_of(target)
        key["threads"] = self.describe_remote()["threads"]
        key["rpc_key"] = self.key
        return key

    def _settings(self, n_tasks: int) -> tuple[int, int]:
        servers = tracker_status(self.tracker, self.key)["servers"]
        n_sessions = min(self.max_sessions or servers, n_tasks)
        n_build = self.n_parallel or len(os.sched_getaffinity(0))
        if n_build < 1 or (self.max_sessions is not None and self.max_sessions < 1) \
                or self.retries < 0:
            raise MeasureError(f"RPCRunner needs n_parallel >= 1, max_sessions >= 1 and "
                               f"retries >= 0, got {n_build}, {self.max_sessions}, {self.retries}")
        return n_sessions, n_build

    def run(self, tasks: Sequence[Task], target: "tvm.target.Target", *,
            repeat: int, min_repeat_ms: float, timeout: float) -> Generator[Record, None, None]:
        """Build ``tasks`` here and time them on the key's servers (see :meth:`Runner.run`).

        Raises
        ------
        MeasureError
            Unreachable tracker, unknown key, no free server within
            ``request_timeout``, or a server that is another machine than the
            key's first (records yielded before are final).
        """
        if not tasks:
            return
        key = self.target_key(target)
        n_sessions, n_build = self._settings(len(tasks))
        limits = {"session_timeout": self.session_timeout or timeout, "repeat": repeat,
                  "min_repeat_ms": min_repeat_ms}
        to_build = collections.deque(tasks)
        builders = ChildPool(min(n_build, len(tasks)), PRELOAD)
        ready: collections.deque = collections.deque()  # [task, built, failures], built ahead
        slots = [_Slot() for _ in range(n_sessions)]
        out_dir = tempfile.mkdtemp(prefix="graphtune-rpc-")
        try:
            while to_build or builders.busy or ready or any(s.job for s in slots):
                changed = False
                for slot in slots:
                    if slot.job is None and ready and (self.build_ahead or not builders.busy):
                        slot.job = ready.popleft()
                        self._submit_open(slot)
                        changed = True
                    elif slot.job is not None:
                        moved, record = self._advance(slot, key, ready, limits)
                        changed = changed or moved
                        if record is not None:
                            yield record
                timing = any(slot.job for slot in slots)
                while builders.idle and to_build and (self.build_ahead or not timing) \
                        and len(ready) + builders.busy < 2 * n_sessions + n_build:
                    task = to_build.popleft()
                    builders.submit(build_task, (self.func_of, task, target, out_dir), timeout,
                                    stage=Stage.BUILD, tag=task)
                for task, (ok, value) in builders.finished():
                    changed = True
                    if ok:
                        ready.append([task, value, []])
                    else:
                        yield Record.failure(task, key, str(value), timing=self.timing)
                if not changed:
                    time.sleep(_POLL)
        finally:
            builders.close()
            for slot in slots:
                slot.child.close()
            shutil.rmtree(out_dir, ignore_errors=True)

    def _submit_open(self, slot: _Slot) -> None:
        slot.stage, slot.server = SessionStage.REQUEST, ""
        slot.child.submit(_request_server, (self.tracker, self.key, self.request_timeout),
                          self.request_timeout + _SLACK, stage=slot.stage)

    def _advance(self, slot: _Slot, key: dict, ready: collections.deque,
                 limits: dict) -> tuple[bool, Record | None]:
        """Move ``slot`` on if its session process answered: (whether it did, finished record).

        Stages (:class:`SessionStage`): ``REQUEST`` a server from the tracker,
        ``CONNECT`` to it (a hung server fails here within seconds), ``TIME``
        remotely.
        """
        reply = slot.child.collect(block=False)
        if reply is None:
            return False, None
        ok, value = reply
        if not ok:
            return True, self._failed(slot, str(value), key, ready)
        steps: dict[SessionStage, Callable[[_Slot, Any, dict, dict], Record | None]] = {
            SessionStage.REQUEST: self._connect, SessionStage.CONNECT: self._start_timing,
            SessionStage.TIME: self._finish}
        return True, steps[slot.stage](slot, value, key, limits)

    def _connect(self, slot: _Slot, grant: list | None, key: dict, limits: dict) -> None:
        if grant is None:
            raise self._no_server()
        slot.stage, slot.server = SessionStage.CONNECT, f"{grant[0]}:{grant[1]}"
        slot.child.submit(_open_session, (grant, limits["session_timeout"]),
                          _CONNECT_TIMEOUT + _SLACK, stage=slot.stage, mode=Mode.KEEP)

    def _start_timing(self, slot: _Slot, info: dict, key: dict, limits: dict) -> None:
        self._check_same_machine(info)
        assert slot.job is not None  # a slot times only once a job is assigned
        built = slot.job[1]
        slot.stage = SessionStage.TIME
        slot.child.submit(_time_in_session, (built["path"], built["args"], limits["repeat"],
                                             limits["min_repeat_ms"]),
                          limits["session_timeout"] + _SLACK, stage=slot.stage, mode=Mode.TAKE)

    def _finish(self, slot: _Slot, timed: dict, key: dict, limits: dict) -> Record:
        assert slot.job is not None  # a slot times only once a job is assigned
        (task, built, _), slot.job, slot.stage = slot.job, None, SessionStage.IDLE
        os.remove(built["path"])
        return Record.success(task, key, timed["ms"], threads=key["threads"],
                              number=timed["number"], timing=self.timing)

    def _failed(self, slot: _Slot, message: str, key: dict,
                ready: collections.deque) -> Record | None:
        """A remote attempt failed: requeue the job, or give up after ``retries`` retries."""
        tracker_status(self.tracker, self.key)  # raises if the tracker or every server is gone
        job, slot.job, slot.stage = slot.job, None, SessionStage.IDLE
        assert job is not None  # only a slot with a job has an attempt to fail
        job[2].append(f"{slot.server}: {message}" if slot.server else message)
        if len(job[2]) <= self.retries:
            ready.appendleft(job)
            return None
        os.remove(job[1]["path"])
        return Record.failure(job[0], key,
                              f"{Stage.RUN.value}: failed {len(job[2])} times ({self._where()}): "
                              + " | ".join(job[2]), timing=self.timing)

    def _check_same_machine(self, info: dict) -> None:
        first = self.describe_remote()
        if (info["mcpu"], info["threads"]) != (first["mcpu"], first["threads"]):
            raise MeasureError(
                f"RPC server {info['server']} ({self._where()}) is a {info['mcpu']} running "
                f"{info['threads']} threads, but {first['server']} was a {first['mcpu']} running "
                f"{first['threads']}: register different machines under different keys")
