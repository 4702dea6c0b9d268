"""Child processes that run functions in isolation and survive their crash or hang.

A :class:`Child` is one long-lived child Python process (a fresh
interpreter: nothing is forked, so no TVM state is shared, and the caller's
``__main__`` is not re-run, so scripts need no ``if __name__ ==
"__main__"`` guard) that runs picklable top-level functions sent over a
socket. If a call raises, the caller gets its message; if the child dies
(segfault, abort, ``os._exit``) or does not answer within the call's
time-out, it is killed, started again on the next call, and the caller gets
a :class:`ChildFailure` saying what happened (:class:`Cause`) and in which
stage of the caller's protocol (any :class:`enum.Enum` the caller passes).
A child can keep one object between calls, e.g. an RPC session or a peer
runtime (:class:`Mode`). :class:`ChildPool` runs a batch of calls over
several children at once.

Three protocols use it: the build and timing processes of
:class:`graphtune.measure.LocalRunner`, the build and session processes of
:class:`graphtune.measure.RPCRunner`, and :class:`graphtune.peers.PeerProcess`.
This module imports no TVM; a child imports only what ``preload`` names
(and ``graphtune``, which sets ``TVM_NUM_THREADS``).

Examples
--------
>>> import enum, math
>>> class Stage(enum.Enum):
...     SQRT = "sqrt"
>>> with ChildPool(2) as pool:
...     pool.map(math.sqrt, [(4.0,), (-1.0,)], timeout=60, stage=Stage.SQRT)
[(True, 2.0), (False, ChildFailure('sqrt: ValueError: math domain error'))]
"""

from __future__ import annotations

import ctypes
import enum
import importlib
import math
import pickle
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as connection_wait
from typing import Any, Callable, Sequence, cast

from .errors import GraphtuneError

__all__ = ["Cause", "Child", "ChildFailure", "ChildPool", "Mode", "describe_exit"]

_MAX_MESSAGE = 2000
_READY = "graphtune-child-ready"
STARTUP_TIMEOUT = 300.0
"""Seconds a new child may take to start (import ``preload``) before it counts as failed."""


class Cause(enum.Enum):
    """Why a call in a child failed."""

    RAISED = "raised"  #: the function raised; the child lives on
    CRASHED = "crashed"  #: the child died (signal, abort, exit); it was restarted
    TIMED_OUT = "timed out"  #: no answer in time (or no start-up); the child was killed


class Mode(enum.Enum):
    """How a child runs ``fn(*args)``, and what it keeps between calls.

    ``CALL`` returns ``fn(*args)``. ``KEEP`` expects ``fn(*args)`` to return
    ``(state, result)``: the child keeps ``state`` (dropping what it kept
    before, also when ``fn`` fails) and returns ``result``. ``USE`` returns
    ``fn(state, *args)`` with the kept state (an error if there is none, e.g.
    after a restart); ``TAKE`` does the same but drops the state first, so
    that it is used once (and closed when ``fn`` returns or fails).

    Examples
    --------
    >>> child = Child()
    >>> child.call(divmod, (7, 2), timeout=60, mode=Mode.KEEP)  # keeps 3, returns 1
    1
    >>> child.call(pow, (2,), timeout=60, mode=Mode.USE)  # pow(3, 2)
    9
    >>> child.call(pow, (3,), timeout=60, mode=Mode.TAKE)  # pow(3, 3), and 3 is dropped
    27
    >>> child.call(pow, (4,), timeout=60, mode=Mode.USE)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    graphtune.procs.ChildFailure: RuntimeError: pow needs the child's kept state, ...
    >>> child.close()
    """

    CALL = "call"
    KEEP = "keep"
    USE = "use"
    TAKE = "take"


class ChildFailure(GraphtuneError):
    """A call in a child failed: it raised, crashed the child or timed out.

    Attributes
    ----------
    cause : Cause
    stage : enum.Enum or None
        The caller's stage the call belonged to; its value prefixes the message.
    message : str
        What happened, without the stage.

    Examples
    --------
    >>> class Stage(enum.Enum):
    ...     BUILD = "build"
    >>> str(ChildFailure(Cause.CRASHED, "worker crashed (exited with code 3)", Stage.BUILD))
    'build: worker crashed (exited with code 3)'
    """

    def __init__(self, cause: Cause, message: str, stage: enum.Enum | None = None) -> None:
        self.cause, self.message, self.stage = cause, message, stage
        super().__init__(message if stage is None else f"{stage.value}: {message}")


def describe_exit(exitcode: int | None) -> str:
    """Human-readable cause of a child's exit code.

    Examples
    --------
    >>> describe_exit(-11)
    'killed by signal SIGSEGV'
    >>> describe_exit(3)
    'exited with code 3'
    """
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + " ...[truncated]"


def _run_call(fn: Callable, args: tuple, state: Any) -> tuple[Any, Any]:
    return state, fn(*args)


def _run_keep(fn: Callable, args: tuple, state: Any) -> tuple[Any, Any]:
    return fn(*args)


def _run_use(fn: Callable, args: tuple, state: Any) -> tuple[Any, Any]:
    if state is None:
        raise RuntimeError(f"{getattr(fn, '__name__', fn)} needs the child's kept state, and "
                           "there is none (run a Mode.KEEP call first)")
    return state, fn(state, *args)


def _run_take(fn: Callable, args: tuple, state: Any) -> tuple[Any, Any]:
    return None, _run_use(fn, args, state)[1]


_RUN = {Mode.CALL: _run_call, Mode.KEEP: _run_keep, Mode.USE: _run_use, Mode.TAKE: _run_take}


def _serve(fd: int, preload: Sequence[str]) -> None:
    """Child main loop: run ``(mode, fn, args)`` requests, send ``(ok, result or message)``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:  # die with the parent, even if it is killed with SIGKILL
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    conn = Connection(fd)
    try:
        sys.path[:] = conn.recv()  # the parent's, so that its functions can be unpickled
        for name in preload:  # before "ready": start-up is not charged to a call
            importlib.import_module(name)
        conn.send(_READY)
    except (EOFError, OSError):  # the parent went away
        return
    kept: list = [None]  # the state a Mode.KEEP call left, in a list that _handle updates
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        reply = _handle(message, kept)
        try:
            conn.send(reply)
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            conn.send((False, _short(f"result could not be sent back: {err}")))
        except OSError:  # the parent went away
            return


def _handle(message: bytes, kept: list) -> tuple[bool, Any]:
    """Run one request of the parent, updating ``kept[0]`` (the kept state); the reply.

    ``KEEP`` releases the old state before it runs; ``TAKE`` releases the
    state when it returns (so that e.g. an RPC session ends at once).
    """
    try:
        mode, fn, args = pickle.loads(message)  # fails e.g. for a function of __main__
        given = None if mode is Mode.KEEP else kept[0]
        if mode in (Mode.KEEP, Mode.TAKE):
            kept[0] = None  # also when fn fails
        kept[0], result = _RUN[mode](fn, args, given)
        return True, result
    except Exception as err:  # reported to the parent
        return False, _short(f"{type(err).__name__}: {err}")


class Child:
    """One child process running calls in isolation (started on the first call).

    Parameters
    ----------
    preload : sequence of str
        Modules the child imports before it counts as started (e.g.
        ``("tvm",)``), so that their import time is not charged to a call.

    Examples
    --------
    >>> with Child() as child:
    ...     child.call(sum, ([1, 2, 3],), timeout=60)
    6
    """

    def __init__(self, preload: Sequence[str] = ()) -> None:
        self.preload = tuple(preload)
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._deadline: float | None = None
        self._timeout = 0.0
        self._stage: enum.Enum | None = None
        self._starting = False

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        code = f"from {__name__} import _serve; _serve({theirs.fileno()}, {self.preload!r})"
        self._process = subprocess.Popen(
            [sys.executable, "-c", code], pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        self._conn = Connection(ours.detach())
        self._conn.send(list(sys.path))
        self._starting = True

    def start(self) -> None:
        """Start the process now unless it runs, without waiting for it to be ready.

        Its start-up (importing ``preload``) then overlaps the caller's work; the
        first call waits for it as :meth:`submit` says.

        Examples
        --------
        >>> with Child() as child:
        ...     child.start()
        ...     child.call(abs, (-2,), timeout=60)
        2
        """
        if self._process is None or self._process.poll() is not None:
            self.close()
            self._start()

    @property
    def pid(self) -> int | None:
        """Process id of the child while it runs, else None."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    @property
    def busy(self) -> bool:
        """True while a call was submitted and its reply not yet collected."""
        return self._deadline is not None

    def submit(self, fn: Callable, args: tuple, timeout: float, *,
               stage: enum.Enum | None = None, mode: Mode = Mode.CALL) -> None:
        """Start ``fn(*args)`` in the child (see :class:`Mode`); collect it with :meth:`collect`.

        The ``timeout`` counts from when the child is ready: a new child first
        gets up to :data:`STARTUP_TIMEOUT` seconds to import ``preload``.

        Examples
        --------
        >>> with Child() as child:
        ...     child.submit(max, (3, 5), timeout=60)
        ...     child.collect()
        (True, 5)
        """
        self.start()
        assert self._conn is not None  # started with the process
        try:
            self._conn.send((mode, fn, args))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the child just died: collect() reports the crash
        self._timeout, self._stage = timeout, stage
        self._deadline = time.monotonic() + (STARTUP_TIMEOUT if self._starting else timeout)

    def collect(self, block: bool = True) -> tuple[bool, Any] | None:
        """Reply of the submitted call: ``(True, result)``, ``(False, ChildFailure)``, or None.

        None means not finished yet (only when ``block`` is False). A crash or
        a time-out kills the child (it starts again on the next call); see
        :meth:`submit` for an example.
        """
        conn, process = self._conn, self._process
        if self._deadline is None or conn is None or process is None:
            raise RuntimeError("collect() needs a call in flight: submit() one first")
        while True:
            remaining = self._deadline - time.monotonic()
            if not conn.poll(max(0.0, remaining) if block else 0):
                if time.monotonic() < self._deadline:
                    return None
                what = (f"did not start within {STARTUP_TIMEOUT:g} s" if self._starting
                        else f"timed out after {self._timeout:g} s")
                return False, self._fail(Cause.TIMED_OUT, f"{what} (worker killed)")
            try:
                reply = conn.recv()
            except (EOFError, OSError):
                try:
                    exitcode = process.wait(5)
                except subprocess.TimeoutExpired:
                    exitcode = None
                return False, self._fail(Cause.CRASHED,
                                         f"worker crashed ({describe_exit(exitcode)})")
            if reply == _READY:
                self._starting = False
                self._deadline = time.monotonic() + self._timeout
                continue
            self._deadline = None
            ok, value = reply
            return (True, value) if ok else (False, ChildFailure(Cause.RAISED, value,
                                                                 self._stage))

    def _fail(self, cause: Cause, message: str) -> ChildFailure:
        failure = ChildFailure(cause, message, self._stage)
        self.close()
        return failure

    def call(self, fn: Callable, args: tuple, timeout: float, *,
             stage: enum.Enum | None = None, mode: Mode = Mode.CALL) -> Any:
        """Run ``fn(*args)`` in the child (see :class:`Mode`) and return its result.

        Raises
        ------
        ChildFailure
            If the call raised (message of the exception), crashed the child or
            timed out.

        Examples
        --------
        >>> with Child() as child:
        ...     child.call(divmod, (1, 0), timeout=60)
        Traceback (most recent call last):
        ...
        graphtune.procs.ChildFailure: ZeroDivisionError: integer division or modulo by zero
        """
        self.submit(fn, args, timeout, stage=stage, mode=mode)
        reply = self.collect()
        assert reply is not None  # a blocking collect() always returns the reply
        ok, value = reply
        if ok:
            return value
        raise value

    def close(self) -> None:
        """Stop the child (kill it if it does not exit at once); a no-op if not running."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
            self._process = None
        self._deadline = None
        self._starting = False

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ChildPool:
    """Several :class:`Child` processes running calls in parallel.

    Either a whole batch at once (:meth:`map`), or one call at a time on an
    idle child (:meth:`submit`), collected as they finish (:meth:`finished`).

    Parameters
    ----------
    n_children : int
        Number of child processes (started lazily, restarted after a crash).
    preload : sequence of str
        As for :class:`Child`.

    Examples
    --------
    >>> with ChildPool(2) as pool:
    ...     pool.map(pow, [(2, 3), (3, 2)], timeout=60)
    [(True, 8), (True, 9)]
    """

    def __init__(self, n_children: int, preload: Sequence[str] = ()) -> None:
        self.children = [Child(preload) for _ in range(max(1, n_children))]
        self._running: dict[Child, Any] = {}  # child -> tag of its call

    @property
    def idle(self) -> int:
        """Children without a call in flight."""
        return len(self.children) - len(self._running)

    @property
    def busy(self) -> int:
        """Calls in flight (submitted, not yet returned by :meth:`finished`)."""
        return len(self._running)

    def submit(self, fn: Callable, args: tuple, timeout: float, *,
               stage: enum.Enum | None = None, tag: Any = None) -> None:
        """Start ``fn(*args)`` on an idle child; :meth:`finished` returns it with ``tag``.

        Raises
        ------
        RuntimeError
            If no child is idle (check :attr:`idle` first).

        Examples
        --------
        >>> with ChildPool(1) as pool:
        ...     pool.submit(abs, (-3,), timeout=60, tag="a")
        ...     pool.finished(wait=60)
        [('a', (True, 3))]
        """
        child = next((c for c in self.children if c not in self._running), None)
        if child is None:
            raise RuntimeError(f"all {len(self.children)} children are busy; wait for one")
        child.submit(fn, args, timeout, stage=stage)
        self._running[child] = tag

    def finished(self, wait: float = 0.0) -> list[tuple[Any, tuple[bool, Any]]]:
        """Calls finished since last asked: ``(tag, (True, result) or (False, ChildFailure))``.

        Waits up to ``wait`` seconds for the first one if none has finished
        yet (a call that outlives its time-out finishes as a failure).
        """
        until = time.monotonic() + wait
        while True:
            done = []
            for child in list(self._running):
                reply = child.collect(block=False)  # also consumes a child's start-up message
                if reply is not None:
                    done.append((self._running.pop(child), reply))
            left = until - time.monotonic()
            if done or not self._running or left <= 0:
                return done
            deadlines = [c._deadline for c in self._running if c._deadline is not None]
            soonest = min(deadlines, default=until) - time.monotonic()
            conns = [c._conn for c in self._running if c._conn is not None]
            connection_wait(conns, timeout=max(0.0, min(left, soonest)))

    def map(self, fn: Callable, arglist: Sequence[tuple], timeout: float, *,
            stage: enum.Enum | None = None) -> list[tuple[bool, Any]]:
        """Run ``fn(*args)`` for each ``args``: per call ``(True, result)`` or ``(False, failure)``.

        Failures (exceptions, crashes, time-outs of ``timeout`` seconds per
        call) are :class:`ChildFailure` values, in input order. The pool must
        have no call of :meth:`submit` in flight.

        Examples
        --------
        >>> with ChildPool(2) as pool:
        ...     (ok, quotient), (failed, failure) = pool.map(divmod, [(7, 2), (1, 0)], timeout=60)
        >>> ok, quotient, failed, failure.cause
        (True, (3, 1), False, <Cause.RAISED: 'raised'>)
        """
        if self._running:
            raise RuntimeError(f"map() on a pool with {self.busy} calls in flight")
        results: list[tuple[bool, Any] | None] = [None] * len(arglist)
        pending = list(enumerate(arglist))[::-1]
        while pending or self._running:
            while pending and self.idle:
                index, args = pending.pop()
                self.submit(fn, args, timeout, stage=stage, tag=index)
            for index, reply in self.finished(wait=math.inf):
                results[index] = reply
        return cast("list[tuple[bool, Any]]", results)  # every call has replied

    def close(self, busy_only: bool = False) -> None:
        """Stop every child (or only those with a call in flight, whose reply is stale)."""
        for child in self.children:
            if child in self._running or not busy_only:
                child.close()
        self._running.clear()

    def __enter__(self) -> "ChildPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
