"""Where the time goes: per-op in-model times of a compiled model, its prediction, and ONNX Runtime's.

:func:`profile` compiles a model with a config, runs it ``repeat`` times in
TVM's Relax VM with an instrument (``VirtualMachine.set_instrument``) timing
every PrimFunc call, and takes the median per call. Each call is mapped back
to ONNX nodes:

- the compiler records, per call of the fused ``main``, the Relax bindings it
  computes (:mod:`graphtune.compiler.sites`); bindings the importer named after
  ONNX nodes (convs, matmuls, joins) name their node directly (after
  ``[^0-9A-Za-z_] -> _``);
- unnamed bindings (``lv…``: bias adds, activations, pools, reductions...) are
  matched best-effort along the ONNX graph (after folding its constant and
  shape subgraphs, as the compiler does): a node no binding names goes to its
  producer's call when that call has unnamed bindings and its PrimFunc name
  holds the node's TVM op (a fused epilogue: the ``Sigmoid`` of SiLU in
  ``fused_gt_..._tir_sigmoid_multiply``), else to the first later call made
  only of unnamed bindings whose name holds it (``GlobalAveragePool`` ->
  ``mean``), else to its producer's call, else to a consumer's; nodes left
  over are listed in ``ProfileResult.unplaced``.

Predicted costs come from the config: every node's ``cost_ms`` (whatever op
it is, so new per-op costs show up), and the solution's ``transform_ms`` for
the kind ``transform``. ONNX Runtime runs the same model configured like
:mod:`graphtune.peers` (fp32, same threads, spinning workers) with its profiler on;
its per-node ``dur`` medians are mapped to ONNX nodes by name (``_nchwc``,
``/…Fusion/`` and ``_kernel_time`` suffixes dropped; ``Reorder*`` nodes are
transforms).

Both sides are put on the footing of their unprofiled latency, measured next to
the profiled runs: graphtune's uninstrumented VM latency is split into
the calls' medians, their *spread* (the median run's calls minus the per-call
medians: time a loaded host takes from a few calls of each run) and the VM's own
*overhead* (dispatch, allocation, the Python call), the rest. ONNX Runtime's
profiler costs time inside its nodes too (its node times can add up to more than
an unprofiled run takes), so its node times are scaled down to its unprofiled
latency when they exceed it (:func:`ort_scale_factor`), and what is left of that
latency is its overhead.

A model TVM imports only in part (``docs/partition.md``) is profiled as it runs: the calls of
its TVM part as above, then its ONNX Runtime part as one row of kind :data:`ORT_PART`, the
median of ``repeat`` runs of its sessions on the tensors the TVM part hands over (with the row
regions TVM runs between them: :mod:`graphtune.frontend.rows`), predicted by the config's
``solution.onnxruntime_ms`` (and its row region nodes' costs) when tune recorded it; the whole model's latency
(:attr:`ProfileResult.total_ms`) is the VM's plus that part's. ONNX Runtime's side profiles
the whole model, its times of the ONNX Runtime part's nodes going to that row.

Examples
--------
>>> import graphtune
>>> result = graphtune.profile("resnet18", image_size=32, repeat=3)
>>> sorted(result.totals())[:2]
['conv2d', 'dense']
>>> result.rows[1].nodes
['conv1', 'relu']
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict, cast

import numpy as np

from .checks import check_positive
from .errors import ArgumentError
from .hoststate import SHARED_LIMIT, HandoffGauge
from .latency import SETTLE_CALLS, SETTLE_MS, settled_call_ms
from .measure import contention
from .ops import FAMILIES, KERNEL_OPS, LAYOUT_OPS, LAYOUT_TRANSFORM, Op, op_class

if TYPE_CHECKING:  # for annotations: imported on use (the compiler loads TVM)
    from .compiler.partitioned import PartitionedModel
    from .config import Config

__all__ = ["KINDS", "ORT_PART", "ProfileRow", "ProfileResult", "profile", "ort_node_times",
           "ort_profile", "ort_scale_factor", "CallTimes", "call_times"]

KINDS = FAMILIES
"""Op kinds of the totals, in display order (:data:`graphtune.ops.FAMILIES`; a PrimFunc's
is the family of its ``graphtune.op`` attribute, :func:`graphtune.ops.op_class`)."""

ORT_PART = "onnxruntime part"
"""Kind of the row of a partitioned model's ONNX Runtime part (after :data:`KINDS`)."""

_ONNX_KINDS = {
    **dict.fromkeys(["ConvTranspose"], "conv_transpose"),
    **dict.fromkeys(["Gemm", "MatMul", "FusedGemm", "FusedMatMul"], "dense"),
    **dict.fromkeys(["Add", "Sub", "Mul", "Div", "Sigmoid", "Relu", "Clip", "HardSigmoid",
                     "HardSwish", "LeakyRelu", "Tanh", "Erf", "Gelu", "PRelu", "Neg", "Exp",
                     "BatchNormalization", "Identity", "QuickGelu", "Sqrt", "Pow"], "elementwise"),
    **dict.fromkeys(["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "RoiAlign"],
                    "pool"),
    **dict.fromkeys(["Concat"], "concat"),
    **dict.fromkeys(["ReduceMean", "ReduceSum", "ReduceMax", "Softmax"], "reduction"),
    **dict.fromkeys(["Resize", "Upsample"], "resize"),
    **dict.fromkeys(["Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze"], "reshape"),
    **dict.fromkeys(["ReorderInput", "ReorderOutput"], "transform"),
}
"""ONNX (and ONNX Runtime) op type -> kind; ``Conv`` is told apart by its weight."""

_TVM_OPS = {"Sigmoid": ("sigmoid",), "Relu": ("relu",), "Clip": ("clip", "maximum", "minimum"),
            "HardSigmoid": ("clip", "maximum", "minimum", "add", "multiply"),
            "GlobalAveragePool": ("mean", "adaptive_avg_pool2d"),
            "GlobalMaxPool": ("max", "adaptive_max_pool2d"), "MaxPool": ("max_pool2d",),
            "AveragePool": ("avg_pool2d",), "RoiAlign": ("roi_align",), "Concat": ("concatenate",),
            "Resize": ("resize2d",),
            "Reshape": ("reshape",), "Flatten": ("reshape",), "Transpose": ("transpose",),
            "Add": ("add",), "Mul": ("multiply",), "Sub": ("subtract",), "Div": ("divide",),
            "BatchNormalization": ("multiply", "add"), "ReduceMean": ("mean",),
            "Softmax": ("softmax",), "Pad": ("pad",), "Tanh": ("tanh",), "Erf": ("erf",)}
"""ONNX op type -> TVM op names its call's PrimFunc name may hold."""

_DEFAULT = re.compile(r"^(lv|gv|tmp)\d*(_NCHW\w*)?$")


def _safe(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", name)


class KindTotals(TypedDict):
    """One kind's totals in :meth:`ProfileResult.totals`."""

    gt_ms: float
    predicted_ms: float | None
    ort_ms: float | None
    calls: int


@dataclass
class ProfileRow:
    """One PrimFunc call of the compiled model, a partitioned model's ONNX Runtime part, or an
    ONNX Runtime node graphtune has no call for.

    Attributes
    ----------
    index : int
        Call order in ``main`` (-1 for the other rows).
    function : str
        The PrimFunc called ("" for the other rows; ORT-only ones have ``ort:<its node name>``
        in ``nodes``).
    kind : str
        One of :data:`KINDS`, or :data:`ORT_PART` for the ONNX Runtime part (``nodes``: its
        nodes; ``gt_ms``: its median wall time).
    nodes : list of str
        ONNX nodes the call computes (best effort, see the module docstring).
    schedule : str
        The schedule the function got (``kernel``, ``transform``, ``injective``...).
    gt_ms, predicted_ms, ort_ms : float or None
        Median in-model time, the config's predicted cost of ``nodes``, and
        ONNX Runtime's median time for the same nodes.
    """

    index: int
    function: str
    kind: str
    nodes: list[str]
    schedule: str
    gt_ms: float | None
    predicted_ms: float | None = None
    ort_ms: float | None = None

    @property
    def diff_ms(self) -> float | None:
        """``gt_ms - predicted_ms`` (None without a prediction)."""
        if self.gt_ms is None or self.predicted_ms is None:
            return None
        return self.gt_ms - self.predicted_ms


@dataclass
class ProfileResult:
    """What :func:`profile` measured.

    Attributes
    ----------
    model : str
        Model name.
    rows : list of ProfileRow
        One per PrimFunc call, in call order, then the ONNX Runtime part of a partitioned model,
        then ORT nodes no row covers.
    vm_ms : float
        Median latency of the whole model in the VM without instrumentation,
        each run interleaved with an instrumented one (graphtune's end to end).
    instrumented_ms : list of float
        Wall time of each instrumented run.
    calls_ms : list of float
        Sum of the timed calls of each instrumented run (same order).
    predicted : dict
        ``{kind: ms}`` of the config's costs.
    ort_total_ms : float or None
        Sum of ONNX Runtime's per-node medians after scaling by ``ort_scale``
        (what the rows' ``ort_ms`` add up to).

    The totals of a run add up to its latency on both sides: graphtune's
    ``total_ms = gt_total_ms + spread_ms + overhead_ms`` (``total_ms``: ``vm_ms``, plus the
    ONNX Runtime part of a partitioned model), ONNX Runtime's
    ``ort_e2e_ms = ort_total_ms + ort_spread_ms + ort_overhead_ms``.
    unplaced : list of str
        ONNX nodes no call could be matched to.
    repeat, threads : int
        Runs per side and threads of both runtimes.
    loadavg : list of float
        The host's 1-minute load average before and after measuring (a loaded
        host inflates TVM's statically partitioned parallel loops most).
    handoff_ratio : list of float
        The host-state gauge before and after graphtune's runs, with 2+ threads
        (:class:`graphtune.hoststate.HandoffGauge`: above ``SHARED_LIMIT`` the
        threads did not share a cache, and memory-bound calls run 2-5x slower).
    builtin_calls : int
        Calls per run the VM makes besides PrimFuncs (allocation, views, checks).
    contention : float or None
        The share of the CPUs other work took while graphtune's runs were timed
        (:mod:`graphtune.measure.contention`; None where unknown): above
        :data:`~graphtune.measure.contention.LIMIT` the header says so, as its times are
        slower than the model's alone.
    ort_e2e_ms : float or None
        ONNX Runtime's median latency without its profiler, run for run beside
        the profiled runs (:func:`ort_profile`).
    ort_profiled_ms : float or None
        Its median latency with the profiler on.
    ort_calls_ms : list of float
        Sum of the profiler's node times of each profiled run, unscaled.
    ort_scale : float or None
        The factor applied to ORT's node times (:func:`ort_scale_factor` of the
        median of ``ort_calls_ms`` and ``ort_e2e_ms``: at most 1).
    """

    model: str
    rows: list[ProfileRow]
    vm_ms: float
    instrumented_ms: list[float]
    calls_ms: list[float]
    predicted: dict[str, float] = field(default_factory=dict)
    ort_total_ms: float | None = None
    unplaced: list[str] = field(default_factory=list)
    repeat: int = 0
    threads: int = 0
    loadavg: list[float] = field(default_factory=list)
    handoff_ratio: list[float] = field(default_factory=list)
    builtin_calls: int = 0
    contention: float | None = None
    ort_e2e_ms: float | None = None
    ort_profiled_ms: float | None = None
    ort_calls_ms: list[float] = field(default_factory=list)
    ort_scale: float | None = None

    @property
    def gt_total_ms(self) -> float:
        """Sum of the per-call medians (and of the ONNX Runtime part's median)."""
        return float(sum(r.gt_ms for r in self.rows if r.gt_ms is not None))

    @property
    def onnxruntime_part_ms(self) -> float | None:
        """Median time of a partitioned model's ONNX Runtime part (its :data:`ORT_PART` row);
        None for a model TVM runs whole."""
        times = [r.gt_ms for r in self.rows if r.kind == ORT_PART and r.gt_ms is not None]
        return float(sum(times)) if times else None

    @property
    def total_ms(self) -> float:
        """graphtune's latency of the whole model: ``vm_ms`` plus :attr:`onnxruntime_part_ms`."""
        return self.vm_ms + (self.onnxruntime_part_ms or 0.0)

    @property
    def spread_ms(self) -> float:
        """Median run's calls minus the per-call medians: ``median(calls_ms)`` minus the VM
        calls' share of ``gt_total_ms``.

        About 0 on a quiet host; on a loaded one each run loses time in a few
        calls (a worker descheduled mid parallel loop), which per-call medians
        leave out and a run's latency does not.
        """
        if not self.calls_ms:
            return 0.0
        return float(np.median(self.calls_ms)) - (self.gt_total_ms - (self.onnxruntime_part_ms or 0.0))

    @property
    def overhead_ms(self) -> float:
        """graphtune's own overhead: ``vm_ms - median(calls_ms)``.

        What a run costs besides its PrimFunc calls: the VM's dispatch of every
        instruction, its builtin calls (:attr:`builtin_calls`: allocation, views,
        checks) and the Python call into ``main``. The launch of a call's parallel
        region is inside that call's time. A difference of two medians: it can be
        slightly negative.
        """
        return self.vm_ms - (float(np.median(self.calls_ms)) if self.calls_ms else 0.0)

    @property
    def ort_spread_ms(self) -> float | None:
        """ONNX Runtime's :attr:`spread_ms`, scaled: ``median(ort_calls_ms) * ort_scale - ort_total_ms``."""
        if not self.ort_calls_ms or self.ort_scale is None or self.ort_total_ms is None:
            return None
        return float(np.median(self.ort_calls_ms)) * self.ort_scale - self.ort_total_ms

    @property
    def ort_overhead_ms(self) -> float | None:
        """ONNX Runtime's: ``ort_e2e_ms - median(ort_calls_ms) * ort_scale``.

        0 when its node times were scaled down to its latency
        (:func:`ort_scale_factor`), else its executor's work between nodes.
        """
        if not self.ort_calls_ms or self.ort_scale is None or self.ort_e2e_ms is None:
            return None
        return self.ort_e2e_ms - float(np.median(self.ort_calls_ms)) * self.ort_scale

    def totals(self) -> dict[str, KindTotals]:
        """Per kind: ``gt_ms``, ``predicted_ms``, ``ort_ms``, ``calls`` (in :data:`KINDS` order).

        Examples
        --------
        >>> import graphtune
        >>> result = graphtune.profile("resnet18", image_size=32, repeat=3)
        >>> totals = result.totals()["conv2d"]
        >>> totals["calls"], totals["gt_ms"] > 0, totals["ort_ms"] > 0
        (20, True, True)
        """
        out: dict[str, KindTotals] = {}
        for row in self.rows:
            entry = out.setdefault(row.kind, {"gt_ms": 0.0, "predicted_ms": None, "ort_ms": None,
                                              "calls": 0})
            if row.gt_ms is not None:
                entry["gt_ms"] += row.gt_ms
                entry["calls"] += 1
            if row.ort_ms is not None:
                entry["ort_ms"] = (entry["ort_ms"] or 0.0) + row.ort_ms
        for kind, ms in self.predicted.items():
            out.setdefault(kind, {"gt_ms": 0.0, "predicted_ms": None, "ort_ms": None,
                                  "calls": 0})["predicted_ms"] = ms
        order = {kind: i for i, kind in enumerate(KINDS)}
        return {k: out[k] for k in sorted(out, key=lambda k: order.get(k, len(order)))}

    def table(self, top: int | None = 15) -> str:
        """Totals by kind (gt, predicted, ORT, gt/ORT), then the ``top`` slowest calls.

        Examples
        --------
        >>> import graphtune
        >>> result = graphtune.profile("resnet18", image_size=32, repeat=3, ort=False)
        >>> print(result.table(top=3))
        model resnet18: 24 calls, ... threads, medians of 3 runs ...
        | kind | calls | gt ms | predicted ms | ORT ms | gt / ORT |
        ...
        slowest 3 calls:
        ...
        """
        def cell(v: float | None, spec: str = ".3f") -> str:
            return "-" if v is None else format(round(v, 3) + 0.0, spec)  # no "-0.000"

        lines = [f"model {self.model}: {len([r for r in self.rows if r.index >= 0])} calls, "
                 f"{self.threads} threads, medians of {self.repeat} runs"
                 + (f" (load average {max(self.loadavg):.1f})" if self.loadavg else "")
                 + (f", host handoff ratio {'/'.join(f'{r:.1f}' for r in self.handoff_ratio)}"
                    f" ({'split' if max(self.handoff_ratio) > SHARED_LIMIT else 'shared'} cache)"
                    if self.handoff_ratio else "")
                 + (f", other work took {self.contention:.0%} of the CPUs (times slower than alone)"
                    if contention.disturbed(self.contention) else "")
                 + f"; VM {self.vm_ms:.3f} ms, sum of calls {self.gt_total_ms:.3f} ms"
                 + (f" (onnxruntime part {self.onnxruntime_part_ms:.3f} ms)"
                    if self.onnxruntime_part_ms is not None else "")
                 + (f"; ORT {self.ort_e2e_ms:.3f} ms ({self.ort_profiled_ms:.3f} profiled), "
                    f"node times of its median profiled run {np.median(self.ort_calls_ms):.3f} ms, "
                    f"scaled x {self.ort_scale:.3f}"
                    if self.ort_e2e_ms is not None and self.ort_profiled_ms is not None
                    and self.ort_calls_ms and self.ort_scale is not None else ""),
                 "", "| kind | calls | gt ms | predicted ms | ORT ms | gt / ORT |",
                 "|---|---|---|---|---|---|"]
        for kind, t in self.totals().items():
            if not (t["calls"] or t["predicted_ms"] or t["ort_ms"]):
                continue  # e.g. joins costed 0 that Relax fused away
            ratio = t["gt_ms"] / t["ort_ms"] if t["ort_ms"] and t["gt_ms"] else None
            lines.append(f"| {kind} | {t['calls']} | {cell(t['gt_ms'])} | {cell(t['predicted_ms'])} | "
                         f"{cell(t['ort_ms'])} | {cell(ratio, '.2f')} |")
        predicted = sum(self.predicted.values()) if self.predicted else None
        lines.append(f"| sum of calls | {sum(t['calls'] for t in self.totals().values())} | "
                     f"{self.gt_total_ms:.3f} | {cell(predicted)} | {cell(self.ort_total_ms)} | "
                     f"{cell(self.gt_total_ms / self.ort_total_ms if self.ort_total_ms else None, '.2f')} |")
        lines.append(f"| spread | | {cell(self.spread_ms)} | - | {cell(self.ort_spread_ms)} | - |")
        lines.append(f"| overhead | {self.builtin_calls} VM builtins | {cell(self.overhead_ms)} | - | "
                     f"{cell(self.ort_overhead_ms)} | - |")
        lines.append(f"| total | | {self.total_ms:.3f} | {cell(predicted)} | {cell(self.ort_e2e_ms)} | "
                     f"{cell(self.total_ms / self.ort_e2e_ms if self.ort_e2e_ms else None, '.2f')} |")
        if top:
            calls = sorted((r for r in self.rows if r.gt_ms is not None), key=lambda r: -cast(float, r.gt_ms))
            lines += ["", f"slowest {min(top, len(calls))} calls:",
                      "| # | kind | nodes | gt ms | predicted ms | diff ms | ORT ms |",
                      "|---|---|---|---|---|---|---|"]
            for r in calls[:top]:
                shown = ", ".join(r.nodes[:3]) + (", ..." if len(r.nodes) > 3 else "") or r.function
                lines.append(f"| {r.index} | {r.kind} | {shown} | {cell(r.gt_ms)} | "
                             f"{cell(r.predicted_ms)} | {cell(r.diff_ms, '+.3f')} | {cell(r.ort_ms)} |")
        slower = [(k, t) for k, t in self.totals().items() if t["ort_ms"] and t["gt_ms"] > t["ort_ms"]]
        if slower:
            lines.append("")
            lines.append("ORT wins on: " + ", ".join(
                f"{k} ({t['gt_ms']:.3f} vs {t['ort_ms']:.3f} ms)" for k, t in slower))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-ready dict (rows, totals, runs); :meth:`from_dict` reads it back.

        Examples
        --------
        >>> import graphtune
        >>> result = graphtune.profile("resnet18", image_size=32, repeat=2, ort=False)
        >>> ProfileResult.from_dict(result.to_dict()) == result
        True
        """
        data = asdict(self)
        data["format"] = "graphtune.profile"
        data["totals"] = self.totals()
        data["gt_total_ms"] = self.gt_total_ms
        for name in ("spread_ms", "overhead_ms", "ort_spread_ms", "ort_overhead_ms", "total_ms",
                     "onnxruntime_part_ms"):
            data[name] = getattr(self, name)
        for row, out in zip(self.rows, data["rows"]):
            out["diff_ms"] = row.diff_ms
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ProfileResult":
        """Inverse of :meth:`to_dict`."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["rows"] = [ProfileRow(**{k: v for k, v in row.items()
                                        if k in ProfileRow.__dataclass_fields__})
                          for row in data["rows"]]
        return cls(**fields)


# ------------------------------------------------------------------ ONNX side
def _onnx_kinds(model: Any) -> dict[str, str]:
    """Kind of every ONNX node (``Conv`` by its weight: depthwise, grouped or plain)."""
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    kinds = {}
    for node in model.graph.node:
        if node.op_type == "Conv":
            group = next((a.i for a in node.attribute if a.name == "group"), 1)
            shape = weights.get(node.input[1]) if len(node.input) > 1 else None
            kinds[node.name] = ("conv2d" if group == 1 else
                                "depthwise" if shape and shape[1] == 1 else "group_conv")
        else:
            kinds[node.name] = _ONNX_KINDS.get(node.op_type, "other")
    return kinds


def _place(model: Any, sites: list[tuple[str, list[str]]]) -> tuple[list[list[str]], list[str]]:
    """ONNX nodes of each call site, and the nodes matched to none (see the module docstring)."""
    graph = model.graph
    by_safe: dict[str, str] = {}
    for node in graph.node:
        by_safe.setdefault(_safe(node.name), node.name)
    placed: list[list[str]] = [[] for _ in sites]
    row_of: dict[str, int] = {}
    open_rows = set()
    for i, (_, names) in enumerate(sites):
        for name in names:
            onnx_name = by_safe.get(_safe(name))
            if onnx_name is not None and onnx_name not in row_of:
                placed[i].append(onnx_name)
                row_of[onnx_name] = i
            elif _DEFAULT.match(name):
                open_rows.add(i)
    producer = {out: node.name for node in graph.node for out in node.output}
    consumers: dict[str, list[str]] = {}
    for node in graph.node:
        for inp in node.input:
            if inp in producer:
                consumers.setdefault(producer[inp], []).append(node.name)
    unplaced = []
    for node in graph.node:
        if node.name in row_of or node.op_type in ("Constant", "Identity"):
            continue
        before = [row_of[producer[i]] for i in node.input if producer.get(i) in row_of]
        start = max(before, default=-1)
        tokens = _TVM_OPS.get(node.op_type, ())

        def fits(i: int, tokens: tuple = tokens) -> bool:
            return any(t in sites[i][0] for t in tokens)

        choice = start if start in open_rows and fits(start) else None
        if choice is None:
            choice = next((i for i in range(start + 1, len(sites)) if i in open_rows
                           and all(_DEFAULT.match(n) for n in sites[i][1]) and fits(i)), None)
        if choice is None and start in open_rows:
            choice = start
        if choice is None:
            choice = next((row_of[c] for c in consumers.get(node.name, [])
                           if row_of.get(c) in open_rows), None)
        if choice is None:
            unplaced.append(node.name)
            continue
        placed[choice].append(node.name)
        row_of[node.name] = choice
    return placed, unplaced


# ------------------------------------------------------------------ ORT side
def _ort_node(name: str, known: Mapping[str, str]) -> str | None:
    """ONNX node an ONNX Runtime profiler node name stands for (None: ORT's own node).

    ORT appends to the name of the node it keeps (``relu_nchwc``,
    ``features.0.2/QuickGeluFusion/``, ``norm1.mul_mul_nchwc``) and names the
    nodes its layout pass writes after their output tensor (``getitem_3_nchwc``
    for the node ``node_Conv_12`` writing ``getitem_3``, as torch's ``dynamo``
    exporter names them): the longest prefix ending before a ``_`` or ``/`` that
    is a key of ``known`` (:func:`_ort_names`) is it.

    Examples
    --------
    >>> _ort_node("b.mul_mul_nchwc_kernel_time", {"b.mul": "b.mul", "b": "b"})
    'b.mul'
    >>> names = {"node_Conv_12": "node_Conv_12", "getitem_3": "node_Conv_12"}
    >>> _ort_node("getitem_3_nchwc_kernel_time", names)
    'node_Conv_12'
    >>> _ort_node("ReorderOutput_token_3_kernel_time", {"b": "b"}) is None
    True
    """
    base = re.sub(r"_kernel_time$", "", name)
    cuts = [m.start() for m in re.finditer(r"[_/]", base)]
    found = next((c for c in [base, *(base[:i] for i in reversed(cuts))] if c in known), None)
    return None if found is None else known[found]


def _ort_names(model: Any) -> dict[str, str]:
    """ONNX node of each name ORT may report: node names, then the output tensors of nodes.

    Examples
    --------
    >>> from onnx import helper
    >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="node_relu")], "g", [], [])
    >>> _ort_names(helper.make_model(graph))
    {'y': 'node_relu', 'node_relu': 'node_relu'}
    """
    names = {out: node.name for node in model.graph.node for out in node.output if out}
    names.update({node.name: node.name for node in model.graph.node if node.name})
    return names


def _ort_kind(op: str, node: str | None, onnx_kinds: Mapping[str, str]) -> str:
    """Kind of an ONNX Runtime node: a (fused) Conv takes its ONNX conv's kind, else by op type."""
    if op in ("Conv", "FusedConv"):
        kind = onnx_kinds.get(node or "")
        return kind if kind in ("conv2d", "depthwise", "group_conv") else "conv2d"
    return _ONNX_KINDS.get(op) or onnx_kinds.get(node or "") or "other"


class OrtProfile(TypedDict):
    """What :func:`ort_profile` measured."""

    nodes: list[dict]
    runs_ms: list[float]
    e2e_ms: float
    profiled_ms: float


def ort_profile(model: Any, repeat: int = 10, threads: int | None = None,
                feeds: Mapping[str, np.ndarray] | None = None, seed: int = 0) -> OrtProfile:
    """ONNX Runtime's per-node medians from its profiler, and its latency without the profiler.

    ONNX Runtime is configured like :mod:`graphtune.peers`, as users run it (fp32,
    all graph optimizations, ``threads`` intra-op threads, its workers spinning
    between nodes: without spinning small models ran 1.3-1.5x slower). Two
    sessions of that configuration, one not profiling, then one profiling, each
    alone (a session's spinning workers slowed another one run beside it up to
    2x), run ``repeat`` timed runs back to back after the untimed runs of
    :func:`graphtune.latency.settled_call_ms` on ``feeds`` (default:
    standard-normal arrays of the inputs' static shapes, ``seed``): the
    unprofiled session's median is ORT's end-to-end latency, measured next to the
    profiled runs, and the node times are the profiled session's.

    Returns
    -------
    OrtProfile
        ``nodes``: ``{"name", "op", "node" (ONNX node or None), "ms"}`` per ORT node,
        in run order, medians of the profiler's ``dur``; ``runs_ms``: the sum of
        the node times of each profiled run; ``e2e_ms``: median wall time of the
        unprofiled session; ``profiled_ms``: that of the profiled one.

    Examples
    --------
    >>> from graphtune import models
    >>> out = ort_profile(models.get("resnet18", image_size=32), repeat=2, threads=2)
    >>> out["nodes"][0]["node"], out["e2e_ms"] > 0   # ORT fused conv1 + relu into one Conv
    ('relu', True)
    """
    import onnxruntime as ort

    threads = int(threads or os.environ.get("TVM_NUM_THREADS") or cast(int, os.cpu_count()))
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if feeds is None:
        rng = np.random.default_rng(seed)
        feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
                 .astype("float32") for i in model.graph.input}
    plain_ms = _timed_runs(ort.InferenceSession(model.SerializeToString(), options,
                                                providers=["CPUExecutionProvider"]), feeds, repeat)
    with tempfile.TemporaryDirectory() as folder:
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(folder, "ort")
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        profiled_ms = _timed_runs(session, feeds, repeat)
        path = session.end_profiling()
        with open(path) as handle:
            events = json.load(handle)
    runs: dict[str, list[float]] = {}
    ops: dict[str, str] = {}
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        runs.setdefault(event["name"], []).append(event["dur"] / 1e3)
        ops[event["name"]] = event.get("args", {}).get("op_name", "")
    known = _ort_names(model)
    timed = {name: times[-repeat:] for name, times in runs.items()}  # the timed runs are the last
    nodes = [{"name": name, "op": ops[name], "node": _ort_node(name, known),
              "ms": float(np.median(times))} for name, times in timed.items() if times]
    runs_ms = [float(sum(times[k] for times in timed.values() if k < len(times))) for k in range(repeat)]
    return {"nodes": nodes, "runs_ms": runs_ms, "e2e_ms": float(np.median(plain_ms)),
            "profiled_ms": float(np.median(profiled_ms))}


def _timed_runs(session: Any, feeds: Mapping[str, np.ndarray], repeat: int) -> list[float]:
    """Wall times (ms) of ``repeat`` runs of ``session`` back to back after the untimed runs of
    :func:`graphtune.latency.settled_call_ms`; the session is the only one running."""
    settled_call_ms(lambda: session.run(None, feeds), SETTLE_CALLS, SETTLE_MS)
    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, feeds)
        walls.append((time.perf_counter() - start) * 1e3)
    return walls


def ort_node_times(model: Any, repeat: int = 10, threads: int | None = None,
                   feeds: Mapping[str, np.ndarray] | None = None, seed: int = 0) -> list[dict]:
    """Median per-node time of ONNX Runtime on ``model``, from its own profiler (unscaled).

    The ``nodes`` of :func:`ort_profile` (same arguments).

    Returns
    -------
    list of dict
        ``{"name", "op", "node" (ONNX node or None), "ms"}`` per ORT node, in run order.

    Examples
    --------
    >>> from graphtune import models
    >>> rows = ort_node_times(models.get("resnet18", image_size=32), repeat=2, threads=2)
    >>> rows[0]["node"], rows[0]["op"]   # ORT fused conv1 + relu into one Conv named after relu
    ('relu', 'Conv')
    """
    return ort_profile(model, repeat, threads, feeds, seed)["nodes"]


def ort_scale_factor(nodes_ms: float, e2e_ms: float) -> float:
    """Factor putting ORT's profiled node times on the footing of its unprofiled latency.

    ``nodes_ms`` is the node time of a profiled run (the median of the runs'
    sums). ``e2e_ms / nodes_ms`` when that is more than an unprofiled run takes
    (the profiler's own cost landed in the nodes), else 1: node times under the
    latency leave ORT's own work between nodes (executor, allocation) to its
    overhead row rather than spreading it over its kernels, which graphtune's
    rows are not charged with either.

    Examples
    --------
    >>> ort_scale_factor(2.5, 2.0), ort_scale_factor(1.8, 2.0)
    (0.8, 1.0)
    """
    return e2e_ms / nodes_ms if nodes_ms > e2e_ms > 0 else 1.0


# ------------------------------------------------------------------ graphtune side
class _VmRuns(TypedDict):
    order: list[str]
    per_run: np.ndarray
    instrumented_ms: list[float]
    plain_ms: list[float]
    builtin_calls: int


def _vm_call_times(compiled: Any, repeat: int, seconds: float = 0.0) -> _VmRuns:
    """Per-call times of ``repeat`` instrumented runs, interleaved with as many plain runs;
    more rounds until the rounds have lasted ``seconds``.

    Two VMs of the executable, one with an instrument timing every PrimFunc call
    and counting the VM's other calls (its builtins: allocation, views, checks),
    one without; each round times one run of each, so the plain runs' latency and
    the calls' times are measured under the same host load.
    """
    import tvm
    from tvm import relax

    from .x86.amx import request_permission

    args = compiled._tensors(compiled.random_inputs())
    request_permission()  # before an AMX kernel runs in this process
    plain = relax.VirtualMachine(compiled.executable, tvm.cpu(0))["main"]
    vm = relax.VirtualMachine(compiled.executable, tvm.cpu(0))
    main = vm["main"]
    plain(*args)
    main(*args)
    calls: list[tuple[str, float]] = []
    start = 0.0
    builtins = 0
    prims = set(compiled.functions)

    def instrument(func, symbol, before, ret, *rest):
        nonlocal start, builtins
        now = time.perf_counter()
        if symbol in prims:
            if before:
                start = time.perf_counter()
            else:
                calls.append((symbol, (now - start) * 1e3))
        elif before:
            builtins += 1
        return 0

    vm.set_instrument(instrument)
    per_run: list[list[float]] = []
    walls, plain_walls, order = [], [], None
    window = time.perf_counter()
    while len(per_run) < repeat or time.perf_counter() - window < seconds:
        began = time.perf_counter()
        plain(*args)
        plain_walls.append((time.perf_counter() - began) * 1e3)
        calls.clear()
        builtins = 0
        began = time.perf_counter()
        main(*args)
        walls.append((time.perf_counter() - began) * 1e3)
        order = [s for s, _ in calls]
        per_run.append([ms for _, ms in calls])
    return {"order": order or [], "per_run": np.asarray(per_run, dtype=float),
            "instrumented_ms": walls, "plain_ms": plain_walls, "builtin_calls": builtins}


def _align(order: list[str], sites: list[tuple[str, list[str]]] | None) -> list[list[str]]:
    """Binding names per VM call: the next call site with the same PrimFunc (sites the VM
    skipped, e.g. a transform it turned into a view, are passed over)."""
    if not sites:
        return [[] for _ in order]
    out: list[list[str]] = []
    j = 0
    for symbol in order:
        k = next((k for k in range(j, len(sites)) if sites[k][0] == symbol), None)
        if k is None:
            out.append([])
            continue
        out.append(sites[k][1])
        j = k + 1
    return out


def _place_groups(labels: list[str], placed: list[list[str]], model: Any,
                  config: Any) -> tuple[dict[int, list[float]], dict[str, float], float]:
    """Give each op group of the config (``solution["op_groups"]``: a pool, an unfused elementwise
    chain, a kernel's fused epilogue) to the call that runs it.

    ``labels`` are the calls' :func:`~graphtune.compiler.legalize.label_of`, what a group's label
    is too: what the function computes besides the layout transforms fused into it (which ones
    fuse depends on its neighbours' layouts). A group is measured in a probe compile whose
    functions may be numbered differently, so it is matched by its owner (the node whose layout
    it runs in) and its label without numbers, else by its label alone; a call's owner is the
    first config node up the ONNX graph from its first node.
    Returns ``({call index: [ms...]}, {node: ms moved off its cost}, ms of plain groups no call
    matched)``; a group of a layout the config does not choose, or with no such call, stays in its
    node's cost (plain ones in the third value).
    """
    producer = {out: node for node in model.graph.node for out in node.output}
    by_name = {node.name: node for node in model.graph.node}

    def owner(name: str) -> str | None:
        while name not in config.nodes:  # up the first inputs of a DAG: it ends
            inputs = [producer[i] for i in by_name[name].input if i in producer] if name in by_name else []
            if not inputs:
                return None
            name = inputs[0].name
        return name

    def ops(label: str) -> str:
        return re.sub(r"\d+(?=_|$)", "", label)

    calls: dict[tuple, list[int]] = {}
    for i, (label, nodes) in enumerate(zip(labels, placed)):
        calls.setdefault((owner(nodes[0]) if nodes else None, ops(label)), []).append(i)
    groups = [g for g in (config.solution or {}).get("op_groups") or []
              if g[0] is None or (g[0] in config.nodes and config.nodes[g[0]].out_layout == g[1])]
    rows: dict[int, list[float]] = {}
    moved: dict[str, float] = {}

    def give(group: list, free: list[int]) -> None:
        node, _, _, ms = group
        rows.setdefault(free.pop(0), []).append(float(ms))
        if node is not None:
            moved[node] = moved.get(node, 0.0) + float(ms)

    left = []
    for group in groups:  # by owner and ops first; then (plain groups, owners the probe saw
        free = calls.get((group[0], ops(group[2])), [])  # otherwise) by ops alone
        if free:
            give(group, free)
        else:
            left.append(group)
    unmatched = 0.0
    for group in left:  # by ops alone
        spare = next((v for k, v in calls.items() if k[1] == ops(group[2]) and v), None)
        if spare:
            give(group, spare)
        elif group[0] is None:
            unmatched += float(group[3])
    return rows, moved, unmatched


def _transform_pair(func: Any) -> tuple[tuple[int, ...], str, str, str] | None:
    """``(logical NCHW shape, src, dst, dtype)`` of a ``layout_transform`` PrimFunc (None for another)."""
    from .compiler.rewrite import TRANSFORM_ATTR
    from .layouts import block_of

    attrs = func.attrs or {}
    if TRANSFORM_ATTR not in attrs or not func.params:
        return None
    src, _, dst = str(attrs[TRANSFORM_ATTR]).partition("->")
    shape = [int(d) for d in func.params[0].ty.shape]
    if len(shape) not in (4, 5):
        return None
    logical = shape[:4] if len(shape) == 4 else [shape[0], shape[1] * shape[4], shape[2], shape[3]]
    if len(shape) == 5 and block_of(src) != shape[4]:
        return None
    return tuple(logical), src, dst, str(func.params[0].ty.dtype)


def _transform_ms(func: Any, records: Any) -> float | None:
    """Measured cost of a ``layout_transform`` PrimFunc in ``records`` (None if not there)."""
    from .measure.task import Task

    pair = _transform_pair(func)
    if pair is None:
        return None
    shape, src, dst, dtype = pair
    record = records.get(Task(Op.TRANSFORM, {"shape": list(shape), "src": src, "dst": dst, "dtype": dtype}))
    return record.median_ms if record is not None and record.ok else None


@dataclass
class CallTimes:
    """In-model times of a compiled model's calls, per config node and per layout transform.

    Attributes
    ----------
    nodes : dict of str to list of float
        Per config node (layout node or join) that owns calls, the ms of its calls in each
        instrumented run: its kernel with its fused epilogue and the calls placed on it (pools,
        unfused ops: the first config node up the ONNX graph from a call's first node owns it).
    transforms : dict of (shape, src, dst, dtype) to list of float
        Per layout transform the model runs as a call of its own, its ms in each run (the mean
        of its calls when it runs more than once).
    other : list of float
        Per run, the ms of the calls no config node owns (before the first node...).
    vm_ms : float
        Median latency of the uninstrumented runs, interleaved with the instrumented ones.
    """

    nodes: dict[str, list[float]]
    transforms: dict[tuple[tuple[int, ...], str, str, str], list[float]]
    other: list[float]
    vm_ms: float


def call_times(compiled: Any, config: Any, model: Any, repeat: int = 10, *,
               seconds: float = 0.0) -> CallTimes:
    """Time every call of ``compiled`` (``model`` compiled with ``config``) ``repeat`` times, per owner
    (more times while the runs have lasted less than ``seconds``).

    The machinery of :func:`profile` (its instrumented and plain runs, and the calls'
    ONNX nodes), with each call given to the config node that owns it, or to its layout
    transform: what :mod:`graphtune.feedback` replaces the predicted costs with.

    Parameters
    ----------
    compiled : graphtune.compiler.CompiledModel
        :func:`graphtune.compile`'s result.
    config : Config
        The config it was compiled with.
    model : onnx.ModelProto
        The model it was compiled from.
    repeat : int
        Instrumented runs (and as many plain ones), at least.
    seconds : float, default 0
        Wall time the runs last at least: on a shared host the speed drifts over seconds,
        and a median over a longer window is one of the host's typical speed rather than
        of its state at one instant (``docs/timing.md``, "Closed loop").

    Examples
    --------
    >>> from graphtune import compile, models
    >>> from graphtune.config import Config
    >>> model = models.get("resnet18", image_size=32)
    >>> config = Config.uniform(model)
    >>> times = call_times(compile(model, config), config, model, repeat=2)
    >>> sorted(times.nodes)[:2], len(times.nodes["conv1"]), times.vm_ms > 0
    (['conv1', 'fc'], 2, True)
    """
    from .compiler.legalize import OP_ATTR
    from .frontend import prepare_onnx

    check_positive(repeat, "repeat", integer=True)
    if not seconds >= 0:
        raise ArgumentError(f"call_times: seconds={seconds!r}: expected a wall time >= 0")
    runs = _vm_call_times(compiled, repeat, seconds)
    order, per_run = runs["order"], runs["per_run"]
    model = prepare_onnx(model, {n: shape for n, shape, _ in compiled.inputs})
    placed, _ = _place(model, list(zip(order, _align(order, compiled.call_sites))))
    producer = {out: node for node in model.graph.node for out in node.output}
    by_name = {node.name: node for node in model.graph.node}

    def owner(name: str) -> str | None:
        while name not in config.nodes:  # up the first inputs of a DAG: it ends
            inputs = [producer[i] for i in by_name[name].input if i in producer] if name in by_name else []
            if not inputs:
                return None
            name = inputs[0].name
        return name

    kernels = {name for name, node in config.nodes.items() if node.op in LAYOUT_OPS}
    nodes: dict[str, np.ndarray] = {}
    transforms: dict[tuple[tuple[int, ...], str, str, str], list[np.ndarray]] = {}
    other = np.zeros(len(per_run))
    for i, (symbol, names) in enumerate(zip(order, placed)):
        func = compiled.functions[symbol]
        column = per_run[:, i]
        pair = _transform_pair(func) if str((func.attrs or {}).get(OP_ATTR, "")) == LAYOUT_TRANSFORM else None
        if pair is not None:
            transforms.setdefault(pair, []).append(column)
            continue
        who = next((n for n in names if n in kernels), None) or (owner(names[0]) if names else None)
        if who is None:
            other = other + column
        else:
            nodes[who] = nodes.get(who, np.zeros(len(per_run))) + column
    return CallTimes({n: v.tolist() for n, v in nodes.items()},
                     {p: np.mean(v, axis=0).tolist() for p, v in transforms.items()},
                     other.tolist(), float(np.median(runs["plain_ms"])))


def profile(model: Any, config: Any = None, *, repeat: int = 10, ort: bool = True,
            threads: int | None = None, image_size: int | None = None,
            shape_dict: Mapping[str, list[int]] | None = None,
            records: str | os.PathLike | None = None) -> ProfileResult:
    """Per-op in-model time of ``model`` compiled with ``config``, beside its prediction and ORT's.

    Parameters
    ----------
    model : str, path, onnx.ModelProto
        Zoo name, ``.onnx`` path or model; one TVM imports only in part is profiled as
        :func:`graphtune.compile` partitions it (the module docstring).
    config : Config or path, optional
        The config to compile with (default :meth:`graphtune.Config.uniform` of the model, or
        of its TVM part).
    repeat : int, default 10
        Instrumented runs (medians per call), uninstrumented timed runs, ORT profiled runs,
        and timed runs of a partitioned model's ONNX Runtime part.
    ort : bool, default True
        Also profile ONNX Runtime on the same model.
    threads : int, optional
        ORT intra-op threads (default ``TVM_NUM_THREADS``: graphtune's).
    image_size : int, optional
        Input size of a zoo model (default its published size).
    shape_dict : mapping, optional
        Static shapes of dynamic ONNX inputs.
    records : path, optional
        Records file of the tuning run: each layout transform's measured time
        there is its predicted cost (the config holds only their total).

    Returns
    -------
    ProfileResult

    Raises
    ------
    ArgumentError
        ``repeat`` not a positive integer; ModelError / ConfigError as in
        :func:`graphtune.compile`.

    Examples
    --------
    >>> import graphtune
    >>> r = graphtune.profile("mobilenet_v2", image_size=32, repeat=2, ort=False)
    >>> r.rows[0].kind, r.totals()["depthwise"]["calls"]
    ('transform', 17)
    """
    from .compiler import compile as gt_compile
    from .compiler.legalize import OP_ATTR, label_of
    from .compiler.partitioned import PartitionedModel
    from .config import Config
    from .measure.records import Records
    from .models.resolve import resolve
    from .x86.generic import SCHEDULE_ATTR

    check_positive(repeat, "repeat", integer=True)
    store = Records.load(records) if records is not None else None
    if not isinstance(ort, bool):
        raise ArgumentError(f"ort: expected True or False, got {ort!r}")
    proto, name = resolve(model, image_size=image_size)
    if not hasattr(proto, "graph"):
        raise ArgumentError("profile needs an ONNX model (zoo name, .onnx path or ModelProto), "
                            f"got {type(proto).__name__}")
    if config is None:
        config = _uniform(proto, shape_dict)
    elif not isinstance(config, Config):
        config = Config.load(config)
    threads = int(threads or os.environ.get("TVM_NUM_THREADS") or cast(int, os.cpu_count()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        whole = gt_compile(proto, config, shape_dict=shape_dict)
    if isinstance(whole, PartitionedModel):  # the VM runs its TVM part
        part, compiled = whole.partition, whole.compiled
    else:
        part, compiled = None, whole
    load_before = os.getloadavg()[0]
    gauge = HandoffGauge() if threads > 1 else None
    before = gauge.ratio() if gauge else None
    start = contention.read()
    runs = _vm_call_times(compiled, repeat)
    busy = contention.share(start, contention.read())
    order, per_run = runs["order"], runs["per_run"]
    handoff = [before, gauge.ratio()] if gauge and before is not None else []
    names = _align(order, compiled.call_sites)
    from .frontend import prepare_onnx

    folded = prepare_onnx(proto if part is None else part.tvm_model,
                          {n: shape for n, shape, _ in compiled.inputs})
    placed, unplaced = _place(folded, list(zip(order, names)))
    onnx_kinds = _onnx_kinds(folded)
    medians = np.median(per_run, axis=0) if per_run.size else np.zeros(len(order))

    labels = [label_of(compiled.functions[symbol]) for symbol in order]
    groups, moved, unmatched = _place_groups(labels, placed, folded, config)
    rows = []
    for i, (symbol, nodes) in enumerate(zip(order, placed)):
        attrs = compiled.functions[symbol].attrs or {}
        op = str(attrs[OP_ATTR]) if OP_ATTR in attrs else ""
        own = op in KERNEL_OPS or op == LAYOUT_TRANSFORM  # graphtune's kernels and transforms
        kind = (op_class(op).family if own else None) \
            or next((onnx_kinds[n] for n in nodes if n in onnx_kinds), None) or op_class(op).family
        costs = [config.nodes[n].cost_ms - moved.get(n, 0.0) for n in nodes
                 if n in config.nodes and config.nodes[n].cost_ms is not None]
        costs += groups.get(i, [])
        if store is not None and (cost := _transform_ms(compiled.functions[symbol], store)):
            costs.append(cost)
        rows.append(ProfileRow(i, symbol, kind, nodes,
                               str(attrs[SCHEDULE_ATTR]) if SCHEDULE_ATTR in attrs else "none",
                               float(medians[i]), float(sum(costs)) if costs else None))

    predicted: dict[str, float] = {}
    for node_name, node in config.nodes.items():
        if node.cost_ms is not None:
            kind = onnx_kinds.get(node_name) or op_class(node.op).family
            predicted[kind] = predicted.get(kind, 0.0) + float(node.cost_ms) - moved.get(node_name, 0.0)
    for i, costs in groups.items():
        predicted[rows[i].kind] = predicted.get(rows[i].kind, 0.0) + sum(costs)
    if unmatched:
        predicted["other"] = predicted.get("other", 0.0) + unmatched
    transform_ms = (config.solution or {}).get("transform_ms")
    if isinstance(transform_ms, (int, float)):
        predicted["transform"] = predicted.get("transform", 0.0) + float(transform_ms)
    if isinstance(whole, PartitionedModel):  # then its ONNX Runtime part
        rows.append(_onnxruntime_part_row(whole, config, repeat))
        if rows[-1].predicted_ms is not None:
            predicted[ORT_PART] = rows[-1].predicted_ms

    result = ProfileResult(name, rows, float(np.median(runs["plain_ms"])), runs["instrumented_ms"],
                           [float(sum(r)) for r in per_run], predicted, None, unplaced, repeat,
                           threads, [load_before, os.getloadavg()[0]], handoff,
                           runs["builtin_calls"], busy)
    if ort:  # the whole model, as partitioned (its nodes named): the ORT part's nodes find its row
        _add_ort(result, proto if part is None else part.model, onnx_kinds,
                 dict(zip(whole.input_names, whole.random_inputs())))
    return result


def _uniform(proto: Any, shape_dict: Mapping[str, list[int]] | None) -> Config:
    """:meth:`Config.uniform` of ``proto``, or of its TVM part when TVM imports it only in part."""
    from .config import Config
    from .frontend.cut import import_tvm_part

    return Config.uniform(import_tvm_part(proto, shape_dict)[0])


def _onnxruntime_part_row(whole: PartitionedModel, config: Config, repeat: int) -> ProfileRow:
    """The :data:`ORT_PART` row of a partitioned model: the median of ``repeat`` runs of what
    runs after the TVM part on the tensors it hands over — the ONNX Runtime part's sessions and
    the row regions TVM runs between them — predicted by the config's
    ``solution.onnxruntime_ms`` plus its row region nodes' costs (None when tune recorded none)."""
    from .frontend.cut import ORT, ORT_MS_KEY
    from .frontend.rows import ROWS

    predicted = (config.solution or {}).get(ORT_MS_KEY)
    if predicted is not None:
        predicted = float(predicted) + sum(
            config.nodes[n].cost_ms or 0.0 for region in whole.partition.regions
            for n in region.nodes if n in config.nodes)
    parts = whole.time_parts(repeat, rerun_tvm=False)
    after = parts[ORT] + parts.get(ROWS, 0.0)
    return ProfileRow(-1, "", ORT_PART, list(whole.partition.ort_nodes), "onnxruntime",
                      float(np.median(after)), predicted)


def _add_ort(result: ProfileResult, proto: Any, onnx_kinds: Mapping[str, str],
             feeds: Mapping[str, np.ndarray]) -> None:
    """Profile ONNX Runtime on ``proto`` and add its scaled node times to ``result``'s rows."""
    measured = ort_profile(proto, repeat=result.repeat, threads=result.threads, feeds=feeds)
    scale = ort_scale_factor(float(np.median(measured["runs_ms"])), measured["e2e_ms"])
    row_of = {n: row for row in result.rows for n in row.nodes}
    total = 0.0
    for entry in measured["nodes"]:
        ms = entry["ms"] * scale
        total += ms
        row = row_of.get(entry["node"])
        if row is not None:
            row.ort_ms = (row.ort_ms or 0.0) + ms
            continue
        result.rows.append(ProfileRow(-1, "", _ort_kind(entry["op"], entry["node"], onnx_kinds),
                                      [f"ort:{entry['name'][:-len('_kernel_time')]}"], "ort", None,
                                      None, ms))
    result.ort_total_ms = total
    result.ort_e2e_ms = measured["e2e_ms"]
    result.ort_profiled_ms = measured["profiled_ms"]
    result.ort_calls_ms = measured["runs_ms"]
    result.ort_scale = scale
