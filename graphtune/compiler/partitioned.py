"""A model run by two runtimes: TVM's compiled part, then ONNX Runtime's part.

:func:`graphtune.compile` returns a :class:`PartitionedModel` for an ONNX model TVM
imports only in part (:mod:`graphtune.frontend.cut`): the TVM part is a
:class:`~graphtune.compiler.model.CompiledModel` of its own, the rest an ONNX Runtime
session reading the model's inputs and the tensors the TVM part computes.

Examples
--------
>>> import numpy as np, graphtune
>>> from graphtune.frontend.cut import plan
>>> model = graphtune.models.get("resnet18", image_size=32)
>>> part = plan(model)
>>> run = PartitionedModel(graphtune.compile(model, graphtune.Config.uniform(model)), part)
>>> run(np.zeros((1, 3, 32, 32), "float32")).shape
(1, 1000)
"""

from __future__ import annotations

import os
import time as _time
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import ModelError
from ..frontend.cut import ORT, TVM, Partition
from .model import CompiledModel

__all__ = ["PartitionedModel"]


class PartitionedModel(CompiledModel):
    """A model whose TVM part is compiled and whose other part ONNX Runtime runs.

    A :class:`CompiledModel` whose calls, ``bound_call`` and ``time`` run the whole model
    (numpy in, the model's outputs out in its order); its executable, schedules and
    functions are the TVM part's. :meth:`time_parts` times each part.

    Parameters
    ----------
    compiled : CompiledModel
        The TVM part (:attr:`Partition.tvm_model`) compiled.
    partition : Partition
        The partition (:func:`graphtune.frontend.cut.plan`).
    threads : int, optional
        ONNX Runtime's intra-op threads; default ``TVM_NUM_THREADS`` (the cores TVM uses).

    Attributes
    ----------
    compiled : CompiledModel
    partition : Partition

    Examples
    --------
    >>> import graphtune
    >>> from graphtune.frontend.cut import plan
    >>> model = graphtune.models.get("resnet18", image_size=32)
    >>> run = PartitionedModel(graphtune.compile(model, graphtune.Config.uniform(model)), plan(model))
    >>> run.input_names, run.output_names
    (['input'], ['output'])
    """

    def __init__(self, compiled: CompiledModel, partition: Partition, threads: int | None = None):
        super().__init__(compiled.executable, partition.inputs, partition.outputs, compiled.target,
                         compiled.compile_seconds, compiled.schedules, compiled.functions)
        self.compiled = compiled
        self.partition = partition
        self.threads = threads or int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)
        self._session: Any = None

    def __repr__(self) -> str:
        return (f"PartitionedModel(tvm={len(self.partition.tvm_nodes)} nodes, "
                f"onnxruntime={len(self.partition.ort_nodes)} nodes)")

    def summary(self) -> str:
        """Which nodes run where (:meth:`Partition.summary`) and the TVM part's schedules."""
        return self.partition.summary() + "\n" + self.compiled.schedule_summary()

    def parts(self) -> list[dict[str, Any]]:
        """Each part's runtime, nodes, inputs and outputs (:meth:`Partition.parts`)."""
        return self.partition.parts()

    @property
    def session(self) -> Any:
        """The ONNX Runtime session of the other part (created once; None if there is none)."""
        if self._session is None and self.partition.ort_model is not None:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = self.threads
            options.log_severity_level = 3
            self._session = onnxruntime.InferenceSession(
                self.partition.ort_model.SerializeToString(), options,
                providers=["CPUExecutionProvider"])
        return self._session

    def _tensors(self, arrays: Sequence[np.ndarray]) -> list:
        return [self._feeds(arrays)]

    def _feeds(self, arrays: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        if len(arrays) != len(self.inputs):
            raise ModelError(f"the model takes {len(self.inputs)} input(s) {self.input_names}, "
                             f"got {len(arrays)} array(s)")
        feeds = {}
        for array, (name, shape, dtype) in zip(arrays, self.inputs):
            array = np.asarray(array)
            if list(array.shape) != shape:
                raise ModelError(f"input {name!r}: expected shape {shape}, got {list(array.shape)}")
            feeds[name] = np.ascontiguousarray(array, dtype=dtype)
        return feeds

    def _run_tvm(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        got = self.compiled(*[feeds[name] for name in self.compiled.input_names])
        return dict(zip(self.compiled.output_names, got if isinstance(got, list) else [got]))

    def _run_ort(self, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        session = self.session
        if session is None:
            return {}
        names = [o.name for o in session.get_outputs()]
        got = session.run(names, {i.name: values[i.name] for i in session.get_inputs()})
        return dict(zip(names, got))

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | list[np.ndarray]:
        """Run the model: one numpy array per input, in :attr:`input_names` order.

        Returns
        -------
        numpy.ndarray or list of numpy.ndarray
            The single output, or every output in the model's order.

        Raises
        ------
        ModelError
            Wrong number of inputs or an input of the wrong shape.
        """
        return self._run(self._feeds(arrays))

    def _run(self, feeds: dict[str, np.ndarray]) -> np.ndarray | list[np.ndarray]:
        values = {**feeds, **self.partition.constants}
        values.update(self._run_tvm(values))
        values.update(self._run_ort(values))
        outputs = [values[name] for name in self.output_names]
        return outputs[0] if len(outputs) == 1 else outputs

    def bound_call(self, *arrays: np.ndarray) -> Callable[[], object]:
        """A zero-argument call running the whole model on ``arrays`` (checked once)."""
        feeds = self._feeds(arrays)
        return lambda: self._run(feeds)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Standard-normal arrays matching the inputs (zeros for non-float ones)."""
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(shape).astype(dtype) if np.issubdtype(np.dtype(dtype), np.floating)
                else np.zeros(shape, dtype) for _, shape, dtype in self.inputs]

    def time(self, repeat: int = 30, number: int = 1, min_repeat_ms: int = 0,
             warmup: int = 1, seed: int = 0) -> np.ndarray:
        """Wall-clock latency of one whole run in ms, ``repeat`` times, on random inputs.

        As :meth:`CompiledModel.time`; ``min_repeat_ms`` is not used (each measurement is
        ``number`` runs).

        Examples
        --------
        >>> import graphtune
        >>> from graphtune.frontend.cut import plan
        >>> model = graphtune.models.get("resnet18", image_size=32)
        >>> run = PartitionedModel(graphtune.compile(model, graphtune.Config.uniform(model)),
        ...                        plan(model))
        >>> run.time(repeat=2).shape
        (2,)
        """
        if repeat < 1 or number < 1:
            raise ValueError(f"repeat and number must be >= 1, got {repeat} and {number}")
        call = self.bound_call(*self.random_inputs(seed))
        for _ in range(warmup):
            call()
        times = []
        for _ in range(repeat):
            start = _time.perf_counter()
            for _ in range(number):
                call()
            times.append((_time.perf_counter() - start) / number)
        return np.asarray(times) * 1e3

    def export_library(self, path: str | os.PathLike) -> None:
        """Refused: the ONNX Runtime part is no TVM library; export the TVM part with
        ``self.compiled.export_library(path)`` and keep ``partition.ort_model`` beside it."""
        raise ModelError("a partitioned model runs ONNX Runtime too: export its TVM part with "
                         ".compiled.export_library(path) and save .partition.ort_model with "
                         "onnx.save")

    def time_parts(self, repeat: int = 30, warmup: int = 1, seed: int = 0) -> dict[str, np.ndarray]:
        """Wall-clock latency of whole runs and of each part, in ms, ``repeat`` times.

        Returns
        -------
        dict of str to numpy.ndarray
            ``{"total": ..., "tvm": ..., "onnxruntime": ...}``, ``repeat`` values each (the
            parts' sum is the total up to the copies between them).

        Examples
        --------
        >>> import graphtune
        >>> from graphtune.frontend.cut import plan
        >>> model = graphtune.models.get("resnet18", image_size=32)
        >>> run = PartitionedModel(graphtune.compile(model, graphtune.Config.uniform(model)),
        ...                        plan(model))
        >>> sorted((k, v.shape) for k, v in run.time_parts(repeat=2).items())
        [('onnxruntime', (2,)), ('total', (2,)), ('tvm', (2,))]
        """
        if repeat < 1:
            raise ValueError(f"repeat must be >= 1, got {repeat}")
        values = self._feeds(self.random_inputs(seed))
        values.update(self.partition.constants)
        for _ in range(warmup):
            values.update(self._run_tvm(values))
            self._run_ort(values)
        times: dict[str, list[float]] = {"total": [], TVM: [], ORT: []}
        for _ in range(repeat):
            start = _time.perf_counter()
            values.update(self._run_tvm(values))
            middle = _time.perf_counter()
            self._run_ort(values)
            end = _time.perf_counter()
            times["total"].append(end - start)
            times[TVM].append(middle - start)
            times[ORT].append(end - middle)
        return {key: np.asarray(value) * 1e3 for key, value in times.items()}
