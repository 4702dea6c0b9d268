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

from collections.abc import Callable, Mapping

import numpy as np
import onnx

from .errors import ModelError

__all__ = ["PEERS", "peer", "available"]

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
        raise ValueError(f"unknown peer {name!r}; valid peers are: "
                         f"{', '.join(sorted(PEERS))}") from None
