"""A TVM RPC tracker and servers on 127.0.0.1, to try :class:`~graphtune.measure.rpc.RPCRunner`.

A fixture of ``benchmarks/rpc_scaling.py`` and ``tests/test_measure_rpc.py``,
not part of the graphtune package (import it with ``benchmarks/`` on
``sys.path``). :class:`LoopbackFleet` starts ``python -m tvm.exec.rpc_tracker`` and
``python -m tvm.exec.rpc_server`` processes on free local ports (each in its
own process group, output in a log directory), waits until every server has
registered, and stops them all on exit, also after an error. On real
machines start the same commands by hand. The servers need TVM's ``rpc``
extra (``cloudpickle``, ``psutil``), which ``graphtune[test]`` and
``graphtune[bench]`` install.

Examples
--------
>>> from graphtune.measure import RPCRunner
>>> with LoopbackFleet(n_servers=1) as fleet:  # doctest: +SKIP
...     runner = RPCRunner(fleet.tracker, fleet.key)
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from graphtune.errors import MeasureError
from graphtune.measure.rpc import tracker_status

__all__ = ["LoopbackFleet", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now.

    Examples
    --------
    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LoopbackFleet:
    """An RPC tracker and ``n_servers`` servers under ``key``, all on 127.0.0.1.

    Parameters
    ----------
    n_servers : int
        Servers to start.
    key : str
        Device key the servers register under.
    python : str, optional
        Interpreter that runs them (default this one).
    start_timeout : float
        Seconds to wait for the tracker and every server to be ready.

    Attributes
    ----------
    tracker : str
        ``"127.0.0.1:PORT"`` of the tracker (once started).
    servers : list of subprocess.Popen
        The server processes, each the leader of its own process group
        (its session processes belong to the group).
    log_dir : str
        Directory of the processes' output (removed by :meth:`stop`).

    Notes
    -----
    Servers inherit this process's environment, hence its ``TVM_NUM_THREADS``
    (``import graphtune`` sets it), so that remote and local timings use the
    same number of threads.
    """

    def __init__(self, n_servers: int = 2, key: str = "graphtune-loopback", *,
                 python: str | None = None, start_timeout: float = 120.0) -> None:
        self.n_servers = n_servers
        self.key = key
        self.python = python
        self.start_timeout = start_timeout

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        log = open(os.path.join(self.log_dir, f"{name}.log"), "ab")
        try:
            return subprocess.Popen([self.python or sys.executable, "-m", *args],
                                    stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()

    def start(self) -> "LoopbackFleet":
        """Start the tracker and the servers; wait until all servers are registered.

        Raises
        ------
        MeasureError
            If they are not ready within ``start_timeout`` (everything started
            is stopped again; the message quotes the logs).
        """
        self.log_dir = tempfile.mkdtemp(prefix="graphtune-fleet-")
        self.servers: list[subprocess.Popen] = []
        port = free_port()
        self.tracker = f"127.0.0.1:{port}"
        self._tracker = self._spawn("tracker", "tvm.exec.rpc_tracker", "--host", "127.0.0.1",
                                    "--port", str(port), "--port-end", str(port + 1))
        try:
            self._wait(lambda: self._tracker_answers())
            for index in range(self.n_servers):
                server_port = free_port()
                self.servers.append(self._spawn(
                    f"server{index}", "tvm.exec.rpc_server", "--tracker", self.tracker,
                    "--key", self.key, "--host", "127.0.0.1", "--port", str(server_port),
                    "--port-end", str(server_port + 1)))
            self._wait(lambda: self.free_servers() == self.n_servers)
        except BaseException:
            logs = self._logs()
            self.stop()
            raise MeasureError(f"loopback RPC fleet did not start within {self.start_timeout:g} s;"
                               f" logs:\n{logs}") from None
        return self

    def _wait(self, ready) -> None:
        deadline = time.monotonic() + self.start_timeout
        while not ready():
            if time.monotonic() > deadline:
                raise TimeoutError
            time.sleep(0.2)

    def _tracker_answers(self) -> bool:
        try:
            tracker_status(self.tracker, self.key)
        except MeasureError as err:
            return "no RPC server" in str(err)
        return True

    def free_servers(self) -> int:
        """Servers idle right now (a server re-registers ~1 s after each session ends)."""
        try:
            return tracker_status(self.tracker, self.key)["free"]
        except MeasureError:
            return 0

    def wait_free(self, timeout: float = 30.0) -> None:
        """Wait until every server is idle (raises ``TimeoutError`` after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while self.free_servers() < self.n_servers:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.n_servers} servers not idle after {timeout:g} s")
            time.sleep(0.1)

    def _logs(self) -> str:
        texts = []
        for name in sorted(os.listdir(self.log_dir)):
            with open(os.path.join(self.log_dir, name), errors="replace") as fh:
                texts.append(f"--- {name}\n{fh.read()[-2000:]}")
        return "\n".join(texts)

    def kill_server(self, index: int) -> None:
        """Kill server ``index`` and its session processes at once (SIGKILL), as a crash would."""
        _kill(self.servers[index])

    def stop(self) -> None:
        """Stop every process started (a no-op for those already gone) and remove the logs."""
        for process in getattr(self, "servers", []) + [getattr(self, "_tracker", None)]:
            if process is not None:
                _kill(process)
        shutil.rmtree(getattr(self, "log_dir", ""), ignore_errors=True)

    def __enter__(self) -> "LoopbackFleet":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()
