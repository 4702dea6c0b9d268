"""Isolated worker processes: run a function in a child, survive its crash or hang.

A :class:`Worker` is one long-lived child Python process (a fresh
interpreter: no TVM state is forked and the caller's ``__main__`` is not
re-run, so scripts need no ``if __name__ == "__main__"`` guard) that runs
picklable top-level functions sent over a socket. If a call raises, the caller gets the message; if the child dies
(segfault, abort, ``os._exit``) or does not answer within the time-out, it is
killed and restarted on the next call, and the caller gets a
:class:`WorkerFailure` naming what happened. :class:`WorkerPool` runs a batch
of calls over several workers at once.

Examples
--------
>>> import math
>>> with WorkerPool(1) as pool:
...     pool.map(math.sqrt, [(4.0,), (-1.0,)], timeout=60)
[(True, 2.0), (False, 'ValueError: math domain error')]
"""

from __future__ import annotations

import ctypes
import pickle
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Sequence

__all__ = ["Worker", "WorkerFailure", "WorkerPool", "describe_exit"]

_MAX_MESSAGE = 2000
_READY = "graphtune-worker-ready"
STARTUP_TIMEOUT = 300.0
"""Seconds a new worker may take to start (import TVM) before it counts as failed."""


class WorkerFailure(Exception):
    """A call could not complete: the worker crashed or timed out (the message says which)."""


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


def _serve(fd: int) -> None:
    """Child main loop: receive ``(fn, args)``, send back ``(True, result)`` or ``(False, msg)``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:  # die with the parent, even if it is killed with SIGKILL
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    conn = Connection(fd)
    sys.path[:] = conn.recv()  # the parent's, so that its functions can be unpickled
    import graphtune  # noqa: F401  (sets TVM_NUM_THREADS before TVM starts)
    import tvm  # noqa: F401  (imported before "ready": start-up is not charged to a call)

    conn.send(_READY)
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        try:
            fn, args = pickle.loads(message)  # fails e.g. for a function of the parent's __main__
            reply = (True, fn(*args))
        except Exception as err:  # reported to the parent, which records it
            reply = (False, _short(f"{type(err).__name__}: {err}"))
        try:
            conn.send(reply)
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            conn.send((False, _short(f"result could not be sent back: {err}")))


class Worker:
    """One child process running calls in isolation.

    Examples
    --------
    >>> w = Worker()
    >>> w.call(sum, ([1, 2, 3],), timeout=60)
    6
    >>> w.close()
    """

    def __init__(self) -> None:
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._deadline: float | None = None
        self._timeout = 0.0
        self._starting = False

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        code = f"from {__name__} import _serve; _serve({theirs.fileno()})"
        self._process = subprocess.Popen(
            [sys.executable, "-c", code], pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        self._conn = Connection(ours.detach())
        self._conn.send(list(sys.path))

    @property
    def busy(self) -> bool:
        """True while a call was submitted and its reply not yet collected."""
        return self._deadline is not None

    def submit(self, fn: Callable, args: tuple, timeout: float) -> None:
        """Start ``fn(*args)`` in the child; collect it with :meth:`collect`.

        The ``timeout`` counts from when the child is ready: a new child first
        gets up to :data:`STARTUP_TIMEOUT` seconds to import TVM.

        Examples
        --------
        >>> w = Worker()
        >>> w.submit(max, (3, 5), timeout=60)
        >>> w.collect()
        (True, 5)
        >>> w.close()
        """
        if self._process is None or self._process.poll() is not None:
            self.close()
            self._start()
            self._starting = True
        try:
            self._conn.send((fn, args))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the child just died: collect() reports the crash
        self._timeout = timeout
        self._deadline = time.monotonic() + (STARTUP_TIMEOUT if self._starting else timeout)

    def collect(self, block: bool = True) -> tuple[bool, Any] | None:
        """Reply of the submitted call: ``(True, result)``, ``(False, message)``, or None.

        None means not finished yet (only when ``block`` is False). A crash or
        a time-out kills the child and returns ``(False, WorkerFailure(...))``;
        see :meth:`submit` for an example.
        """
        while True:
            remaining = self._deadline - time.monotonic()
            if not self._conn.poll(max(0.0, remaining) if block else 0):
                if time.monotonic() < self._deadline:
                    return None
                what = (f"did not start within {STARTUP_TIMEOUT:g} s" if self._starting
                        else f"timed out after {self._timeout:g} s")
                self.close()
                return False, WorkerFailure(f"{what} (worker killed)")
            try:
                reply = self._conn.recv()
            except (EOFError, OSError):
                try:
                    exitcode = self._process.wait(5)
                except subprocess.TimeoutExpired:
                    exitcode = None
                failure = WorkerFailure(f"worker crashed ({describe_exit(exitcode)})")
                self.close()
                return False, failure
            if reply == _READY:
                self._starting = False
                self._deadline = time.monotonic() + self._timeout
                continue
            self._deadline = None
            return reply

    def call(self, fn: Callable, args: tuple, timeout: float) -> Any:
        """Run ``fn(*args)`` in the child and return its result.

        Raises
        ------
        WorkerFailure
            If the call raised (message of the exception), crashed the child or
            timed out.

        Examples
        --------
        >>> w = Worker()
        >>> w.call(divmod, (1, 0), timeout=60)
        Traceback (most recent call last):
        ...
        graphtune.measure.workers.WorkerFailure: ZeroDivisionError: integer division or modulo by zero
        >>> w.close()
        """
        self.submit(fn, args, timeout)
        ok, value = self.collect()
        if ok:
            return value
        raise value if isinstance(value, WorkerFailure) else WorkerFailure(value)

    def close(self) -> None:
        """Stop the child (kill it if it does not exit at once)."""
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


class WorkerPool:
    """Several :class:`Worker` processes running a batch of calls in parallel.

    Parameters
    ----------
    n_workers : int
        Number of child processes (started lazily, restarted after a crash).

    Examples
    --------
    >>> with WorkerPool(2) as pool:
    ...     pool.map(pow, [(2, 3), (3, 2)], timeout=60)
    [(True, 8), (True, 9)]
    """

    def __init__(self, n_workers: int) -> None:
        self.n_workers = n_workers
        self._workers = [Worker() for _ in range(max(1, n_workers))]

    def map(self, fn: Callable, arglist: Sequence[tuple], timeout: float) -> list[tuple[bool, Any]]:
        """Run ``fn(*args)`` for each ``args``; per call ``(True, result)`` or ``(False, message)``.

        Failures (exceptions, crashes, time-outs of ``timeout`` seconds per
        call) are returned as their message string, in input order.

        Examples
        --------
        >>> with WorkerPool(2) as pool:
        ...     pool.map(divmod, [(7, 2), (1, 0)], timeout=60)
        [(True, (3, 1)), (False, 'ZeroDivisionError: integer division or modulo by zero')]
        """
        results: list[tuple[bool, Any] | None] = [None] * len(arglist)
        pending = list(enumerate(arglist))[::-1]
        running: dict[Worker, int] = {}
        while pending or running:
            for worker in self._workers:
                if pending and worker not in running:
                    index, args = pending.pop()
                    worker.submit(fn, args, timeout)
                    running[worker] = index
            soonest = min(w._deadline for w in running) - time.monotonic()
            wait([w._conn for w in running], timeout=max(0.0, soonest))
            for worker in list(running):
                reply = worker.collect(block=False)
                if reply is not None:
                    ok, value = reply
                    results[running.pop(worker)] = (ok, value if ok else str(value))
        return results

    def close(self, busy_only: bool = False) -> None:
        """Stop every worker (or only those with a call in flight, whose reply is stale)."""
        for worker in self._workers:
            if worker.busy or not busy_only:
                worker.close()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
