"""A model run by two runtimes: TVM's compiled part, then ONNX Runtime's part.

:func:`graphtune.compile` returns a :class:`PartitionedModel` for an ONNX model TVM
imports only in part (:mod:`graphtune.frontend.cut`): the TVM part is a
:class:`~graphtune.compiler.model.CompiledModel` of its own, the rest an ONNX Runtime
session reading the model's inputs and the tensors the TVM part computes.
:meth:`PartitionedModel.export_library` writes both parts as one archive, :func:`load`
(``graphtune.load``) reads it back.

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

import io
import json
import os
import tempfile
import time as _time
import zipfile
from typing import Any, Callable, Sequence

import numpy as np
import onnx
import tvm

from ..errors import ModelError
from ..frontend.cut import (
    ORT,
    TVM,
    Partition,
    _run_session,
    _threads,
    _wall_ms,
    onnxruntime_session,
    random_inputs,
)
from ..frontend.importer import ImportFailure
from ..frontend.rows import ROWS, RowRegion, run_rows
from .model import CompiledModel, device_tensor

__all__ = ["PartitionedModel", "load", "region_feeds", "ARCHIVE_FORMAT"]


def region_feeds(region: RowRegion, values: dict[str, np.ndarray]) -> dict[str, Any]:
    """``values`` with the inputs ``region`` reads whole as TVM tensors, made once for every
    chunk :func:`~graphtune.frontend.rows.run_rows` calls the region on."""
    return {**values, **{name: device_tensor(np.ascontiguousarray(values[name]))
                         for name in region.whole}}


def _owned(array: np.ndarray) -> np.ndarray:
    """``array`` if it owns its memory (ONNX Runtime's outputs, the model's inputs), else a copy
    (a view of TVM's memory or of a chunk of rows).

    >>> a = np.zeros(4); _owned(a) is a, _owned(a[:2]).flags.owndata
    (True, True)
    """
    return array if array.flags.owndata else array.copy()


ARCHIVE_FORMAT = "graphtune.partitioned_model"
"""``format`` of the manifest of the archive :meth:`PartitionedModel.export_library` writes."""

ARCHIVE_VERSION = 1
"""Version of that archive :func:`load` reads."""

_MANIFEST, _LIBRARY, _ORT_MODEL = "manifest.json", "tvm.so", "onnxruntime.onnx"
_GRAPH, _TVM_GRAPH, _CONSTANTS = "graph.onnx", "tvm_graph.onnx", "constants.npz"
"""Members of the archive: the manifest, the TVM part's library, the ONNX Runtime part, the
graphs of the model and of its TVM part without weights, the model's constant outputs."""

_ROWS_LIBRARY, _ROWS_GRAPH = "rows{}.so", "rows{}.onnx"
"""Members of row region ``k``: its shared library and its graph without weights."""

_RETRY = "export the model again with PartitionedModel.export_library"


class PartitionedModel(CompiledModel):
    """A model whose TVM part is compiled and whose other part ONNX Runtime runs.

    A :class:`CompiledModel` whose calls, ``bound_call`` and ``time`` run the whole model
    (numpy in, the model's outputs out in its order); its executable, schedules and
    functions are the TVM part's. :meth:`time_parts` times each part, :meth:`export_library`
    writes the whole model as one archive that :func:`load` reads back.

    Parameters
    ----------
    compiled : CompiledModel
        The TVM part (:attr:`Partition.tvm_model`) compiled.
    partition : Partition
        The partition (:func:`graphtune.frontend.cut.plan`).
    threads : int, optional
        ONNX Runtime's intra-op threads; default ``TVM_NUM_THREADS`` (the cores TVM uses).
    library : bytes, optional
        The TVM part's shared library as exported, for a model :func:`load` read (a loaded
        library cannot be exported anew: :meth:`export_library` writes these bytes).
    regions : list of CompiledModel, optional
        Each row region of the partition (:attr:`Partition.regions`) compiled for its rows.
    region_libraries : list of bytes, optional
        Their shared libraries as exported (as ``library``).

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

    def __init__(self, compiled: CompiledModel, partition: Partition, threads: int | None = None,
                 library: bytes | None = None, regions: Sequence[CompiledModel] = (),
                 region_libraries: Sequence[bytes] | None = None):
        super().__init__(compiled.executable, partition.inputs, partition.outputs, compiled.target,
                         compiled.compile_seconds, compiled.schedules, compiled.functions)
        self.compiled = compiled
        self.partition = partition
        self.threads = _threads(threads)
        self._library = library
        if len(regions) != len(partition.regions):
            raise ValueError(f"the partition has {len(partition.regions)} row region(s), "
                             f"{len(regions)} compiled")
        self.regions = list(regions)
        self._region_libraries = None if region_libraries is None else list(region_libraries)
        self._sessions: list[Any] | None = None

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
    def sessions(self) -> list[Any]:
        """The part after the TVM part, step by step (:attr:`Partition.steps`): an ONNX Runtime
        session per stage, a row region's index for each region (created once)."""
        if self._sessions is None:
            self._sessions = [item if kind == ROWS else onnxruntime_session(item, self.threads)
                              for kind, item in self.partition.steps]
        return self._sessions

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
        got = self.compiled.views(*[feeds[name] for name in self.compiled.input_names])
        return dict(zip(self.compiled.output_names, got))

    def _run_ort(self, values: dict[str, np.ndarray], spent: dict[str, float] | None = None
                 ) -> None:
        """Run the steps after the TVM part on ``values`` (updated in place); ``spent`` adds each
        runtime's seconds (ONNX Runtime's sessions, TVM's row regions)."""
        for step in self.sessions:
            start = _time.perf_counter()
            if isinstance(step, int):
                region = self.partition.regions[step]
                values.update(run_rows(self.regions[step].views, region, region_feeds(region, values)))
            else:
                values.update(_run_session(step, values))
            if spent is not None:
                key = ROWS if isinstance(step, int) else ORT
                spent[key] = spent.get(key, 0.0) + _time.perf_counter() - start

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
        self._run_ort(values)
        # TVM's outputs are views of its memory (CompiledModel.views): the caller gets copies
        outputs = [_owned(values[name]) for name in self.output_names]
        return outputs[0] if len(outputs) == 1 else outputs

    def bound_call(self, *arrays: np.ndarray) -> Callable[[], object]:
        """A zero-argument call running the whole model on ``arrays`` (checked once)."""
        feeds = self._feeds(arrays)
        return lambda: self._run(feeds)

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Standard-normal arrays matching the inputs (zeros for non-float ones)."""
        return random_inputs(self.inputs, seed)

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
        return _wall_ms(self.bound_call(*self.random_inputs(seed)), repeat, number, warmup)

    def _start(self, seed: int) -> dict[str, np.ndarray]:
        """The values a run starts from: random inputs (``seed``) and the constant outputs."""
        return {**self._feeds(self.random_inputs(seed)), **self.partition.constants}

    def time_onnxruntime(self, repeat: int = 30, warmup: int = 1, seed: int = 0) -> np.ndarray:
        """Wall-clock latency of the ONNX Runtime part in ms, ``repeat`` times, on the tensors
        the TVM part hands over (the TVM part run once on random inputs, ``seed``): its sessions
        only, the row regions between them run but not timed (:meth:`time_parts` has them).

        Examples
        --------
        >>> import graphtune
        >>> from graphtune.frontend.cut import plan
        >>> model = graphtune.models.get("resnet18", image_size=32)
        >>> run = PartitionedModel(graphtune.compile(model, graphtune.Config.uniform(model)),
        ...                        plan(model))
        >>> run.time_onnxruntime(repeat=2).shape  # no ONNX Runtime part: 0 ms each
        (2,)
        """
        return self.time_parts(repeat, warmup, seed, rerun_tvm=False)[ORT]

    def time_parts(self, repeat: int = 30, warmup: int = 1, seed: int = 0,
                   rerun_tvm: bool = True) -> dict[str, np.ndarray]:
        """Wall-clock latency of whole runs and of each part, in ms, ``repeat`` times.

        ``rerun_tvm=False`` runs the TVM part once, then times the steps after it only.

        Returns
        -------
        dict of str to numpy.ndarray
            ``{"total": ..., "tvm": ..., "onnxruntime": ...}`` and ``"rows"`` (the row regions)
            when the partition has any, ``repeat`` values each (the parts' sum is the total up
            to the copies between them).

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
        values = self._start(seed)
        for _ in range(warmup if rerun_tvm else 1):
            values.update(self._run_tvm(values))
        for _ in range(warmup):
            self._run_ort(values)
        keys = ["total", TVM, ORT] + [ROWS] * bool(self.regions)
        times: dict[str, list[float]] = {key: [] for key in keys}
        for _ in range(repeat):
            start = _time.perf_counter()
            if rerun_tvm:
                values.update(self._run_tvm(values))
            middle = _time.perf_counter()
            spent: dict[str, float] = {}
            self._run_ort(values, spent)
            end = _time.perf_counter()
            times["total"].append(end - start)
            times[TVM].append(middle - start)
            for key in keys[2:]:
                times[key].append(spent.get(key, 0.0))
        return {key: np.asarray(value) * 1e3 for key, value in times.items()}

    def export_library(self, path: str | os.PathLike) -> None:
        """Write the whole model as one archive (zip) that :func:`graphtune.load` reads back.

        The archive holds ``manifest.json`` (format, the model's inputs and outputs in order,
        the nodes of each runtime, the cuts, the crossing tensors, the TVM part's inputs,
        outputs, target and schedules), ``tvm.so`` (the TVM part's shared library),
        ``onnxruntime.onnx`` (the ONNX Runtime part, with its weights), the graphs of the model
        and of the TVM part without weights (for :meth:`summary` and :meth:`parts`), the
        model's constant outputs, and each row region's library and graph (``rows{k}.so``,
        ``rows{k}.onnx``). Any file name works; ``.zip`` says what it is.

        Examples
        --------
        >>> import os, tempfile, graphtune
        >>> from graphtune.frontend.cut import plan
        >>> model = graphtune.models.get("resnet18", image_size=32)
        >>> run = PartitionedModel(graphtune.compile(model, graphtune.Config.uniform(model)),
        ...                        plan(model))
        >>> path = os.path.join(tempfile.mkdtemp(), "resnet18.zip")
        >>> run.export_library(path)
        >>> import zipfile; sorted(zipfile.ZipFile(path).namelist())[:3]
        ['constants.npz', 'graph.onnx', 'manifest.json']
        """
        part = self.partition
        library = self._library if self._library is not None else _library_bytes(self.compiled)
        constants = io.BytesIO()
        np.savez(constants, *part.constants.values())
        with zipfile.ZipFile(os.fspath(path), "w") as archive:
            archive.writestr(_MANIFEST, json.dumps(self._manifest(), indent=1))
            archive.writestr(_LIBRARY, library)
            archive.writestr(_GRAPH, _without_weights(part.model).SerializeToString())
            archive.writestr(_TVM_GRAPH, _without_weights(part.tvm_model).SerializeToString())
            if part.ort_model is not None:
                archive.writestr(_ORT_MODEL, part.ort_model.SerializeToString())
            archive.writestr(_CONSTANTS, constants.getvalue())
            libraries = self._region_libraries or [_library_bytes(r) for r in self.regions]
            for k, (region, region_library) in enumerate(zip(part.regions, libraries)):
                archive.writestr(_ROWS_LIBRARY.format(k), region_library)
                archive.writestr(_ROWS_GRAPH.format(k),
                                 _without_weights(region.model).SerializeToString())

    def _manifest(self) -> dict[str, Any]:
        """What :func:`load` needs besides the members' bytes (see :meth:`export_library`)."""
        part, tvm_part = self.partition, self.compiled
        return {"format": ARCHIVE_FORMAT, "version": ARCHIVE_VERSION,
                "inputs": part.inputs, "outputs": part.outputs, "tvm_nodes": part.tvm_nodes,
                "onnxruntime_nodes": part.ort_nodes, "crossing": part.crossing,
                "cuts": [[c.index, c.node, c.op_type, c.reason] for c in part.cuts],
                "constants": list(part.constants), "onnxruntime_ms": part.onnxruntime_ms,
                "tvm": _library_info(tvm_part), "dtypes": part.dtypes,
                "row_regions": [{**region.record(), "inputs": region.inputs, "whole": region.whole,
                                 "outputs": region.outputs, "tvm": _library_info(compiled)}
                                for region, compiled in zip(part.regions, self.regions)]}


def _library_info(compiled: CompiledModel) -> dict[str, Any]:
    """What :func:`load` needs to run a compiled library: inputs, outputs, target, schedules."""
    return {"inputs": compiled.inputs, "outputs": compiled.output_names,
            "target": str(compiled.target), "schedules": compiled.schedules,
            "compile_seconds": compiled.compile_seconds}


def _loaded_library(path: str, library: bytes, info: dict[str, Any]) -> CompiledModel:
    """The :class:`CompiledModel` of an exported library and its :func:`_library_info`."""
    return CompiledModel(_load_library(path, library), info["inputs"], info["outputs"],
                         tvm.target.Target(info["target"]), info["compile_seconds"], info["schedules"])


def _library_bytes(compiled: CompiledModel) -> bytes:
    """The shared library ``compiled.export_library`` writes."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, _LIBRARY)
        compiled.export_library(path)
        with open(path, "rb") as handle:
            return handle.read()


def _without_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` without its initializers: its graph only."""
    graph = onnx.ModelProto()
    graph.CopyFrom(model)
    del graph.graph.initializer[:]
    return graph


def load(path: str | os.PathLike, threads: int | None = None) -> PartitionedModel:
    """The model :meth:`PartitionedModel.export_library` wrote to ``path``, ready to run.

    The rule: what is deployed is that one archive; the loaded model runs as the one exported
    did (same library, same ONNX Runtime part: the same outputs, in the model's order), and
    :meth:`~PartitionedModel.summary`, :meth:`~PartitionedModel.parts`, ``time`` and
    :meth:`~PartitionedModel.time_parts` work as on it. A model TVM compiles whole is exported
    so too when wrapped: ``PartitionedModel(compiled, graphtune.partition.plan(model))``
    (a plain ``CompiledModel.export_library`` library loads with ``tvm.runtime.load_module``).

    Parameters
    ----------
    path : str or os.PathLike
        The archive.
    threads : int, optional
        ONNX Runtime's intra-op threads (default ``TVM_NUM_THREADS``).

    Raises
    ------
    ModelError
        A missing file, a file that is no such archive (a TVM library, a damaged or
        truncated archive) or an archive of another version: names the file and the fix.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "model.zip")
    >>> with open(path, "wb") as handle:
    ...     _ = handle.write(b"not an archive")
    >>> try:
    ...     load(path)
    ... except ModelError as err:
    ...     print(str(err).replace(path, "model.zip")[:72])
    model.zip: not a graphtune model archive (File is not a zip file); expor
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModelError(f"{path}: no such file; give the archive PartitionedModel.export_library "
                         "wrote (graphtune compile -o for a partitioned model)")
    with open(path, "rb") as handle:
        if handle.read(4) == b"\x7fELF":
            raise ModelError(f"{path}: a shared library, not a graphtune model archive: load a "
                             "CompiledModel.export_library library with tvm.runtime.load_module "
                             "and tvm.relax.VirtualMachine, or export a partitioned model with "
                             "PartitionedModel.export_library")
    try:
        with zipfile.ZipFile(path) as archive:
            members = {name: archive.read(name) for name in archive.namelist()}
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise ModelError(f"{path}: not a graphtune model archive ({err}); {_RETRY}") from None
    missing = [name for name in (_MANIFEST, _LIBRARY, _GRAPH, _TVM_GRAPH, _CONSTANTS)
               if name not in members]
    if missing:
        raise ModelError(f"{path}: not a graphtune model archive (no {', '.join(missing)}); {_RETRY}")
    try:
        return _loaded(path, members, threads)
    except ModelError:
        raise
    except (KeyError, TypeError, ValueError, RuntimeError, zipfile.BadZipFile) as err:  # TVM: Runtime
        raise ModelError(f"{path}: a damaged graphtune model archive ({type(err).__name__}: "
                         f"{str(err)[:120]}); {_RETRY}") from None


def _loaded(path: str, members: dict[str, bytes], threads: int | None) -> PartitionedModel:
    """The model of an archive's members (KeyError, TypeError, ValueError, RuntimeError or
    BadZipFile for a damaged one; ModelError for another version or a library that does not load)."""
    manifest = json.loads(members[_MANIFEST])
    if not isinstance(manifest, dict) or manifest.get("format") != ARCHIVE_FORMAT:
        raise ValueError(f"{_MANIFEST} is no {ARCHIVE_FORMAT} manifest")
    if manifest.get("version") != ARCHIVE_VERSION:
        raise ModelError(f"{path}: archive version {manifest.get('version')!r}, this graphtune "
                         f"reads version {ARCHIVE_VERSION}; {_RETRY} of this graphtune")
    compiled = _loaded_library(path, members[_LIBRARY], manifest["tvm"])
    with np.load(io.BytesIO(members[_CONSTANTS]), allow_pickle=False) as arrays:
        constants = {name: arrays[f"arr_{k}"] for k, name in enumerate(manifest["constants"])}
    region_info = manifest.get("row_regions", [])
    regions = [RowRegion(list(r["nodes"]), list(r["inputs"]), list(r["outputs"]), int(r["rows"]),
                         _onnx(members, _ROWS_GRAPH.format(k)), list(r.get("whole", [])))
               for k, r in enumerate(region_info)]
    partition = Partition(
        _onnx(members, _GRAPH), list(manifest["tvm_nodes"]), list(manifest["onnxruntime_nodes"]),
        [ImportFailure(*cut) for cut in manifest["cuts"]], _onnx(members, _TVM_GRAPH),
        _onnx(members, _ORT_MODEL) if _ORT_MODEL in members else None,
        list(manifest["crossing"]), [(n, list(s), d) for n, s, d in manifest["inputs"]],
        list(manifest["outputs"]), constants, manifest["onnxruntime_ms"], regions,
        dict(manifest.get("dtypes", {})))
    libraries = [members[_ROWS_LIBRARY.format(k)] for k in range(len(regions))]
    compiled_regions = [_loaded_library(path, library, r["tvm"])
                        for library, r in zip(libraries, region_info)]
    return PartitionedModel(compiled, partition, threads, library=members[_LIBRARY],
                            regions=compiled_regions, region_libraries=libraries)


def _onnx(members: dict[str, bytes], name: str) -> onnx.ModelProto:
    """The ONNX model of the archive member ``name`` (KeyError if missing, ValueError if damaged)."""
    data = members[name]
    try:
        return onnx.load_from_string(data)
    except Exception as err:  # protobuf's DecodeError (no type stubs to name it by)
        raise ValueError(f"{name} is no ONNX model ({err})") from None


def _load_library(path: str, library: bytes) -> Any:
    """The TVM module of the library bytes (written to a temporary file: the loader reads files)."""
    with tempfile.TemporaryDirectory() as folder:
        file = os.path.join(folder, _LIBRARY)
        with open(file, "wb") as handle:
            handle.write(library)
        try:
            return tvm.runtime.load_module(file)
        except RuntimeError as err:  # TVM's errors are RuntimeErrors
            raise ModelError(f"{path}: its TVM library {_LIBRARY} does not load ({str(err)[:120]}); "
                             f"{_RETRY}") from None
