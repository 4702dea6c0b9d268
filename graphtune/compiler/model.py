"""A compiled model: run it on numpy arrays, time it, export it.

Examples
--------
>>> import numpy as np, graphtune
>>> model = graphtune.models.get("resnet18", image_size=32)
>>> compiled = graphtune.compile(model, graphtune.Config.uniform(model))
>>> logits = compiled(np.zeros((1, 3, 32, 32), "float32"))
>>> logits.shape, bool(np.median(compiled.time(repeat=5)) > 0)
((1, 1000), True)
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

import numpy as np
import tvm
from tvm import relax

from ..errors import ModelError
from ..x86 import amx
from ..x86.generic import GENERIC, SCHEDULES

__all__ = ["CompiledModel", "device_tensor", "ALIGNMENT"]


ALIGNMENT = 64
"""Bytes TVM aligns the tensors it allocates to (and its kernels may assume)."""


def device_tensor(array: np.ndarray) -> tvm.runtime.Tensor:
    """``array`` (C-contiguous) as a TVM CPU tensor: its own memory through DLPack where it is
    :data:`ALIGNMENT`-aligned and writable, else a copy (``docs/partition.md`` has what a copy
    costs).

    Examples
    --------
    >>> a = np.arange(1 << 16, dtype="float32")
    >>> t = device_tensor(a)
    >>> np.array_equal(t.numpy(), a), np.shares_memory(np.from_dlpack(t), a) == (a.ctypes.data % 64 == 0)
    (True, True)
    """
    if array.ctypes.data % ALIGNMENT == 0 and array.flags.writeable:
        try:
            return tvm.runtime.from_dlpack(array)
        except (BufferError, ValueError, TypeError):
            pass
    return tvm.runtime.tensor(array, tvm.cpu(0))


class CompiledModel:
    """A model compiled by :func:`graphtune.compile` for the local CPU.

    Parameters
    ----------
    executable : tvm.relax.VMExecutable
        The result of ``tvm.compile``.
    inputs : sequence of (str, list of int, str)
        Name, shape and dtype of each input, in call order.
    output_names : sequence of str
        Names of the outputs, in the order they are returned.
    target : tvm.target.Target
        The target it was compiled for.
    compile_seconds : float, optional
        Wall time ``graphtune.compile`` took.
    schedules : dict, optional
        ``{op kind: {schedule kind: number of functions}}`` of the built
        module (see :func:`graphtune.compiler.legalize.schedule_counts`).
    functions : dict, optional
        The scheduled TIR of every function the model runs (name -> PrimFunc),
        for inspection (e.g. :func:`graphtune.x86.generic.audit`).
    call_sites : list of (str, list of str), optional
        Per PrimFunc call of ``main``, in call order, the PrimFunc and the names
        of the Relax bindings it computes (see :mod:`graphtune.compiler.sites`); used by
        :func:`graphtune.profile` to name the ONNX nodes of each call.

    Examples
    --------
    >>> import graphtune
    >>> model = graphtune.models.get("resnet18", image_size=32)
    >>> compiled = graphtune.compile(model, graphtune.Config.uniform(model))
    >>> compiled.input_names, compiled.output_names
    (['input'], ['output'])
    """

    def __init__(self, executable, inputs: Sequence[tuple[str, list[int], str]],
                 output_names: Sequence[str], target: tvm.target.Target,
                 compile_seconds: float | None = None,
                 schedules: dict[str, dict[str, int]] | None = None,
                 functions: dict | None = None,
                 call_sites: list[tuple[str, list[str]]] | None = None):
        self.executable = executable
        self.inputs = [(name, list(shape), dtype) for name, shape, dtype in inputs]
        self.output_names = list(output_names)
        self.target = target
        self.compile_seconds = compile_seconds
        self.schedules = dict(schedules or {})
        self.functions = dict(functions or {})
        self.call_sites = call_sites
        self._vm = None

    def __repr__(self) -> str:
        return f"CompiledModel(inputs={self.input_names}, outputs={self.output_names})"

    def schedule_summary(self) -> str:
        """One line: functions per schedule kind, and the ops that got only the generic one.

        Examples
        --------
        >>> import numpy as np, graphtune
        >>> model = graphtune.models.get("resnet18", image_size=32)
        >>> compiled = graphtune.compile(model, graphtune.Config.uniform(model))
        >>> compiled.schedule_summary()
        'schedules: 16 kernel, 1 transform, 1 injective, 2 reduction'
        """
        totals: dict[str, int] = {}
        for per_op in self.schedules.values():
            for kind, count in per_op.items():
                totals[kind] = totals.get(kind, 0) + count
        order = {kind: rank for rank, kind in enumerate(SCHEDULES)}
        line = "schedules: " + ", ".join(
            f"{totals[kind]} {kind}" for kind in sorted(totals, key=lambda k: order.get(k, len(order))))
        generic = [op for op, per_op in self.schedules.items() if GENERIC in per_op]
        return line + (f" (generic: {', '.join(generic)})" if generic else "")

    @property
    def input_names(self) -> list[str]:
        """Names of the inputs, in call order."""
        return [name for name, _, _ in self.inputs]

    @property
    def vm(self) -> relax.VirtualMachine:
        """The Relax virtual machine running the model on ``tvm.cpu(0)`` (created once)."""
        if self._vm is None:
            amx.request_permission()  # before any AMX kernel runs in this process
            self._vm = relax.VirtualMachine(self.executable, tvm.cpu(0))
        return self._vm

    def _tensors(self, arrays: Sequence[np.ndarray]) -> list:
        """Check arrays against the inputs and move them to the device."""
        if len(arrays) != len(self.inputs):
            raise ModelError(f"the model takes {len(self.inputs)} input(s) {self.input_names}, "
                             f"got {len(arrays)} array(s)")
        tensors = []
        for array, (name, shape, dtype) in zip(arrays, self.inputs):
            if isinstance(array, tvm.runtime.Tensor) and list(array.shape) == shape \
                    and str(array.dtype) == dtype:
                tensors.append(array)  # on the device already (device_tensor)
                continue
            array = np.asarray(array)
            if list(array.shape) != shape:
                raise ModelError(f"input {name!r}: expected shape {shape}, got {list(array.shape)}")
            tensors.append(device_tensor(np.ascontiguousarray(array, dtype=dtype)))
        return tensors

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | list[np.ndarray]:
        """Run the model; one numpy array per input, in :attr:`input_names` order.

        Returns
        -------
        numpy.ndarray or list of numpy.ndarray
            The single output, or every output in :attr:`output_names` order.

        Raises
        ------
        ModelError
            Wrong number of inputs or an input of the wrong shape.

        Examples
        --------
        >>> import numpy as np, graphtune
        >>> model = graphtune.models.get("resnet18", image_size=32)
        >>> compiled = graphtune.compile(model, graphtune.Config.uniform(model))
        >>> compiled(np.zeros((1, 3, 32, 32), "float32")).shape
        (1, 1000)
        """
        result = self.vm["main"](*self._tensors(arrays))
        if isinstance(result, tvm.runtime.Tensor):
            return result.numpy()
        outputs = [item.numpy() for item in result]
        return outputs[0] if len(outputs) == 1 else outputs

    def views(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """Run the model; its outputs as numpy arrays over the memory TVM wrote them to (DLPack,
        no copy), in :attr:`output_names` order.

        For values handed on to other runtimes (:class:`~graphtune.compiler.partitioned.PartitionedModel`
        passes its TVM part's outputs to ONNX Runtime this way): an output may share memory with
        an input or with the model's weights, so never write to one; :meth:`__call__` returns
        copies (``docs/partition.md`` has what a copy costs).

        Raises
        ------
        ModelError
            As :meth:`__call__`.

        Examples
        --------
        >>> import numpy as np, graphtune
        >>> model = graphtune.models.get("resnet18", image_size=32)
        >>> compiled = graphtune.compile(model, graphtune.Config.uniform(model))
        >>> x = np.zeros((1, 3, 32, 32), "float32")
        >>> [out] = compiled.views(x)
        >>> out.shape, out.flags.owndata, np.array_equal(out, compiled(x))
        ((1, 1000), False, True)
        """
        result = self.vm["main"](*self._tensors(arrays))
        items = [result] if isinstance(result, tvm.runtime.Tensor) else list(result)
        return [np.from_dlpack(item) for item in items]

    def bound_call(self, *arrays: np.ndarray) -> Callable[[], object]:
        """A zero-argument call running the model on ``arrays`` already on the device.

        For timing side by side with other runtimes
        (:func:`graphtune.latency.interleaved`): the inputs are checked and
        copied once, so each call measures the model alone.

        Examples
        --------
        >>> import numpy as np, graphtune
        >>> model = graphtune.models.get("resnet18", image_size=32)
        >>> compiled = graphtune.compile(model, graphtune.Config.uniform(model))
        >>> run = compiled.bound_call(np.zeros((1, 3, 32, 32), "float32"))
        >>> run().numpy().shape
        (1, 1000)
        """
        args, main = self._tensors(arrays), self.vm["main"]
        return lambda: main(*args)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Standard-normal arrays matching the inputs.

        Examples
        --------
        >>> import numpy as np, graphtune
        >>> model = graphtune.models.get("resnet18", image_size=32)
        >>> compiled = graphtune.compile(model, graphtune.Config.uniform(model))
        >>> [a.shape for a in compiled.random_inputs()]
        [(1, 3, 32, 32)]
        """
        rng = np.random.default_rng(seed)
        return [rng.standard_normal(shape).astype(dtype) for _, shape, dtype in self.inputs]

    def time(self, repeat: int = 30, number: int = 1, min_repeat_ms: int = 0,
             warmup: int = 1, seed: int = 0) -> np.ndarray:
        """Latency of one run in ms, ``repeat`` times, on random inputs.

        Parameters
        ----------
        repeat : int, default 30
            Number of measurements returned.
        number : int, default 1
            Runs averaged inside each measurement.
        min_repeat_ms : int, default 0
            Lower bound on each measurement's duration (raises ``number`` if needed).
        warmup : int, default 1
            Untimed runs first.
        seed : int, default 0
            Seed of the random inputs.

        Returns
        -------
        numpy.ndarray
            ``repeat`` per-run latencies in milliseconds.

        Examples
        --------
        >>> import numpy as np, graphtune
        >>> model = graphtune.models.get("resnet18", image_size=32)
        >>> compiled = graphtune.compile(model, graphtune.Config.uniform(model))
        >>> times = compiled.time(repeat=3)
        >>> times.shape, bool(times.min() > 0)
        ((3,), True)
        """
        if repeat < 1 or number < 1:
            raise ValueError(f"repeat and number must be >= 1, got {repeat} and {number}")
        args = self._tensors(self.random_inputs(seed))
        for _ in range(warmup):
            self.vm["main"](*args)
        timer = self.vm.time_evaluator("main", tvm.cpu(0), number=number, repeat=repeat,
                                       min_repeat_ms=min_repeat_ms)
        return np.asarray(timer(*args).results, dtype=float) * 1e3

    def export_library(self, path: str | os.PathLike) -> None:
        """Write the compiled model as a shared library (load with ``tvm.runtime.load_module``).

        Examples
        --------
        >>> import numpy as np, graphtune
        >>> model = graphtune.models.get("resnet18", image_size=32)
        >>> compiled = graphtune.compile(model, graphtune.Config.uniform(model))
        >>> import os, tempfile, tvm
        >>> path = os.path.join(tempfile.mkdtemp(), "resnet18.so")
        >>> compiled.export_library(path)
        >>> type(tvm.runtime.load_module(path)).__name__
        'Module'
        """
        self.executable.export_library(os.fspath(path))
