"""Peer runtimes to compare against: ONNX Runtime and OpenVINO, configured like for like.

Each peer runs the same ONNX model with the same thread count as graphtune,
in its own fastest default configuration. OpenVINO defaults to bf16 on CPUs
with AVX512-BF16, so ``openvino`` asks for fp32 explicitly and
``openvino-bf16`` is reported under its own name. ``ort-int8`` and
``openvino-int8`` are the same runtimes given a quantized (QDQ) model, named for
the int8 benchmarks' columns: OpenVINO runs the quantized ops of such a model in
u8 / i8 whatever its ``INFERENCE_PRECISION_HINT``, which sets the precision of
the other ops (f32 here, as in ONNX Runtime). ONNX Runtime's worker threads keep
spinning after a call (~40 ms; disabling that made it bimodal, 8.5 or 14-16 ms on
ResNet-18), as do TVM's in graphtune's process (~10 ms with the spin count graphtune sets):
:func:`graphtune.latency.interleaved` waits until the other runtimes'
processes are idle before each one's turn.

Examples
--------
>>> import numpy as np
>>> from graphtune import models
>>> run = peer("ort", models.get("resnet18", image_size=32), threads=2)
>>> run({"input": np.zeros((1, 3, 32, 32), "float32")})[0].shape
(1, 1000)
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx

from .errors import ArgumentError, ModelError
from .latency import settled_call_ms
from .procs import Child, ChildFailure, Mode

__all__ = ["PEERS", "peer", "available", "PeerProcess", "PeerStage", "PeerFailure"]

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
    "ort-int8": ("onnxruntime", _ort),
    "openvino-int8": ("openvino", _openvino("f32")),
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
        One of :data:`PEERS` (``ort``, ``openvino``, ``openvino-bf16``, ``ort-int8``,
        ``openvino-int8``).
    model : onnx.ModelProto
        The model, as given to graphtune.
    threads : int
        Intra-op threads (use graphtune's, for a like-for-like comparison).

    Raises
    ------
    ArgumentError
        For an unknown peer name (the message lists the valid ones); a
        ``ValueError``.
    ModelError
        If the peer's package is not installed (``pip install graphtune[bench]``).

    Examples
    --------
    >>> peer("tensorrt", None, 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    graphtune.errors.ArgumentError: unknown peer 'tensorrt'; valid peers are: openvino, ...
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


class PeerFailure(ModelError):
    """A :class:`PeerProcess` failed to start or to run: its peer raised, crashed or hung.

    Attributes
    ----------
    peer : str
        The peer's name, so that a caller timing several can go on without it.
    """

    def __init__(self, peer: str, message: str) -> None:
        super().__init__(message)
        self.peer = peer

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        return type(self), (self.peer, str(self))


class PeerStage(enum.Enum):
    """Stage of a :class:`PeerProcess`; its value names a failure in it."""

    START = "start"  #: build the peer and run the model once
    RUN = "run"  #: settle and timed calls


def _start(name: str, model_bytes: bytes, threads: int,
           feeds: dict[str, np.ndarray]) -> tuple[tuple[Run, dict], list[np.ndarray]]:
    """Peer process (``Mode.KEEP``): build the peer, keep it, return its outputs."""
    run = peer(name, onnx.load_from_string(model_bytes), threads)
    return (run, feeds), [np.asarray(o) for o in run(feeds)]


def _timed(kept: tuple[Run, dict], settle: int, settle_ms: float) -> float:
    """Peer process (``Mode.USE``): untimed calls, then one timed call (ms); see
    :func:`graphtune.latency.settled_call_ms`."""
    run, feeds = kept
    return settled_call_ms(lambda: run(feeds), settle, settle_ms)


class PeerProcess:
    """A peer runtime in a process of its own, timing itself on request.

    Loaded into graphtune's process, OpenVINO slowed TVM-built models by
    ~12% (ResNet-50: 23.2 vs 20.7 ms) however long the other runtimes were
    left to settle; in its own process (a :class:`graphtune.procs.Child`,
    which loads no TVM) it cannot. Pass instances to
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
    timeout : float
        Seconds the start (building the peer, one run) and each
        :meth:`timed` call may take before the process is killed.

    Raises
    ------
    PeerFailure
        If the peer fails to start (the message says why), crashes or hangs (a
        :class:`graphtune.errors.ModelError`).

    Examples
    --------
    >>> from graphtune import models
    >>> x = {"input": np.zeros((1, 3, 32, 32), "float32")}
    >>> with PeerProcess("ort", models.get("resnet18", image_size=32), 2, x) as p:
    ...     p.outputs[0].shape, p.timed(settle=1) > 0
    ((1, 1000), True)
    """

    def __init__(self, name: str, model: onnx.ModelProto, threads: int,
                 feeds: Mapping[str, np.ndarray], timeout: float = 600.0) -> None:
        _entry(name)
        self.name, self.timeout = name, timeout
        self._child = Child()
        self.outputs: list[np.ndarray] = self._call(
            _start, (name, model.SerializeToString(), int(threads), dict(feeds)),
            PeerStage.START, Mode.KEEP)

    def _call(self, fn: Callable, args: tuple, stage: PeerStage, mode: Mode) -> Any:
        try:
            return self._child.call(fn, args, self.timeout, stage=stage, mode=mode)
        except ChildFailure as err:
            self.close()
            raise PeerFailure(self.name, f"peer {self.name!r} failed to {stage.value}: "
                                         f"{err.message}") from None

    @property
    def pid(self) -> int | None:
        """Process id of the peer's process (None once closed)."""
        return self._child.pid

    def timed(self, settle: int, settle_ms: float = 0.0) -> float:
        """Untimed calls (at least ``settle`` and ``settle_ms`` of them), then one timed call; its
        latency in ms."""
        return float(self._call(_timed, (int(settle), float(settle_ms)), PeerStage.RUN, Mode.USE))

    def close(self) -> None:
        """Stop the peer's process."""
        self._child.close()

    def __enter__(self) -> "PeerProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
