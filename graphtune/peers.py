"""Peer runtimes to compare against: ONNX Runtime and OpenVINO, configured like for like.

Each peer runs the same ONNX model with the same thread count as graphtune,
in its own fastest default configuration. OpenVINO defaults to bf16 on CPUs
with AVX512-BF16, so ``openvino`` asks for fp32 explicitly and
``openvino-bf16`` is reported under its own name. ONNX Runtime's worker
threads keep spinning after a call (disabling that made it bimodal, 8.5 or
14-16 ms on ResNet-18); :func:`graphtune.latency.interleaved` absorbs the
spin of whoever ran before with untimed settle calls.

Examples
--------
>>> import numpy as np
>>> from graphtune import models
>>> run = peer("ort", models.get("resnet18", image_size=32), threads=2)
>>> run({"input": np.zeros((1, 3, 32, 32), "float32")})[0].shape
(1, 1000)
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx

from .errors import ArgumentError, ModelError

__all__ = ["PEERS", "peer", "available", "PeerProcess"]

Run = Callable[[Mapping[str, np.ndarray]], list[np.ndarray]]


def _ort(model: onnx.ModelProto, threads: int) -> Run:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return lambda inputs: session.run(None, dict(inputs))


def _openvino(precision: str) -> Callable[[onnx.ModelProto, int], Run]:
    def make(model: onnx.ModelProto, threads: int) -> Run:
        import openvino as ov

        core = ov.Core()
        compiled = core.compile_model(
            core.read_model(model.SerializeToString(), b""), "CPU",
            {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": threads,
             "PERFORMANCE_HINT": "LATENCY"})
        request = compiled.create_infer_request()

        def run(inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
            result = request.infer(dict(inputs))
            return [np.asarray(result[out]) for out in compiled.outputs]

        return run

    return make


PEERS: dict[str, tuple[str, Callable[[onnx.ModelProto, int], Run]]] = {
    "ort": ("onnxruntime", _ort),
    "openvino": ("openvino", _openvino("f32")),
    "openvino-bf16": ("openvino", _openvino("bf16")),
}
"""Peer name -> (Python package it needs, factory ``(model, threads) -> run``)."""


def available(name: str) -> bool:
    """Whether the package peer ``name`` needs is installed.

    Examples
    --------
    >>> available("ort")
    True
    """
    import importlib.util

    return importlib.util.find_spec(_entry(name)[0]) is not None


def peer(name: str, model: onnx.ModelProto, threads: int) -> Run:
    """A function running ``model`` in peer ``name``: ``run({input: array}) -> [outputs]``.

    Parameters
    ----------
    name : str
        One of :data:`PEERS` (``ort``, ``openvino``, ``openvino-bf16``).
    model : onnx.ModelProto
        The model, as given to graphtune.
    threads : int
        Intra-op threads (use graphtune's, for a like-for-like comparison).

    Raises
    ------
    ValueError
        For an unknown peer name (the message lists the valid ones).
    ModelError
        If the peer's package is not installed (``pip install graphtune[bench]``).

    Examples
    --------
    >>> peer("tensorrt", None, 2)
    Traceback (most recent call last):
    ...
    ValueError: unknown peer 'tensorrt'; valid peers are: openvino, openvino-bf16, ort
    """
    package, factory = _entry(name)
    if not available(name):
        raise ModelError(f"peer {name!r} needs the {package} package: pip install "
                         f"'graphtune[bench]'")
    return factory(model, int(threads))


def _entry(name: str) -> tuple[str, Callable]:
    try:
        return PEERS[name]
    except KeyError:
        raise ArgumentError(f"unknown peer {name!r}; valid peers are: "
                         f"{', '.join(sorted(PEERS))}") from None


def _serve(read_fd: int, write_fd: int) -> None:
    """Worker of :class:`PeerProcess` (``python -c``): build the peer, then time on request."""
    with os.fdopen(read_fd, "rb") as requests, os.fdopen(write_fd, "wb") as replies:
        def reply(value: object) -> None:
            pickle.dump(value, replies)
            replies.flush()

        try:
            name, model_bytes, threads, feeds = pickle.load(requests)
        except EOFError:  # the parent stopped before sending the model
            return
        try:
            run = peer(name, onnx.load_from_string(model_bytes), threads)
            reply([np.asarray(o) for o in run(feeds)])
        except Exception as err:  # reported to the parent, which raises it
            reply(ModelError(f"peer {name!r} failed to start: {err}"))
            return
        while (settle := _request(requests)) is not None:
            for _ in range(settle):
                run(feeds)
            start = time.perf_counter()
            run(feeds)
            reply((time.perf_counter() - start) * 1e3)


def _request(requests: Any) -> int | None:
    """The next request of the parent; None to stop (also when the parent went away)."""
    try:
        return pickle.load(requests)
    except EOFError:
        return None


class PeerProcess:
    """A peer runtime in a process of its own, timing itself on request.

    Loaded into graphtune's process, OpenVINO slowed TVM-built models by
    ~12% (ResNet-50: 23.2 vs 20.7 ms) however long the other runtimes were
    left to settle; in its own process it cannot. Pass instances to
    :func:`graphtune.latency.interleaved`, which lets them time themselves.

    Parameters
    ----------
    name : str
        Peer name (:data:`PEERS`).
    model : onnx.ModelProto
        The model.
    threads : int
        Intra-op threads.
    feeds : mapping of str to numpy.ndarray
        The inputs every run uses.

    Examples
    --------
    >>> from graphtune import models
    >>> x = {"input": np.zeros((1, 3, 32, 32), "float32")}
    >>> with PeerProcess("ort", models.get("resnet18", image_size=32), 2, x) as p:
    ...     p.outputs[0].shape, p.timed(settle=1) > 0
    ((1, 1000), True)
    """

    def __init__(self, name: str, model: onnx.ModelProto, threads: int,
                 feeds: Mapping[str, np.ndarray]) -> None:
        _entry(name)
        child_read, self._requests = os.pipe()
        self._replies, child_write = os.pipe()
        code = f"from graphtune.peers import _serve; _serve({child_read}, {child_write})"
        self._process = subprocess.Popen([sys.executable, "-c", code],
                                         pass_fds=(child_read, child_write))
        os.close(child_read)
        os.close(child_write)
        self._out = os.fdopen(self._requests, "wb")
        self._in = os.fdopen(self._replies, "rb")
        self._send((name, model.SerializeToString(), int(threads), dict(feeds)))
        first = self._receive()
        if isinstance(first, Exception):
            self.close()
            raise first
        self.outputs: list[np.ndarray] = first

    def _send(self, value: object) -> None:
        pickle.dump(value, self._out)
        self._out.flush()

    def _receive(self) -> object:
        try:
            return pickle.load(self._in)
        except EOFError:
            raise ModelError(f"peer process exited with status {self._process.wait()}") from None

    def timed(self, settle: int) -> float:
        """Run ``settle`` untimed calls, then one timed call; its latency in ms."""
        self._send(int(settle))
        return float(self._receive())

    def close(self) -> None:
        """Stop the worker process."""
        try:
            self._send(None)
            self._out.close()
        except (BrokenPipeError, OSError, ValueError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._in.close()

    def __enter__(self) -> "PeerProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
