"""Cut an ONNX model into the part TVM compiles and the part ONNX Runtime runs.

The Relax ONNX importer rejects some nodes (``Loop``, ops reading shape tensors of
data-dependent shape: ``ReduceMin cannot handle ShapeExpr inputs``) and gives others
shapes that depend on the data (``NonZero``, ``Compress``); a non-max suppression it
types by its upper bound, which only a graph output may carry. :func:`plan` finds the
largest part of the model TVM imports with static shapes: every node but those where the
import stops and everything downstream of them. Starting from the whole (constant-folded)
graph it imports the candidate part strictly (:func:`~graphtune.frontend.importer.relax_import`),
and at the node the import stops at it moves that node and its descendants to ONNX Runtime,
until the rest imports. The TVM part is closed under producers, so a model runs as the TVM
part, then the ONNX Runtime part reading the model's inputs and the tensors the TVM part
hands over (:attr:`Partition.crossing`). :meth:`Partition.time_onnxruntime` times the ONNX
Runtime part without compiling (what tune records).

Examples
--------
>>> from graphtune import models
>>> part = plan(models.get("resnet18", image_size=32))
>>> part.whole, len(part.tvm_nodes), part.ort_model is None
(True, 49, True)
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import tvm
from onnx import helper
from tvm import relax

from ..errors import ConfigMismatchError, ModelError
from .appends import loop_appends
from .fold import fold_constants, names_read, submodel
from .importer import (
    ImportFailure,
    _load_onnx,
    _static_input_shapes,
    _static_type,
    import_model,
    prepare_onnx,
    relax_import,
)
from .nms import batched_nms
from .rows import ONNXRUNTIME, ROWS, RowRegion, find_regions, stages
from .scatter import scatter_rows
from .walk import bindings

if TYPE_CHECKING:
    from ..config import Config

__all__ = ["Partition", "plan", "sample", "import_or_cut", "import_tvm_part", "tvm_part", "record_partition",
           "recorded_partition", "recorded_summary", "onnxruntime_session", "random_inputs", "DATA_DEPENDENT",
           "PARTITION_KEY", "ORT_MS_KEY", "ORT_REPEAT"]

DATA_DEPENDENT = frozenset({"NonMaxSuppression"})
"""Op types whose output Relax types by an upper bound but whose true shape depends on the
data: TVM computes them as a graph output only; a node reading them runs in ONNX Runtime."""

PARTITION_KEY = "partition"
"""Key of ``Config.model`` holding the partition a config was tuned for."""

ORT_MS_KEY = "onnxruntime_ms"
"""Key of ``Config.solution`` holding the ONNX Runtime part's median time (ms) measured in tune."""

ROW_REGIONS_KEY = "row_regions"
"""Key of the partition record holding its row regions (``[{"nodes": [...], "rows": R}]``)."""

ORT_REPEAT = 10
"""Runs of the ONNX Runtime part :func:`record_partition` times (their median is recorded)."""

SHOWN_CUTS = 5
"""Cuts a partition's summary names one by one (the rest are counted by op type)."""


TVM, ORT = "tvm", "onnxruntime"
"""Names of the two runtimes in summaries and config records."""


@dataclass
class Partition:
    """Which nodes of an ONNX model TVM compiles and which ONNX Runtime runs.

    Attributes
    ----------
    model : onnx.ModelProto
        The model partitioned: the given one when TVM takes it whole, else its constants
        folded for the static input shapes and every node named.
    tvm_nodes, ort_nodes : list of str
        Node names of each part, in graph order.
    cuts : list of ImportFailure
        The nodes the TVM part stopped at, and why (each with its descendants runs in ONNX
        Runtime).
    tvm_model : onnx.ModelProto
        The TVM part as a model of its own: the model's inputs it reads, its outputs and the
        crossing tensors as outputs, static input shapes.
    ort_model : onnx.ModelProto or None
        The ONNX Runtime part (inputs: the model's inputs it reads and the crossing tensors);
        None when TVM takes the whole model.
    crossing : list of str
        Tensors the TVM part computes for the ONNX Runtime part.
    inputs : list of (str, list of int, str)
        Name, static shape and numpy dtype of each model input.
    outputs : list of str
        The model's outputs, in order.
    constants : dict
        Model outputs that are constants after folding (name -> array).
    onnxruntime_ms : float or None
        Median time (ms) of the ONNX Runtime part on this machine (:meth:`time_onnxruntime`),
        set by :func:`record_partition` when :func:`graphtune.tune` records the partition;
        None until measured.
    regions : list of RowRegion
        Row regions of the ONNX Runtime part that TVM compiles for a fixed row count
        (:mod:`graphtune.frontend.rows`: a detector's ROI heads), in graph order.
    region_inputs : dict
        The regions' inputs on the run :func:`plan` sampled them on (:func:`sample`), by name.
    dtypes : dict
        Numpy dtypes of the tensors that cross between the ONNX Runtime part's stages.
    """

    model: onnx.ModelProto
    tvm_nodes: list[str]
    ort_nodes: list[str]
    cuts: list[ImportFailure]
    tvm_model: onnx.ModelProto
    ort_model: onnx.ModelProto | None
    crossing: list[str]
    inputs: list[tuple[str, list[int], str]]
    outputs: list[str]
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    onnxruntime_ms: float | None = None
    regions: list[RowRegion] = field(default_factory=list)
    dtypes: dict[str, str] = field(default_factory=dict)
    region_inputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def whole(self) -> bool:
        """True if TVM compiles every node (no ONNX Runtime part)."""
        return not self.ort_nodes

    @property
    def tvm_shapes(self) -> dict[str, list[int]]:
        """Static shapes of the TVM part's inputs (its ``shape_dict``)."""
        names = {i.name for i in self.tvm_model.graph.input}
        return {name: shape for name, shape, _ in self.inputs if name in names}

    @property
    def tuned_model(self) -> onnx.ModelProto:
        """What :func:`graphtune.tune` tunes: the TVM part and every row region (at its rows
        per call, its inputs the model's inputs too, but those the TVM part computes) as one
        model; the TVM part alone without regions."""
        if not self.regions:
            return self.tvm_model
        parts = [self.tvm_model] + [region.static_model() for region in self.regions]
        made = {o.name for o in self.tvm_model.graph.output}
        inputs = {v.name: v for p in parts for v in p.graph.input
                  if p is self.tvm_model or v.name not in made}
        graph = helper.make_graph(
            [n for p in parts for n in p.graph.node], self.model.graph.name + ".tuned",
            list(inputs.values()), [v for p in parts for v in p.graph.output],
            list({t.name: t for p in parts for t in p.graph.initializer}.values()))
        tuned = helper.make_model(graph, opset_imports=list(self.tvm_model.opset_import))
        tuned.ir_version = self.tvm_model.ir_version
        tuned.functions.extend(self.tvm_model.functions)
        return tuned

    @property
    def tuned_shapes(self) -> dict[str, list[int]]:
        """Static shapes of :attr:`tuned_model`'s inputs (the TVM part's, then each region's at
        its rows per call), but those the TVM part computes."""
        shapes = dict(self.tvm_shapes)
        made = {o.name for o in self.tvm_model.graph.output}
        for region in self.regions:
            shapes.update({name: shape for name, shape in region.input_shapes().items()
                           if name not in made})
        return shapes

    @functools.cached_property
    def steps(self) -> list[tuple[str, Any]]:
        """How the part after the TVM part runs: ``("onnxruntime", model)`` sessions and
        ``("rows", region index)`` in order (:func:`graphtune.frontend.rows.stages`); one
        session without regions, none for a whole model."""
        return [] if self.ort_model is None else stages(self.ort_model, self.regions, self.dtypes)

    def parts(self) -> list[dict[str, Any]]:
        """Each part: runtime, node names, the tensors it reads and those it writes.

        Examples
        --------
        >>> from graphtune import models
        >>> [(p["runtime"], p["inputs"], p["outputs"])
        ...  for p in plan(models.get("resnet18", image_size=32)).parts()]
        [('tvm', ['input'], ['output'])]
        """
        found: list[dict[str, Any]] = [{"runtime": TVM, "nodes": list(self.tvm_nodes),
                  "inputs": [i.name for i in self.tvm_model.graph.input],
                  "outputs": [o.name for o in self.tvm_model.graph.output]}]
        if self.ort_model is not None:
            found.append({"runtime": ORT, "nodes": list(self.ort_nodes),
                          "inputs": [i.name for i in self.ort_model.graph.input],
                          "outputs": [o.name for o in self.ort_model.graph.output]})
        found += [{"runtime": ROWS, "nodes": list(r.nodes), "inputs": list(r.inputs),
                   "outputs": list(r.outputs), "rows": r.rows} for r in self.regions]
        return found

    def summary(self) -> str:
        """A few lines: nodes per runtime and their op types, where and why the TVM part stops.

        Examples
        --------
        >>> from graphtune import models
        >>> print(plan(models.get("resnet18", image_size=32)).summary())
        tvm: 49 nodes (Conv 20, Relu 17, Add 8, ...)
        onnxruntime: none (TVM imports the whole model)
        """
        ops = {n.name: n.op_type for n in self.model.graph.node}
        lines = [f"{TVM}: {len(self.tvm_nodes)} nodes ({_op_counts(self.tvm_nodes, ops)})"]
        if self.whole:
            return lines[0] + f"\n{ORT}: none (TVM imports the whole model)"
        shown = ", ".join(self.crossing[:4]) + (", ..." if len(self.crossing) > 4 else "")
        lines.append(f"{ORT}: {len(self.ort_nodes)} nodes ({_op_counts(self.ort_nodes, ops)}), "
                     f"reading {len(self.crossing)} tensor(s) from {TVM} ({shown})")
        lines += [f"  cut at {cut.node!r} ({cut.op_type}): {cut.reason}" for cut in self.cuts[:SHOWN_CUTS]]
        if len(self.cuts) > SHOWN_CUTS:
            lines.append(f"  ... and {len(self.cuts) - SHOWN_CUTS} more cuts "
                         f"({_op_counts([c.node for c in self.cuts[SHOWN_CUTS:]], ops)})")
        lines += [f"  {ROWS}: {TVM} runs {len(r.nodes)} of them ({_op_counts(r.nodes, ops)}) on "
                  f"{r.rows} rows per call, reading {', '.join(r.row_inputs[:2])}"
                  + (f" and whole {', '.join(r.whole[:2])}" if r.whole else "") for r in self.regions]
        return "\n".join(lines)

    def time_onnxruntime(self, repeat: int = 10, threads: int | None = None,
                         seed: int = 0) -> np.ndarray:
        """Wall-clock ms of the ONNX Runtime part, ``repeat`` runs, without compiling.

        The rule: the TVM part runs once in ONNX Runtime (:attr:`tvm_model` is an ONNX model)
        on random inputs (:func:`random_inputs` ``(seed)``) to make the tensors it hands over;
        the ONNX Runtime part's sessions (:func:`onnxruntime_session`, one per stage between
        row regions) are then timed on them after one untimed run; the row regions run in
        ONNX Runtime too but are not timed (they are in the tuned model's prediction). What
        :func:`graphtune.tune` records as ``solution.onnxruntime_ms``.

        Raises
        ------
        ValueError
            If TVM runs the whole model (no ONNX Runtime part).

        Examples
        --------
        >>> from graphtune import models
        >>> plan(models.get("resnet18", image_size=32)).time_onnxruntime()
        Traceback (most recent call last):
        ...
        ValueError: TVM runs the whole model: there is no ONNX Runtime part to time
        """
        if self.ort_model is None:
            raise ValueError("TVM runs the whole model: there is no ONNX Runtime part to time")
        names = [name for name, _, _ in self.inputs]
        values = {**dict(zip(names, random_inputs(self.inputs, seed))), **self.constants}
        values.update(_run_session(onnxruntime_session(self.tvm_model, threads), values))
        sessions = [(kind, onnxruntime_session(self.regions[item].model if kind == ROWS else item,
                                               threads)) for kind, item in self.steps]

        def run() -> float:
            spent = 0.0
            for kind, session in sessions:
                start = time.perf_counter()
                values.update(_run_session(session, values))
                spent += (time.perf_counter() - start) * (kind == ONNXRUNTIME)
            return spent * 1e3

        run()
        return np.asarray([run() for _ in range(repeat)])

    def record(self) -> dict[str, Any]:
        """What a config keeps of the partition (``Config.model["partition"]``).

        Examples
        --------
        >>> from graphtune import models
        >>> sorted(plan(models.get("resnet18", image_size=32)).record())
        ['onnxruntime_nodes', 'tvm_nodes']
        """
        found: dict[str, Any] = {"tvm_nodes": list(self.tvm_nodes),
                                 "onnxruntime_nodes": list(self.ort_nodes)}
        if self.regions:
            found[ROW_REGIONS_KEY] = [region.record() for region in self.regions]
        return found

    def check(self, config: Config) -> None:
        """Raise if ``config`` records another partition (a config without one is not checked).

        Raises
        ------
        ConfigMismatchError
            Naming the first node the two partitions place apart.

        Examples
        --------
        >>> from graphtune import models
        >>> from graphtune.config import Config
        >>> part = plan(models.get("resnet18", image_size=32))
        >>> part.check(Config({}))  # no partition recorded: nothing to check
        >>> try:
        ...     part.check(Config({}, model={"partition": {"tvm_nodes": ["conv1"]}}))
        ... except ConfigMismatchError as err:
        ...     print(str(err)[:75])
        model.partition: ONNX node 'relu' runs in tvm for this model but in onnxrun
        """
        recorded = recorded_partition(config)
        if recorded is None:
            return
        theirs = set(recorded["tvm_nodes"])
        ours = set(self.tvm_nodes)
        for name in [n.name for n in self.model.graph.node] + sorted(theirs - ours):
            if (name in ours) != (name in theirs):
                here, there = (TVM, ORT) if name in ours else (ORT, TVM)
                known = name in ours or name in self.ort_nodes
                raise ConfigMismatchError(
                    f"model.{PARTITION_KEY}: ONNX node {name!r} "
                    + (f"runs in {here} for this model but in {there}" if known else
                       "is not a node of this model but runs in tvm")
                    + " in the config's partition; the config was made for another model or "
                    "input size — re-tune it for this one")
        ours_regions = [region.record() for region in self.regions]
        theirs_regions = recorded.get(ROW_REGIONS_KEY, [])
        if theirs_regions == ours_regions:
            return
        ours_nodes = {n for r in ours_regions for n in r["nodes"]}
        apart = sorted(ours_nodes ^ {n for r in theirs_regions for n in r["nodes"]})
        if apart:
            where = ("for this model but not in the config's partition" if apart[0] in ours_nodes
                     else "in the config's partition but not for this model")
            what = f"ONNX node {apart[0]!r} runs in a row region {where}"
        else:
            what = (f"the config's regions run {[r['rows'] for r in theirs_regions]} rows per call, "
                    f"this model's {[r['rows'] for r in ours_regions]}")
        raise ConfigMismatchError(f"model.{PARTITION_KEY}.{ROW_REGIONS_KEY}: {what}; the config was "
                                  "made for another model or input size — re-tune it for this one")

    def drop_regions(self, indices: Sequence[int]) -> None:
        """Leave the row regions ``indices`` to ONNX Runtime (their nodes join its stages).

        Examples
        --------
        >>> from graphtune import models
        >>> part = plan(models.get("resnet18", image_size=32))
        >>> part.drop_regions([]); part.regions
        []
        """
        dropped = set(indices)
        self.regions = [r for k, r in enumerate(self.regions) if k not in dropped]
        self.__dict__.pop("steps", None)  # the cached property, made again on use

    def region_config(self, config: Config, index: int) -> Config:
        """``config`` for compiling row region ``index`` on its own: its nodes only, no partition
        record."""
        return self._config_of(config, set(self.regions[index].nodes))

    def tvm_config(self, config: Config) -> Config:
        """``config`` for compiling :attr:`tvm_model` on its own (its partition record dropped).

        Examples
        --------
        >>> from graphtune import models
        >>> from graphtune.config import Config
        >>> part = plan(models.get("resnet18", image_size=32))
        >>> part.tvm_config(Config({}, model={"name": "m", "partition": {}})).model
        {'name': 'm'}
        """
        return self._config_of(config, set(self.tvm_nodes) if self.regions else None)

    def _config_of(self, config: Config, names: set[str] | None) -> Config:
        """``config`` without its partition record, its nodes those named ``names`` (all: None)."""
        model = {k: v for k, v in (config.model or {}).items() if k != PARTITION_KEY}
        nodes = config.nodes if names is None else {k: v for k, v in config.nodes.items() if k in names}
        return type(config)(nodes, config.target, model, config.solution)


def record_partition(config: Config, partition: Partition | None) -> None:
    """Keep ``partition`` in ``config`` so that compiling refuses a model partitioned otherwise,
    with the time of its ONNX Runtime part; nothing for a whole model.

    The rule: ``model.partition`` gets the nodes of each runtime (:meth:`Partition.record`);
    ``solution.onnxruntime_ms`` the ONNX Runtime part's median of :data:`ORT_REPEAT` runs on this
    machine (:meth:`Partition.time_onnxruntime`, timed here unless
    :attr:`Partition.onnxruntime_ms` holds it), added once to ``solution.predicted_ms`` when the
    solution has one, so that the prediction covers the whole model.

    Examples
    --------
    >>> from graphtune import models
    >>> from graphtune.config import Config
    >>> config = Config({}, model={"name": "m"})
    >>> record_partition(config, None)
    >>> config.model
    {'name': 'm'}
    """
    if partition is None or partition.whole:
        return
    if partition.onnxruntime_ms is None:
        partition.onnxruntime_ms = float(np.median(partition.time_onnxruntime(ORT_REPEAT)))
    config.model = {**(config.model or {}), PARTITION_KEY: partition.record()}
    solution = dict(config.solution or {})
    if ORT_MS_KEY not in solution:  # recorded once: predicted_ms counts it once
        solution[ORT_MS_KEY] = partition.onnxruntime_ms
        if "predicted_ms" in solution:
            solution["predicted_ms"] += partition.onnxruntime_ms
    config.solution = solution


def recorded_partition(config: Config) -> dict[str, Any] | None:
    """The partition ``config`` records (``model.partition``: node names per runtime), None
    when it records none; a record without ``onnxruntime_nodes`` has none.

    Raises
    ------
    ConfigMismatchError
        For a record of another form, naming it.

    Examples
    --------
    >>> from graphtune.config import Config
    >>> recorded_partition(Config({}, model={"partition": {"tvm_nodes": ["conv"]}}))
    {'tvm_nodes': ['conv'], 'onnxruntime_nodes': []}
    >>> recorded_partition(Config({})) is None
    True
    """
    recorded = (config.model or {}).get(PARTITION_KEY)
    if recorded is None:
        return None
    found = ({key: recorded.get(key, default) for key, default in (("tvm_nodes", None),
                                                                   ("onnxruntime_nodes", []))}
             if isinstance(recorded, Mapping) else {})
    if not all(isinstance(found.get(key), list) for key in ("tvm_nodes", "onnxruntime_nodes")):
        raise ConfigMismatchError(f"model.{PARTITION_KEY}: expected {{\"tvm_nodes\": [...], "
                                  f"\"onnxruntime_nodes\": [...]}}, got {str(recorded)[:60]}; "
                                  "re-tune the model to record its partition")
    kept: dict[str, Any] = {key: [str(name) for name in names] for key, names in found.items()}
    regions = recorded.get(ROW_REGIONS_KEY)
    if regions is not None:
        if not (isinstance(regions, list) and all(
                isinstance(r, Mapping) and isinstance(r.get("nodes"), list)
                and isinstance(r.get("rows"), int) and r["rows"] > 0 for r in regions)):
            raise ConfigMismatchError(f"model.{PARTITION_KEY}.{ROW_REGIONS_KEY}: expected "
                                      f"[{{\"nodes\": [...], \"rows\": R}}, ...], got {str(regions)[:60]}; "
                                      "re-tune the model to record its partition")
        kept[ROW_REGIONS_KEY] = [{"nodes": [str(n) for n in r["nodes"]], "rows": int(r["rows"])}
                                 for r in regions]
    return kept


def recorded_summary(config: Config, shown: int = 5) -> str | None:
    """One line on the partition ``config`` records: nodes per runtime, the first ``shown``
    ONNX Runtime nodes and the ONNX Runtime part's time measured in tune; None without a record.

    Raises
    ------
    ConfigMismatchError
        As :func:`recorded_partition`.

    Examples
    --------
    >>> from graphtune.config import Config
    >>> config = Config({}, model={"partition": {"tvm_nodes": ["conv", "relu"],
    ...                                          "onnxruntime_nodes": ["loop", "head"]}},
    ...                 solution={"onnxruntime_ms": 0.05})
    >>> print(recorded_summary(config))
    partition: tvm 2 nodes, onnxruntime 2 nodes (loop, head); onnxruntime part 0.0500 ms measured in tune
    """
    recorded = recorded_partition(config)
    if recorded is None:
        return None
    ort_nodes = recorded["onnxruntime_nodes"]
    names = ", ".join(ort_nodes[:shown]) + (f", ... ({len(ort_nodes) - shown} more)"
                                            if len(ort_nodes) > shown else "")
    line = (f"partition: {TVM} {len(recorded['tvm_nodes'])} nodes, {ORT} {len(ort_nodes)} nodes"
            + (f" ({names})" if names else ""))
    regions = recorded.get(ROW_REGIONS_KEY, [])
    if regions:
        line += (f"; {len(regions)} row region(s) of them in {TVM} ("
                 + ", ".join(f"{len(r['nodes'])} nodes on {r['rows']} rows" for r in regions) + ")")
    solution = config.solution or {}
    if ORT_MS_KEY in solution:
        line += (f"; {ORT} part {solution[ORT_MS_KEY]:.4f} ms measured in tune"
                 + (" (in predicted_ms)" if "predicted_ms" in solution else ""))
    return line


def import_or_cut(model: Any, shape_dict: Mapping[str, Sequence[int]] | None = None,
                  config: Config | None = None) -> tuple[Any, Partition | None]:
    """``(import_model(model), None)`` when TVM imports the whole model with static shapes
    (and ``config`` records no partition), else ``(None, plan(model))``.

    The one import :func:`graphtune.compile` needs for a whole model, a partition otherwise.

    Examples
    --------
    >>> from graphtune import models
    >>> mod, part = import_or_cut(models.get("resnet18", image_size=32))
    >>> mod["main"].params[0].name, part
    ('input', None)
    """
    if isinstance(model, tvm.IRModule):
        return import_model(model), None
    proto = _load_onnx(model)
    recorded = config is not None and (config.model or {}).get(PARTITION_KEY) is not None
    if not recorded and not _data_dependent_read(proto.graph):
        try:
            mod = import_model(proto, shape_dict=shape_dict)
        except ModelError:
            mod = None
        if mod is not None and _static_main(mod):
            return mod, None
    part = plan(proto, shape_dict=shape_dict, rows=_recorded_rows(config))
    if part.whole and not recorded:  # the strict import takes it all: import it as usual
        return import_model(proto, shape_dict=shape_dict), None
    return None, part


def _recorded_rows(config: Config | None) -> dict[str, int] | None:
    """Rows per call of the row regions ``config`` records, by their first node (none when it
    records a partition without regions: tune left them to ONNX Runtime, or tuned before
    graphtune had them); None when it records no partition."""
    recorded = None if config is None else recorded_partition(config)
    if recorded is None:
        return None
    return {r["nodes"][0]: r["rows"] for r in recorded.get(ROW_REGIONS_KEY, []) if r["nodes"]}


def import_tvm_part(model: Any, shape_dict: Mapping[str, Sequence[int]] | None = None
                    ) -> tuple[tvm.IRModule, Partition | None]:
    """The module of the nodes graphtune tunes and compiles: ``(model imported, None)`` when TVM
    imports it whole, else ``(its TVM part and row regions imported, the partition)``
    (:attr:`Partition.tuned_model`).

    Examples
    --------
    >>> from graphtune import models
    >>> mod, part = import_tvm_part(models.get("resnet18", image_size=32))
    >>> mod["main"].params[0].name, part
    ('input', None)
    """
    mod, part = import_or_cut(model, shape_dict)
    if part is None:
        return mod, None
    return import_model(part.tuned_model, shape_dict=part.tuned_shapes), part


def tvm_part(model: Any, shape_dict: Mapping[str, Sequence[int]] | None = None
             ) -> tuple[Any, Mapping[str, Sequence[int]] | None, Partition | None]:
    """What :func:`graphtune.tune` tunes: ``(model, shape_dict, None)`` when TVM imports the
    whole model, else the TVM part and row regions of its partition (:attr:`Partition.tuned_model`),
    their input shapes and the partition.

    Raises
    ------
    ModelError
        As :func:`plan`.

    Examples
    --------
    >>> from graphtune import models
    >>> model = models.get("resnet18", image_size=32)
    >>> tvm_part(model)[0] is model
    True
    """
    _, part = import_or_cut(model, shape_dict)
    if part is None or part.whole:
        return model, shape_dict, None
    return part.tuned_model, part.tuned_shapes, part


def plan(model: onnx.ModelProto | str | os.PathLike, *,
         shape_dict: Mapping[str, Sequence[int]] | None = None,
         rows: Mapping[str, int] | None = None, row_regions: bool = True) -> Partition:
    """The partition of ``model``: the largest part TVM imports with static shapes, and the rest.

    Parameters
    ----------
    model : onnx.ModelProto or path to an ``.onnx`` file
    shape_dict : mapping of str to sequence of int, optional
        Static shapes of inputs with dynamic dimensions.
    rows : mapping of str to int, optional
        The row regions to keep and their rows per call, by their first node (a config's
        record; the other candidates stay in ONNX Runtime); default: every region, its rows
        chosen on a sample run (:meth:`graphtune.frontend.rows.RowRegion.of`).
    row_regions : bool
        Find row regions in the ONNX Runtime part (:mod:`graphtune.frontend.rows`; one run of
        the model in ONNX Runtime when it has candidates); False leaves them to ONNX Runtime.

    Returns
    -------
    Partition

    Raises
    ------
    ModelError
        Unreadable model, a dynamic input shape not fixed, or no node TVM can import
        (names the first).

    Examples
    --------
    >>> from graphtune import models
    >>> plan(models.get("resnet18", image_size=32)).tvm_nodes[:3]
    ['conv1', 'relu', 'maxpool']
    """
    proto = _load_onnx(model)
    shapes = _static_input_shapes(proto, shape_dict)
    inputs = _inputs(proto, shapes)
    outputs = [o.name for o in proto.graph.output]
    if not _data_dependent_read(proto.graph) and relax_import(prepare_onnx(proto, shapes), shapes,
                                                              strict=True)[1] is None:
        return Partition(proto, [n.name for n in proto.graph.node], [], [], proto, None, [],
                         inputs, outputs)
    try:
        working = _named(fold_constants(proto, shapes))
    except ModelError:
        working = _named(proto)
    graph = working.graph
    nodes = list(graph.node)
    readers = _readers(nodes)
    removed: set[int] = set()
    cuts: list[ImportFailure] = []

    def cut(failure: ImportFailure) -> None:
        cuts.append(failure)
        todo = [failure.index]
        while todo:
            i = todo.pop()
            if i not in removed:
                removed.add(i)
                todo += [j for o in nodes[i].output for j in readers.get(o, ())]

    for i in _data_dependent_read(graph):
        cut(ImportFailure(i, nodes[i].name, nodes[i].op_type,
                          "its outputs' shapes depend on the data (Relax types them by an upper "
                          "bound), and other nodes read them"))
    while True:
        keep = [i for i in range(len(nodes)) if i not in removed]
        if not keep:
            raise ModelError(f"no node of the model imports into TVM Relax ({cuts[0]}): run it "
                             "with onnxruntime alone")
        sub, crossing = _tvm_part(working, keep, removed, shapes, outputs)
        mod, failure = relax_import(sub, shapes, strict=True)
        if mod is not None:
            break
        assert failure is not None  # no module: a failure
        index = keep[failure.index]
        cut(ImportFailure(index, nodes[index].name, failure.op_type, failure.reason))
    types = _output_types(mod["main"].ret_ty)
    tvm_model = _with_output_types(sub, dict(zip([o.name for o in sub.graph.output], types)))
    initial = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    constants = {name: initial[name] for name in outputs if name in initial}
    ort_model = _ort_part(working, sorted(removed), crossing, dict(zip(
        [o.name for o in sub.graph.output], types)), shapes, outputs)
    part = Partition(working, [nodes[i].name for i in keep], [nodes[i].name for i in sorted(removed)],
                     cuts, tvm_model, ort_model, crossing, inputs, outputs, constants)
    if ort_model is not None and row_regions:
        sampled: dict[str, np.ndarray] = {}

        def sample_once(names: list[str]) -> dict[str, np.ndarray]:
            sampled.update(sample(part, names))
            return sampled

        part.regions = find_regions(ort_model, sample_once, rows)
        part.region_inputs = {n: sampled[n] for r in part.regions for n in r.inputs}
        part.dtypes = _dtypes(ort_model) if part.regions else {}
        try:
            _ = part.steps
        except KeyError:  # a tensor crossing between stages ONNX type inference does not type
            part.drop_regions(range(len(part.regions)))
    return part


def sample(part: Partition, names: list[str], seed: int = 0) -> dict[str, np.ndarray]:
    """The tensors ``names`` of the ONNX Runtime part on one run of the whole model in ONNX
    Runtime on random inputs (:func:`random_inputs` ``(seed)``)."""
    assert part.ort_model is not None
    values = {**dict(zip([n for n, _, _ in part.inputs], random_inputs(part.inputs, seed))),
              **part.constants}
    values.update(_run_session(onnxruntime_session(part.tvm_model), values))
    probe = onnx.ModelProto()
    probe.CopyFrom(part.ort_model)
    have = {o.name for o in probe.graph.output}
    probe.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names if n not in have)
    values.update(_run_session(onnxruntime_session(probe), values))
    return {name: values[name] for name in names}


def _dtypes(model: onnx.ModelProto) -> dict[str, str]:
    """Numpy dtype of every tensor of ``model`` ONNX type inference types."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # onnx's InferenceError and others: nothing typed, no stages
        return {}
    values = list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)
    return {v.name: str(np.dtype(helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)))
            for v in values if v.type.tensor_type.elem_type}


# ------------------------------------------------------------------ running the ONNX Runtime part
def random_inputs(inputs: Sequence[tuple[str, list[int], str]], seed: int = 0) -> list[np.ndarray]:
    """Standard-normal arrays for the float inputs, zeros for the others (name, shape, dtype each).

    Examples
    --------
    >>> [(a.dtype.name, a.shape) for a in random_inputs([("x", [1, 2], "float32"), ("k", [1], "int64")])]
    [('float32', (1, 2)), ('int64', (1,))]
    """
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) if np.issubdtype(np.dtype(dtype), np.floating)
            else np.zeros(shape, dtype) for _, shape, dtype in inputs]


def _threads(threads: int | None) -> int:
    """``threads``, else ``TVM_NUM_THREADS`` (the cores TVM uses), else the CPU count."""
    return threads or int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)


def onnxruntime_session(model: onnx.ModelProto, threads: int | None = None) -> Any:
    """An ONNX Runtime CPU session of ``model`` with ``threads`` intra-op threads (default
    ``TVM_NUM_THREADS``), warnings off: how a partitioned model runs its ONNX Runtime part.

    Examples
    --------
    >>> from graphtune import models
    >>> session = onnxruntime_session(models.get("resnet18", image_size=32), threads=1)
    >>> [i.name for i in session.get_inputs()]
    ['input']
    """
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = _threads(threads)
    options.log_severity_level = 3
    # its threads would spin after each run while the TVM part's thread pool works (and the
    # other way round): ~40 ms of two pools on the same cores (../shared/benchmark-notes.md)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


def _run_session(session: Any, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``session`` on the ``values`` it reads; its outputs by name."""
    names = [o.name for o in session.get_outputs()]
    got = session.run(names, {i.name: values[i.name] for i in session.get_inputs()})
    return dict(zip(names, got))


def _wall_ms(call: Callable[[], object], repeat: int, number: int = 1, warmup: int = 1) -> np.ndarray:
    """Wall-clock ms of ``call``, ``repeat`` measurements of ``number`` calls each (their mean),
    after ``warmup`` untimed calls."""
    if repeat < 1 or number < 1:
        raise ValueError(f"repeat and number must be >= 1, got {repeat} and {number}")
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            call()
        times.append((time.perf_counter() - start) / number)
    return np.asarray(times) * 1e3


# ------------------------------------------------------------------ helpers
def _static_main(mod: Any) -> bool:
    """True if every binding of ``mod["main"]`` has a static type."""
    return all(_static_type(b.var.ty) for b in bindings(mod["main"]))


def _op_counts(names: list[str], ops: dict[str, str], shown: int = 3) -> str:
    counts: dict[str, int] = {}
    for name in names:
        counts[ops[name]] = counts.get(ops[name], 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{op} {n}" for op, n in ranked[:shown]) + (", ..." if len(ranked) > shown
                                                                  else "")


def _inputs(proto: onnx.ModelProto, shapes: dict[str, list[int]]) -> list[tuple[str, list[int], str]]:
    """Name, static shape and numpy dtype of every true graph input."""
    found = []
    for value in proto.graph.input:
        if value.name in shapes:
            dtype = helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
            found.append((value.name, list(shapes[value.name]), str(np.dtype(dtype))))
    return found


def _named(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``proto`` with every node named uniquely (``{op_type}_{k}`` for unnamed or taken names)."""
    names = [n.name for n in proto.graph.node]
    if "" not in names and len(set(names)) == len(names):
        return proto
    named = onnx.ModelProto()
    named.CopyFrom(proto)
    taken = set(names)
    seen: set[str] = set()
    for index, node in enumerate(named.graph.node):
        if not node.name or node.name in seen:
            k = index
            while f"{node.op_type}_{k}" in taken:
                k += 1
            node.name = f"{node.op_type}_{k}"
            taken.add(node.name)
        seen.add(node.name)
    return named


def _readers(nodes: list[onnx.NodeProto]) -> dict[str, list[int]]:
    """Tensor name -> indices of the nodes reading it (in their subgraphs too)."""
    readers: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for name in names_read(node):
            readers.setdefault(name, []).append(i)
    return readers


def _data_dependent_read(graph: onnx.GraphProto) -> list[int]:
    """Indices of the :data:`DATA_DEPENDENT` nodes whose outputs other nodes read."""
    read = set().union(*(names_read(n) for n in graph.node)) if graph.node else set()
    return [i for i, n in enumerate(graph.node)
            if n.op_type in DATA_DEPENDENT and read & set(n.output)]


def _value_info(proto: onnx.ModelProto, name: str, shapes: dict[str, list[int]]) -> onnx.ValueInfoProto:
    """The graph input ``name`` with its static shape."""
    value = next(v for v in proto.graph.input if v.name == name)
    return helper.make_tensor_value_info(name, value.type.tensor_type.elem_type, shapes[name])


def _tvm_part(proto: onnx.ModelProto, keep: list[int], removed: set[int],
              shapes: dict[str, list[int]], outputs: list[str]) -> tuple[onnx.ModelProto, list[str]]:
    """The model of the nodes ``keep`` (outputs: the model's it computes, then the tensors
    the ``removed`` nodes read from it), and those crossing tensors."""
    nodes = proto.graph.node
    made = [o for i in keep for o in nodes[i].output if o]
    made_set = set(made)
    wanted = set().union(*(names_read(nodes[i]) for i in removed)) if removed else set()
    crossing = [o for o in made if o in wanted and o not in outputs]
    reads = set().union(*(names_read(nodes[i]) for i in keep))
    ins = [_value_info(proto, name, shapes) for name in shapes if name in reads]
    outs = [helper.make_empty_tensor_value_info(o) for o in outputs if o in made_set] + \
        [helper.make_empty_tensor_value_info(o) for o in crossing]
    return submodel(proto, keep, ins, outs, proto.graph.name + ".tvm"), crossing


def _output_types(ty) -> list[tuple[list[int], str]]:
    """Static shape and dtype of each output of a strictly imported ``main``."""
    fields = ty.fields if isinstance(ty, relax.TupleType) else [ty]
    return [([int(d) for d in f.shape.values], str(f.dtype)) for f in fields]


def _elem_type(dtype: str) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _with_output_types(sub: onnx.ModelProto, types: dict[str, tuple[list[int], str]]
                       ) -> onnx.ModelProto:
    """``sub`` with its outputs typed as TVM computes them."""
    typed = onnx.ModelProto()
    typed.CopyFrom(sub)
    outs = [helper.make_tensor_value_info(o.name, _elem_type(types[o.name][1]), types[o.name][0])
            for o in sub.graph.output]
    del typed.graph.output[:]
    typed.graph.output.extend(outs)
    return typed


def _ort_part(proto: onnx.ModelProto, removed: list[int], crossing: list[str],
              types: dict[str, tuple[list[int], str]], shapes: dict[str, list[int]],
              outputs: list[str]) -> onnx.ModelProto | None:
    """The model of the ``removed`` nodes: reads the model inputs they need and the crossing
    tensors, writes the model outputs they compute; its appending loops, row scatters and
    coordinate-trick suppressions rewritten (:func:`~graphtune.frontend.appends.loop_appends`,
    :func:`~graphtune.frontend.scatter.scatter_rows`, :func:`~graphtune.frontend.nms.batched_nms`)."""
    if not removed:
        return None
    nodes = proto.graph.node
    reads = set().union(*(names_read(nodes[i]) for i in removed))
    made = {o for i in removed for o in nodes[i].output}
    ins = [_value_info(proto, name, shapes) for name in shapes if name in reads]
    ins += [helper.make_tensor_value_info(name, _elem_type(types[name][1]), types[name][0])
            for name in crossing]
    by_name = {o.name: o for o in proto.graph.output}
    outs = [by_name[name] for name in outputs if name in made]
    part = submodel(proto, removed, ins, outs, proto.graph.name + ".onnxruntime")
    return batched_nms(scatter_rows(loop_appends(part)))
