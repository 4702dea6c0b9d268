"""The tuning pipeline: model -> layout graph -> measured costs -> solution -> config.

:func:`tune` runs the phases in order, each resumable through the records
file: extract the :class:`~graphtune.graph.LayoutGraph`, measure every kernel
candidate of every distinct workload, keep the fastest candidate per
(in_layout, out_layout) pair of each node (edge costs depend on layouts
only, so no other candidate can be in an optimal solution), measure what
the compiled model runs around the kernels in each layout (fused epilogues,
pools, unfused joins, the head: :mod:`graphtune.opgroups.pricing`) and add
it to the candidates, measure every layout transform the edges can need,
solve, (``feedback_rounds``) replace the chosen costs by in-model times and solve
again (:mod:`graphtune.feedback`), write the :class:`~graphtune.config.Config`, and (``final_check``)
time it compiled against the uniform and kernel-best configs (and the closed loop's fastest
profiled one), keeping the fastest (:mod:`graphtune.final_check`).

Examples
--------
>>> import os, tempfile, graphtune
>>> records = os.path.join(tempfile.gettempdir(), "graphtune-doctest-resnet18-32.records.jsonl")
>>> result = graphtune.tune("resnet18", image_size=32, max_candidates=2, records=records,
...                         final_check=True)
>>> result.config.save(os.path.join(tempfile.mkdtemp(), "resnet18.graphtune.json"))
>>> result.solution.optimal, sorted(result.phase_seconds)
(True, ['extract', 'final', 'kernels', 'ops', 'solve', 'transforms'])
>>> result.final.chosen in ("solver", "uniform", "kernel-best", "fastest-profiled")
True
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

import onnx
import tvm

from . import x86
from .baselines import kernel_best_solution, uniform
from .checks import check_choice, check_positive
from .compiler import compile as gt_compile
from .config import Config
from .errors import ArgumentError, MeasureError
from .feedback import Feedback, close_loop, default_rounds, model_hash
from .final_check import FASTEST_PROFILED, KERNEL_BEST, SOLVER, UNIFORM, FinalCheck
from .final_check import final_check as check_final
from .frontend.cut import Partition, record_partition, tvm_part
from .frontend.extract import CandidateFn
from .frontend.extract import extract as _frontend_extract
from .frontend.importer import import_model
from .graph import Candidate, LayoutGraph
from .lazy import Pair, solve_measuring
from .measure import LocalRunner, Records, Runner, Task, measure
from .models.resolve import resolve
from .numerics import Accuracy, accuracy
from .opgroups.pricing import OpCosts, apply_op_costs, op_costs, tie_fused_joins
from .opgroups.probe_index import ProbeIndex, index_path_of
from .ops import (
    INT8_OPS,
    LAYOUT_OPS,
    PRECISION,
    PRECISIONS,
    WEIGHT_PAIR_MAX,
    Op,
    input_dtype,
    runs_as,
    timed_as,
)
from .row_check import RegionTiming, check_regions
from .solve import METHODS, Solution, solve

__all__ = ["TuneResult", "TRANSFORMS", "tune", "extract", "x86_candidates", "kernel_best_solution"]

TRANSFORMS = ("lazy", "all")
"""Values of :func:`tune`'s ``transforms``: measure the transforms solutions run, or all."""

FINAL_CHECK_ENV = "GRAPHTUNE_FINAL_CHECK"
"""Environment variable giving :func:`tune`'s ``final_check`` when not passed: ``0`` turns the final
check off (e.g. for a test suite that tunes many models), ``1`` or unset keeps it on."""


def x86_candidates(target: Any = None, max_candidates: int | None = None,
                   precision: str = "float32") -> CandidateFn:
    """The candidate generator of graphtune.x86 for extraction: knobs and their layouts, cost NaN.

    Parameters
    ----------
    target : tvm.target.Target or dict, optional
        Target whose vector width shapes the candidates (default: the host).
    max_candidates : int, optional
        Keep at most this many candidates per node, best guesses first.
    precision : {"float32", "bfloat16"}
        ``"bfloat16"``: a conv2d (depthwise, group) or one-row dense node also gets as many
        bfloat16 candidates (``"precision": "bfloat16"``, :func:`graphtune.ops.runs_as`) where
        the target has a bfloat16 instruction (:func:`graphtune.x86.isas_of`; none is ever assumed).

    Examples
    --------
    >>> from graphtune.ops import Op, dense_workload
    >>> fn = x86_candidates({"kind": "llvm", "mcpu": "znver5"}, max_candidates=1)
    >>> fn(dense_workload([1, 64], [10, 64]), Op.DENSE)
    [Candidate(knobs={'oc_bn': 10, 'k_bn': 8}, in_layout='NC', out_layout='NC', cost=nan)]
    """
    tgt = x86.host_target(target)
    check_choice(precision, PRECISIONS, "precision")
    bf16_isas = precision == "bfloat16" and bool(x86.isas_of(tgt, "bfloat16"))

    def candidates(workload: dict[str, Any], op: Op) -> list[Candidate]:
        knobs = x86.candidates(workload, tgt, max_candidates, op=op)
        if op in INT8_OPS:  # it may run fp32 where faster
            kind, fp32, _ = runs_as(op, workload, {PRECISION: "float32"})
            knobs += [{**k, PRECISION: "float32"} for k in x86.candidates(fp32, tgt, max_candidates, op=kind)]
        if bf16_isas and _may_run_bf16(workload, op):  # it may run bfloat16 where faster
            kind, low, _ = runs_as(op, workload, {PRECISION: "bfloat16"})
            knobs += [{**k, PRECISION: "bfloat16"} for k in x86.candidates(low, tgt, max_candidates, op=kind)]
        found = []
        for k in knobs:
            in_layout, out_layout = x86.layouts_of(workload, k, op=op)
            found.append(Candidate(k, in_layout, out_layout, math.nan))
        return found

    return candidates


def _may_run_bf16(workload: dict[str, Any], op: Op) -> bool:
    """Whether a node has a bfloat16 kernel: a conv2d, a depthwise or group conv2d, or a dense of
    one row ``[1, K]``."""
    return op in (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.GROUP_CONV2D) or (
        op is Op.DENSE and len(workload["data"]) == 2 and workload["data"][0] == 1)


def extract(
    model: onnx.ModelProto | str | os.PathLike | tvm.IRModule,
    target: Any = None,
    max_candidates: int | None = None,
    *,
    shape_dict: Mapping[str, Sequence[int]] | None = None,
    candidates: CandidateFn | None = None,
    precision: str = "float32",
) -> LayoutGraph:
    """Build the :class:`~graphtune.graph.LayoutGraph` of ``model`` with graphtune.x86's candidates.

    The frontend's :func:`~graphtune.frontend.extract.extract` with ``candidates`` defaulting
    to :func:`x86_candidates` ``(target, max_candidates)``.

    Parameters
    ----------
    model : onnx.ModelProto, path to an ``.onnx`` file, or tvm.IRModule
    target : tvm.target.Target or dict, optional
        Target whose vector width shapes the candidates (default: the host).
    max_candidates : int, optional
        Keep at most this many candidates per conv / dense node.
    shape_dict : mapping, optional
        Static shapes for ONNX inputs with dynamic dimensions.
    candidates : callable, optional
        ``candidates(workload, op)`` of a layout node, instead of graphtune.x86's
        (then ``target``, ``max_candidates`` and ``precision`` are unused).
    precision : {"float32", "bfloat16"}
        Of :func:`x86_candidates`.

    Examples
    --------
    >>> from graphtune import models
    >>> g = extract(models.get("resnet50", image_size=32), max_candidates=4)
    >>> g.op("layer1.0.conv1"), len(g.candidates("layer1.0.conv1"))
    ('conv2d', 4)
    >>> g.candidates("layer1.0.conv1")[0].in_layout.startswith("NCHW")
    True
    """
    if candidates is None:
        candidates = x86_candidates(target, max_candidates, precision)
    return _frontend_extract(model, candidates, shape_dict=shape_dict)


@dataclass
class TuneResult:
    """What :func:`tune` found for one model on one target.

    Attributes
    ----------
    graph : LayoutGraph
        The layout graph with measured node and edge costs.
    solution : Solution
        The solver's choice per node, objective, bound and proof status.
    config : Config
        The config to compile with (``config.save(path)`` writes the file): the
        solver's, unless the final check measured another one faster (``final``).
    target : dict
        The target the costs were measured on.
    records : str or None
        The records file the measurements are in.
    phase_seconds : dict
        Wall time of each phase (extract, kernels, ops, transforms, solve, and final:
        the final check).
    measured : dict
        Number of kernel, op-group and transform tasks in the records for this run
        (``kernels``, ``ops``, ``transforms``: with lazy transforms those the graph's
        edges use that were measured or found in the records), and ``transform_rounds``,
        the solves of the lazy transforms (1 with ``transforms="all"``); ``feedback_rounds``,
        the models the closed loop profiled, and ``in_model``, the in-model records the
        graph's costs came from (0 without the loop).
    ops : OpCosts or None
        Measured costs of the ops around the kernels (per node and layout,
        and constant plain ones), already included in the graph's candidates.
    feedback : Feedback or None
        The closed loop (``feedback_rounds``, :mod:`graphtune.feedback`): rounds, the
        predictions before and after, the measured latencies. None when not run.
    final : FinalCheck or None
        The final check (:mod:`graphtune.final_check`): the solver's, the uniform,
        the kernel-best and the loop's fastest profiled (when another) configs compiled and
        timed end to end, interleaved; which one
        ``config`` is and why. None when not run (``final_check=False``, or measured
        on RPC servers). ``solution``, ``predicted_ms`` and the other figures stay
        the solver's when ``config`` is another one.
    partition : Partition or None
        For a model TVM imports only in part (``docs/partition.md``), its partition: the
        graph and costs are its TVM part's, and ``partition.onnxruntime_ms`` the ONNX Runtime
        part's time measured when the config recorded it. None when TVM imports the whole model.
    accuracy : Accuracy or None
        Where the config runs nodes in bfloat16 (``tune(..., precision="bfloat16")``): the
        compiled model's outputs against ONNX Runtime's float32 ones on seeded inputs
        (:func:`graphtune.numerics.accuracy`). None otherwise.
    regions : list of RegionTiming
        Each row region of the partition timed in TVM and in ONNX Runtime
        (:func:`graphtune.row_check.check_regions`); those faster in ONNX Runtime were left
        to it (their nodes are not in ``config``, nor their costs in :attr:`predicted_ms`).
    """

    graph: LayoutGraph
    solution: Solution
    config: Config
    target: dict
    records: str | None
    phase_seconds: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)
    ops: OpCosts | None = None
    final: FinalCheck | None = None
    feedback: Feedback | None = None
    accuracy: Accuracy | None = None
    partition: Partition | None = None
    regions: list[RegionTiming] = field(default_factory=list)

    @property
    def predicted_ms(self) -> float:
        """Predicted latency of the whole model (ms): the chosen candidates (kernels and the op
        groups around them) plus the transforms the compiled model runs, plus, for a partitioned
        model, the ONNX Runtime part's measured time (:attr:`onnxruntime_ms`).

        Without the ONNX Runtime part, at most the solver's objective ``solution.energy``, which
        charges each consumer of a tensor for its own transform where the compiled model shares
        one (:meth:`~graphtune.graph.LayoutGraph.transforms`).
        """
        return self._nodes_ms() + self.transform_ms + self.onnxruntime_ms

    @property
    def onnxruntime_ms(self) -> float:
        """The ONNX Runtime part's median time (ms) measured in tune
        (``partition.onnxruntime_ms``, ``solution.onnxruntime_ms`` of the config); 0 without one."""
        return 0.0 if self.partition is None else self.partition.onnxruntime_ms or 0.0

    def _assignment(self) -> dict:
        """The solution's choices but those of row regions left to ONNX Runtime."""
        left = {n for r in self.regions if not r.faster_in_tvm for n in r.nodes}
        return {n: i for n, i in self.solution.assignment.items() if n not in left}

    def _nodes_ms(self) -> float:
        return float(sum(self.graph.candidates(n)[i].cost for n, i in self._assignment().items()))

    def _layouts(self) -> dict:
        return {n: self.graph.candidates(n)[i].out_layout for n, i in self._assignment().items()}

    @property
    def op_groups(self) -> list[dict]:
        """The op groups the chosen layouts run, with their measured cost (see ``OpCosts``)."""
        return [] if self.ops is None else self.ops.chosen(self._layouts())

    @property
    def ops_ms(self) -> float:
        """Sum of the chosen layouts' op groups (ms): everything but bare kernels and transforms."""
        return 0.0 if self.ops is None else self.ops.total(self._layouts())

    @property
    def kernel_ms(self) -> float:
        """Sum of the chosen kernels' measured (bare) times (ms): the nodes' costs less
        :attr:`ops_ms`. After the closed loop the nodes' costs are in-model times of kernels and
        ops together, so this is an estimate (the summary then shows their sum)."""
        return self._nodes_ms() - self.ops_ms

    @property
    def transform_ms(self) -> float:
        """Sum of the layout transforms the compiled model runs (ms): one per (tensor, layout)."""
        return self.graph.transform_cost(self.solution.assignment)

    @property
    def tune_seconds(self) -> float:
        """Total wall time of the run (s)."""
        return float(sum(self.phase_seconds.values()))

    def summary(self) -> str:
        """A few lines for humans: objective, split, proof status, phase times and the final check.

        Examples
        --------
        >>> import os, tempfile, graphtune
        >>> records = os.path.join(tempfile.gettempdir(), "graphtune-doctest-resnet18-32.records.jsonl")
        >>> result = graphtune.tune("resnet18", image_size=32, max_candidates=2, records=records,
        ...                         final_check=True)
        >>> print(result.summary())
        predicted ... ms = ... + transforms ... ms (auto, optimal)
        phases: extract ...s, kernels ...s, ops ...s, transforms ...s, solve ...s, final ...s
        final check (10 rounds, ... s): solver ... ms (IQR ...), uniform ...; kept ...
        """
        status = "optimal" if self.solution.optimal else f"gap {self.solution.relative_gap:.2%}"
        phases = ", ".join(f"{k} {v:.1f}s" for k, v in self.phase_seconds.items())
        ort = f" + onnxruntime part {self.onnxruntime_ms:.2f} ms" if self.partition else ""
        if self.feedback is not None and self.feedback.in_model:  # kernels and ops timed together
            calls = f"calls {self._nodes_ms():.2f} ms (kernels and ops, in the model where profiled)"
        else:
            calls = (f"kernels {self.kernel_ms:.2f} ms + ops {self.ops_ms:.2f} ms "
                     f"({len(self.op_groups)} groups)")
        lines = [f"predicted {self.predicted_ms:.2f} ms = {calls} + "
                 f"transforms {self.transform_ms:.2f} ms{ort} ({self.solution.method}, {status})",
                 f"phases: {phases}"]
        if self.partition is not None:
            lines.append(self.partition.summary())
        lines += [timing.describe() for timing in self.regions]
        if self.feedback is not None:
            lines.append(self.feedback.summary())
        lowered = sum(node.knobs.get(PRECISION) == "bfloat16" for node in self.config.nodes.values())
        if lowered:
            could = sum(_may_run_bf16(node.workload or {}, node.op) for node in self.config.nodes.values())
            lines.append(f"bfloat16: {lowered} of {could} conv2d / depthwise / dense nodes"
                         + ("" if self.accuracy is None else f"; {self.accuracy.summary()}"))
        if self.final is not None:
            lines.append(self.final.summary())
            if self.final.replaced:
                lines.append(f"note: the config is {self.final.chosen}'s, measured faster than the "
                             "solver's; the prediction above is the solver's config's")
        return "\n".join(lines)


def tune(model: Any, target: Any = None, records: str | os.PathLike | None = "auto", *,
         max_candidates: int | None = 32, solver: str = "auto",
         time_limit: float | None = None, image_size: int | None = None,
         runner: Runner | None = None, min_repeat_ms: float = 10.0, repeat: int = 3,
         retry_errors: bool = False, shape_dict: Mapping[str, Any] | None = None,
         transforms: str = "lazy", progress: bool = True,
         final_check: bool | None = None, feedback_rounds: int | None = None,
         precision: str = "float32") -> TuneResult:
    """Tune the layouts and schedules of every conv2d / dense node of ``model``.

    The objective is the whole model: bare kernels, the op groups the compiled
    model runs around them in each layout (fused epilogues, pools, joins, the
    head; :mod:`graphtune.opgroups.pricing`) and layout transforms. The result is
    never slower than not tuning as far as a final measurement can tell: the
    solver's config is compiled and timed against the uniform and kernel-best
    ones, and the closed loop's fastest profiled one (``final_check``).

    Parameters
    ----------
    model : str, path, onnx.ModelProto or tvm.IRModule
        A zoo name (:func:`graphtune.models.names`), an ``.onnx`` file or a model.
    target : tvm.target.Target or dict, optional
        Target to tune for; default the host CPU (:func:`graphtune.x86.host_target`).
    records : path, "auto" or None
        Records file to reuse and extend; ``"auto"`` is ``MODEL.records.jsonl``
        in the working directory; None keeps measurements in memory. Beside a
        records file ``X.records.jsonl``, the probe index ``X.probes.jsonl``
        (:mod:`graphtune.opgroups.probe_index`) spares a re-tune the probe compiles.
    max_candidates : int or None, default 32
        Kernel candidates measured per distinct workload, best guesses first
        (:func:`graphtune.x86.candidates` orders every channel-block pair's
        likeliest tile before second choices); None measures the whole space
        (hundreds per workload).
    solver : str
        Method of :func:`graphtune.solve.solve`.
    time_limit : float, optional
        Seconds the solver may take; past it the best solution and its gap.
    image_size : int, optional
        Input size for zoo models (default their published size).
    runner : graphtune.measure.Runner, optional
        Where kernels are timed (default this machine).
    min_repeat_ms, repeat : float, int
        Timing (:func:`graphtune.measure.measure`): each repeat lasts about
        ``min_repeat_ms`` of wall time; medians of ``repeat`` (more when noisy).
    retry_errors : bool
        Measure again the tasks whose record is an error (a time-out on a busy
        machine...) instead of reusing the error.
    shape_dict : mapping of str to list of int, optional
        Static shapes of ONNX inputs with dynamic dimensions
        (e.g. ``{"input": [1, 3, 224, 224]}``).
    transforms : {"lazy", "all"}
        Which layout transforms to measure. ``"lazy"`` (default): only those the
        solutions run, solving again as they come in (:mod:`graphtune.lazy`; with an
        exact solver the same optimum as ``"all"``; EfficientNet-B0: ~230 of 4436
        transforms); the result's graph marks the entries left at their lower bound
        (:meth:`~graphtune.graph.LayoutGraph.unmeasured`). ``"all"``: every transform
        between the candidates' layouts, for a graph that is exact everywhere (to
        compare solvers on, or solve it again with other costs). The
        ``transforms`` phase includes the solves of the lazy rounds.
    progress : bool
        Progress bars per phase.
    final_check : bool, optional
        Default: on, unless the environment variable ``GRAPHTUNE_FINAL_CHECK`` is
        ``0`` (:data:`FINAL_CHECK_ENV`; the test suite sets it, and its tests of the
        check turn it on). End with the final check (:mod:`graphtune.final_check`): compile the solver's
        config, :func:`~graphtune.baselines.uniform`'s (16-channel blocks, default
        knobs) and :func:`~graphtune.baselines.kernel_best_solution`'s (each config
        that compiles to the same program as another only once), time them end to
        end in this process, interleaved (medians and interquartile ranges of
        :data:`~graphtune.final_check.ROUNDS` rounds on random inputs), and return
        the fastest: another config than the solver's only when it wins beyond the
        spread (:func:`~graphtune.final_check.choose`); ``result.final`` says which
        and why, and the returned config's ``solution.final_check`` too. It costs
        one compile per distinct config and a few seconds of timing (ResNet-50:
        ``docs/timing.md``). Skipped when measuring on RPC servers (the model
        would run here, not there).
    feedback_rounds : int, optional
        Close the loop (:mod:`graphtune.feedback`): after the first solve, compile the
        solver's config, time its calls in the model, replace the costs of the chosen
        candidates and transforms by their in-model times (records of kind ``in_model``,
        reused by a re-tune), solve again; at most this many models profiled (default
        :data:`graphtune.feedback.ROUNDS`, 2, or ``$GRAPHTUNE_FEEDBACK_ROUNDS``; 0: off; the
        test suite sets 0). Skipped when measuring on RPC servers.
    precision : {"float32", "bfloat16"}, default "float32"
        ``"bfloat16"`` (alias ``"bf16"``) lets every conv2d node run in bfloat16 where that is
        measured faster: bfloat16 inputs and weights, float32 sums and outputs (AVX512-BF16
        ``vdpbf16ps``, AMX ``tdpbf16ps``; offered only where the target has one). It changes
        the numerics (bfloat16 keeps 8 significant bits of each operand): off by default.

    Returns
    -------
    TuneResult

    Raises
    ------
    ArgumentError
        For an invalid option (unknown solver, repeat < 1...), checked before any work.
    ModelError
        For an unknown zoo name or an unreadable model.
    MeasureError
        If every candidate of a node failed to build or run, or a transform did.

    Examples
    --------
    Options are checked before any work (the module docstring shows a full run):

    >>> tune("resnet18", solver="greedy")
    Traceback (most recent call last):
    ...
    graphtune.errors.ArgumentError: solver 'greedy' is not one of: auto, ...
    """
    phases: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(phase: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[phase] = now - clock
        clock = now

    check_choice(solver, METHODS, "solver")
    check_choice(transforms, TRANSFORMS, "transforms")
    precision = "bfloat16" if precision == "bf16" else precision
    check_choice(precision, PRECISIONS, "precision")
    check_positive(time_limit, "time_limit", optional=True)
    check_positive(max_candidates, "max_candidates", integer=True, optional=True)
    check_positive(repeat, "repeat", integer=True)
    check_positive(min_repeat_ms, "min_repeat_ms")
    feedback_rounds = default_rounds() if feedback_rounds is None else feedback_rounds
    if not isinstance(feedback_rounds, int) or isinstance(feedback_rounds, bool) or feedback_rounds < 0:
        raise ArgumentError(f"feedback_rounds must be an int >= 0, got {feedback_rounds!r}")
    final_check = _final_check_default() if final_check is None else final_check
    onnx_model, name = resolve(model, image_size=image_size)
    own_runner = runner is None  # then its worker processes serve both measuring phases
    if runner is None:
        runner = LocalRunner()
    tgt = runner.resolve_target(target)
    key = runner.target_key(tgt)
    if records == "auto":
        records = f"{name}.records.jsonl"
    onnx_model, shape_dict, partition = tvm_part(onnx_model, shape_dict)  # issue 31: ORT runs the rest
    graph = extract(onnx_model, tgt, max_candidates, shape_dict=shape_dict, precision=precision)
    _warn_8bit_weights(graph, tgt)
    store = Records(records)  # after extract: a model it refuses leaves no records file behind
    lap("extract")

    with cast(LocalRunner, runner) if own_runner else contextlib.nullcontext():
        timing: _Timing = {"runner": runner, "min_repeat_ms": min_repeat_ms, "repeat": repeat,
                  "retry_errors": retry_errors, "progress": progress}
        # a layout node has a workload; its candidates' knobs are the dicts x86 gave
        kernel_tasks = {node: [(c, Task(*timed_as(graph.op(node), cast(dict[str, Any], graph.workload(node)),
                                                 cast(dict[str, Any], c.knobs))))
                               for c in graph.candidates(node)]
                        for node in graph.nodes if graph.op(node) in LAYOUT_OPS}
        flat = [t for tasks in kernel_tasks.values() for _, t in tasks]
        by_task = dict(zip(flat, measure(flat, tgt, store, desc="kernels", **timing)))
        for node, tasks in kernel_tasks.items():
            graph.set_candidates(node, _fastest_per_layout_pair(node, graph.op(node), tasks, by_task, store,
                                                                key, runner.timing))
        lap("kernels")

        module = import_model(onnx_model, shape_dict=shape_dict)
        index = ProbeIndex(None if records is None else index_path_of(records),
                           lambda task: store.reusable(task, key, runner.timing,
                                                       retry_errors) is not None)
        ops = op_costs(module, graph, tgt, lambda tasks: measure(tasks, tgt, store, desc="ops",
                                                                 **timing), index)
        apply_op_costs(graph, ops)
        lap("ops")

        measure_transforms = functools.partial(_measure_transforms, tgt=tgt, store=store,
                                               key=key, runner=runner)
        if transforms == "all":
            pairs = graph.transform_pairs()
            measured = dict(zip(pairs, measure_transforms(pairs, timing=timing, desc="transforms")))
            graph.fill_edge_costs(_looked_up(measured))
            tie_fused_joins(graph)
            lap("transforms")
            solution, transform_rounds = solve(graph, method=solver, time_limit=time_limit), 1
        else:
            rounds = itertools.count(1)
            solution, measured, transform_rounds = solve_measuring(
                graph,
                lambda pairs: measure_transforms(pairs, timing=timing,
                                                 desc=f"transforms, round {next(rounds)}"),
                lambda g: solve(g, method=solver, time_limit=time_limit),
                known=_recorded_transforms(graph, store, key, runner), adjust=tie_fused_joins,
                also=[lambda g: kernel_best_solution(g).assignment])
            lap("transforms")
        feedback = None
        if feedback_rounds and isinstance(runner, LocalRunner):
            def solve_with(known: Mapping[Pair, float]) -> tuple[Solution, Mapping[Pair, float]]:
                if transforms == "all":
                    graph.fill_edge_costs(_looked_up(known))
                    tie_fused_joins(graph)
                    return solve(graph, method=solver, time_limit=time_limit), known
                solved, costs, _ = solve_measuring(
                    graph, lambda pairs: measure_transforms(pairs, timing=timing,
                                                            desc="transforms, feedback"),
                    lambda g: solve(g, method=solver, time_limit=time_limit), known=known,
                    adjust=tie_fused_joins, also=[lambda g: kernel_best_solution(g).assignment])
                return solved, costs

            solution, feedback = close_loop(
                graph, solution, measured, rounds=feedback_rounds, resolve=solve_with,
                model=onnx_model, model_key=model_hash(module, precision), store=store, target=tgt, key=key,
                timing=runner.timing, shape_dict=shape_dict, name=name, progress=progress)
            lap("feedback")
    config = Config.from_solution(graph, solution, model_name=name)
    config.target = key
    lap("solve")
    result = TuneResult(graph, solution, config, key,
                        None if records is None else os.fspath(records), phases,
                        {"kernels": len(set(flat)), "ops": ops.tasks,
                         "transforms": len(measured), "transform_rounds": transform_rounds,
                         "feedback_rounds": 0 if feedback is None else feedback.rounds,
                         "in_model": 0 if feedback is None else feedback.in_model},
                        ops, feedback=feedback, partition=partition)
    cast(dict[str, Any], config.solution).update(predicted_ms=result.predicted_ms, kernel_ms=result.kernel_ms,
                           ops_ms=result.ops_ms,
                           op_groups=[[g["node"], g["layout"], g["label"], g["ms"]]
                                      for g in result.op_groups])
    if final_check and isinstance(runner, LocalRunner):
        _keep_fastest(result, onnx_model, module, tgt, shape_dict, name)
        lap("final")
    if partition is not None and partition.regions and isinstance(runner, LocalRunner):
        _keep_faster_regions(result, partition, tgt)
        lap("regions")
    record_partition(result.config, partition)  # issue 31: compile checks the partition
    if any(node.knobs.get(PRECISION) == "bfloat16" for node in result.config.nodes.values()):
        result.accuracy = _accuracy(onnx_model, result.config, tgt, shape_dict)
    return result


def _keep_faster_regions(result: TuneResult, partition: Partition, tgt: Any) -> None:
    """Time the row regions in TVM and ONNX Runtime (:func:`graphtune.row_check.check_regions`)
    and leave those faster in ONNX Runtime to it: out of the partition and the config, their
    costs out of the prediction (``solution.predicted_ms``)."""
    result.regions = check_regions(partition, result.config, tgt)
    slower = [k for k, timing in enumerate(result.regions) if not timing.faster_in_tvm]
    if not slower:
        return
    left = {n for k in slower for n in partition.regions[k].nodes}
    partition.drop_regions(slower)
    _leave_nodes(result.config, left)
    solution = cast(dict[str, Any], result.config.solution)
    if "predicted_ms" in solution and (result.final is None or not result.final.replaced):
        solution.update(predicted_ms=result.predicted_ms, kernel_ms=result.kernel_ms,
                        ops_ms=result.ops_ms)


def _leave_nodes(config: Config, left: set[str]) -> None:
    """Take the nodes ``left`` (to ONNX Runtime) out of ``config``: their node configs, op
    groups, and their costs out of ``solution.predicted_ms`` and ``kernel_ms`` (the ONNX
    Runtime part's time, recorded after, covers them).

    Examples
    --------
    >>> from graphtune.config import NodeConfig
    >>> config = Config({"fc": NodeConfig("dense", {}, "NC", "NC", {}, 20.0),
    ...                  "conv": NodeConfig("conv2d", {}, "NCHW", "NCHW", {}, 5.0)},
    ...                 solution={"predicted_ms": 26.0, "kernel_ms": 25.0,
    ...                           "op_groups": [["fc", "NC", "relu", 0.5]]})
    >>> _leave_nodes(config, {"fc"})
    >>> sorted(config.nodes), config.solution
    (['conv'], {'predicted_ms': 6.0, 'kernel_ms': 5.0, 'op_groups': []})
    """
    dropped_ms = sum(node.cost_ms or 0.0 for name, node in config.nodes.items() if name in left)
    config.nodes = {n: node for n, node in config.nodes.items() if n not in left}
    solution = dict(config.solution or {})
    solution["op_groups"] = [g for g in solution.get("op_groups", []) if g[0] not in left]
    for key in ("predicted_ms", "kernel_ms"):
        if key in solution:
            solution[key] -= dropped_ms
    config.solution = solution


def _warn_8bit_weights(graph: LayoutGraph, tgt: Any) -> None:
    """Warn, naming them, about quantized nodes whose 8-bit weights the target's fastest int8
    instruction cannot sum exactly (``vpmaddubsw`` without VNNI): they run the 16-bit path."""
    fastest = x86.int8_isa.fastest_int8_isa(tgt)
    if fastest is None or fastest.pair_limit is None:  # VNNI: every int8 weight at full speed
        return
    workloads = {node: graph.workload(node) or {} for node in graph.nodes if graph.op(node) in INT8_OPS}
    slow = [node for node, workload in workloads.items()  # depthwise: no pairs, no bound
            if WEIGHT_PAIR_MAX in workload and not fastest.exact_for(workload)]
    if slow:
        more = f" and {len(slow) - 3} more" if len(slow) > 3 else ""
        names = ", ".join(repr(node) for node in slow[:3]) + more
        warnings.warn(
            f"graphtune.tune: {len(slow)} quantized node(s) ({names}) hold 8-bit weights whose channel "
            f"pairs sum past {fastest.pair_limit}; this CPU has no VNNI, so their int8 kernels cannot run "
            f"'{fastest.name}' exactly and take the 16-bit path (half its products per instruction). "
            "Quantize with 7-bit weights to run them at full speed: graphtune.quantize(..., "
            "reduce_range=True), its default on such a CPU", UserWarning, stacklevel=3)


ACCURACY_INPUTS = 4
"""Seeded inputs :func:`tune` compares a bfloat16 config's outputs on (:attr:`TuneResult.accuracy`)."""


def _accuracy(model: onnx.ModelProto, config: Config, tgt: Any,
              shape_dict: Mapping[str, Any] | None) -> Accuracy:
    """The compiled ``config``'s outputs against ONNX Runtime float32 on seeded random inputs."""
    import onnxruntime as ort  # a heavy import, needed here only

    compiled = gt_compile(model, config, tgt, shape_dict=shape_dict)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    inputs = [compiled.random_inputs(seed) for seed in range(ACCURACY_INPUTS)]
    return accuracy(lambda arrays: compiled(*arrays),
                    lambda arrays: session.run(None, dict(zip(names, arrays))), inputs, "onnxruntime float32")


def _final_check_default() -> bool:
    """Whether :func:`tune` runs its final check when not told: :data:`FINAL_CHECK_ENV` unset,
    empty or ``1`` says yes, ``0`` no.

    Raises
    ------
    ArgumentError
        For another value of the variable.
    """
    value = os.environ.get(FINAL_CHECK_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise ArgumentError(f"environment variable {FINAL_CHECK_ENV}={value!r}: expected 0 (no "
                            "final check by default) or 1 (final check, the default)")
    return value != "0"


def _keep_fastest(result: TuneResult, model: onnx.ModelProto, module: tvm.IRModule, tgt: Any,
                  shape_dict: Mapping[str, Any] | None, name: str) -> None:
    """The final check of :func:`tune`: time ``result.config`` against the uniform and
    kernel-best configs of ``model`` (``module``: it imported), and the closed loop's fastest
    profiled one when that is another, and make ``result.config`` the one
    :func:`~graphtune.final_check.final_check` keeps."""
    configs = {SOLVER: result.config,
               UNIFORM: uniform(module, target=tgt),  # the imported module: shape_dict applied
               KERNEL_BEST: Config.from_solution(result.graph, kernel_best_solution(result.graph),
                                                 model_name=name)}
    if result.feedback is not None and result.feedback.fastest is not None:
        configs[FASTEST_PROFILED] = Config.from_solution(result.graph, result.feedback.fastest,
                                                         model_name=name)
    for config in configs.values():
        config.target = result.target
        config.model = {**(config.model or {}), "name": name}
    check = check_final(model, configs, incumbent=SOLVER, target=tgt, shape_dict=shape_dict)
    result.final, result.config = check, configs[check.chosen]
    cast(dict[str, Any], result.config.solution)["final_check"] = {
        key: value for key, value in check.to_dict().items()
        if key in ("chosen", "reason", "median_ms", "spread_ms", "same_as", "rounds", "seconds")}


class _Timing(TypedDict):
    """How :func:`tune` measures: the keyword arguments it gives :func:`graphtune.measure.measure`."""

    runner: Runner
    min_repeat_ms: float
    repeat: int
    retry_errors: bool
    progress: bool


def _retry_hint(store: Records, tasks: list[Task], key: dict, timing: str) -> str:
    """How to measure failed ``tasks`` again: retry_errors, or which record lines to delete."""
    lines = sorted({n for n in (store.line_of(t, key, timing) for t in tasks) if n is not None})
    where = ""
    if store.path is not None and lines:
        shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        where = f", or delete line(s) {shown} of {store.path}"
    return ("errors are reused on reruns: retry with retry_errors=True (graphtune tune "
            f"--retry-errors){where}")


def _measure_transforms(pairs: Sequence[Pair], *, tgt: Any, store: Records, key: dict[str, Any],
                        runner: Runner, timing: _Timing, desc: str) -> list[float]:
    """Measure the layout transforms ``pairs`` ((shape, src, dst, dtype)); their median ms, in order.

    Raises
    ------
    MeasureError
        Naming the first transform that failed and how to measure it again.
    """
    tasks = [_transform_of(pair) for pair in pairs]
    records = measure(tasks, tgt, store, desc=desc, **timing)
    for (shape, src, dst, dtype), rec in zip(pairs, records):
        if not rec.ok:
            raise MeasureError(f"layout transform {src} -> {dst} of {dtype} shape {list(shape)} failed: "
                               f"{rec.error}; {_retry_hint(store, [rec.task], key, runner.timing)}")
    return [cast(float, rec.median_ms) for rec in records]  # every one ok: it has a median


def _looked_up(costs: Mapping[Pair, float]) -> Callable[[Any, str, str, str], float]:
    """The transform cost function reading ``costs`` (``(shape, src, dst, dtype)`` -> ms)."""
    return lambda shape, src, dst, dtype: costs[(tuple(shape), src, dst, dtype)]


def _transform_of(pair: Pair) -> Task:
    shape, src, dst, dtype = pair
    return Task(Op.TRANSFORM, {"shape": list(shape), "src": src, "dst": dst, "dtype": dtype})


def _recorded_transforms(graph: LayoutGraph, store: Records, key: dict, runner: Runner) -> dict:
    """The transforms ``graph``'s edges need that ``store`` already holds (successes), to ms."""
    known = {}
    for pair in graph.transform_pairs():
        task = _transform_of(pair)
        record = store.get(task, key, runner.timing_of(task))
        if record is not None and record.ok:
            known[pair] = record.median_ms
    return known


def _fastest_per_layout_pair(node: str, op: Op, tasks: list[tuple[Candidate, Task]],
                             by_task: Mapping[Task, Any], store: Records, key: dict,
                             timing: str) -> list[Candidate]:
    """The fastest measured candidate of ``node`` for each (in_layout, out_layout) pair and
    input dtype: a quantized node keeps its fastest int8 and fp32 candidate of each pair
    (:func:`graphtune.ops.runs_as`), whose transforms before them differ
    (:func:`graphtune.ops.input_dtype`), for the solver to choose."""
    best: dict[tuple[str, str, str], Candidate] = {}
    errors = []
    for candidate, task in tasks:
        record = by_task[task]
        if not record.ok:
            errors.append(record.error)
            continue
        form = (candidate.in_layout, candidate.out_layout, input_dtype(op, candidate.knobs))
        cand = Candidate(candidate.knobs, candidate.in_layout, candidate.out_layout, float(record.median_ms))
        if form not in best or cand.cost < best[form].cost:
            best[form] = cand
    if not best:
        raise MeasureError(f"node {node!r}: all {len(tasks)} candidates failed to build or run; "
                           f"first error: {errors[0] if errors else 'none'}; "
                           f"{_retry_hint(store, [t for _, t in tasks], key, timing)}")
    return sorted(best.values(), key=lambda c: c.cost)
