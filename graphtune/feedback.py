"""The closed loop (issue 32): replace the predicted costs of what a solution runs by in-model times.

Kernels and op groups timed alone (:mod:`graphtune.measure`) predict a model's
latency systematically low: inside the model their inputs come from their
producers, caches hold other data, threads hand over between calls.
:func:`close_loop` compiles the solver's config, times every call of it in the
model (:func:`graphtune.profiling.call_times`), replaces the cost of each chosen
(node, layout pair) candidate by the in-model time of the calls that node owns
(kernel, fused epilogue, the op groups placed on it; the node's other candidates scale by its
in-model / isolated ratio for their kernel's kind, or by the model's typical ratio of the kind where
the node's is an outlier or the node ran no candidate of the kind: :func:`in_model_costs`), each
layout transform
the model runs by its in-model time, and the model's constant (the plain-layout op groups
priced alone) by the time of the calls no config node owns, solves again (new transforms measured
lazily), and repeats until the solution runs only candidates whose costs came
from the model, or ``rounds`` models were profiled.

In-model times are records (task kind :attr:`graphtune.ops.Op.IN_MODEL`,
:func:`node_task`, :func:`transform_task`, :func:`plain_task`), keyed by the model's structural
hash, precision and graphtune's code (:func:`model_hash`), the node, its layouts and knobs,
the target and the timing protocol: a re-tune applies them before profiling
anything, and profiles only candidates no record covers. A candidate profiled
again (it stays in the next round's solution, which runs something new) gets the
newer time (records: the last one wins), so a round profiled while the host ran
slow does not set the costs of the whole loop; and the calls a profile shares with the
records measure how much faster or slower the host runs now (:func:`host_drift`): a faster
profile rescales every older record of the model by it, a slower one is itself rescaled to the
older records' speed, so the costs the solver compares are at one host speed, the fastest the
loop has seen. Each profile runs for at least :data:`PROFILE_SECONDS`. Each round's profile is
bracketed by the host-state gauge (:mod:`graphtune.hoststate`): one taken while the threads did
not share a cache runs everything slower than the isolated costs it replaces, and so does one
during which other work took the CPUs (:mod:`graphtune.measure.contention`), so the model is
profiled again, up to :data:`PROFILES` times, and the first profile in the shared state (else
the fastest) is used. Records are never measured by :func:`graphtune.measure.measure` (they have
no builder).

Examples
--------
>>> import os, tempfile, graphtune
>>> records = os.path.join(tempfile.mkdtemp(), "r18.records.jsonl")
>>> result = graphtune.tune("resnet18", image_size=32, max_candidates=2, records=records,
...                         feedback_rounds=2, final_check=False, progress=False)
>>> result.feedback.rounds >= 1, result.measured["in_model"] > 0
(True, True)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import hoststate, profiling
from .errors import ArgumentError
from .graph import Candidate, LayoutGraph
from .lazy import Pair
from .measure import Records, Task, contention
from .measure.records import Record
from .measure.task import code_digest
from .opgroups.pricing import fixed_cost_node
from .ops import LAYOUT_OPS, NODE_OPS, PRECISION, Op
from .solve import Solution

__all__ = ["Feedback", "IN_MODEL_PROTOCOL", "ROUNDS", "ROUNDS_ENV", "REPEAT", "PROFILE_SECONDS", "PROFILES",
           "OUTLIER", "close_loop", "default_rounds", "node_task", "transform_task", "plain_task",
           "model_hash", "in_model_costs", "typical_ratios", "kind_of", "host_drift",
           "profile_in_shared_state"]

IN_MODEL_PROTOCOL = "vm-instrument"
"""How in-model times are taken (part of their records' key): every PrimFunc call of the
Relax VM timed by an instrument, runs interleaved with uninstrumented ones
(:func:`graphtune.profiling.call_times`), median of at least :data:`REPEAT` runs lasting at
least :data:`PROFILE_SECONDS`."""

REPEAT = 10
"""Fewest instrumented runs per profiled model."""

PROFILE_SECONDS = 3.0
"""Shortest wall time of one profile: a shared host's speed drifts over seconds, so a median of
runs spread over a few seconds is one of its typical speed, where ten back-to-back runs of a
small model (a second) are a snapshot (``docs/timing.md``, "Closed loop")."""

OUTLIER = 1.25
"""A node whose profiled candidates ran more than this times slower in the model, relative to
their isolated costs, than the model's nodes typically did has its other candidates priced at
the typical ratio (:func:`in_model_costs`)."""

PROFILES = 3
"""Most profiles of one compiled model per round (:func:`profile_in_shared_state`): another is
taken while the host-state gauge says the threads did not share a cache."""

ROUNDS = 2
"""Default of :func:`graphtune.tune`'s ``feedback_rounds`` (``docs/timing.md``, "Closed loop"),
unless :data:`ROUNDS_ENV` says otherwise."""

ROUNDS_ENV = "GRAPHTUNE_FEEDBACK_ROUNDS"
"""Environment variable overriding :data:`ROUNDS` (a count >= 0; the test suite sets 0)."""


def default_rounds() -> int:
    """``feedback_rounds`` of a :func:`graphtune.tune` not told: :data:`ROUNDS_ENV` if set, else
    :data:`ROUNDS`.

    Raises
    ------
    ArgumentError
        For a value of the variable that is not a count.

    Examples
    --------
    >>> import os
    >>> default_rounds() == int(os.environ.get(ROUNDS_ENV) or ROUNDS)
    True
    """
    value = os.environ.get(ROUNDS_ENV, "").strip()
    if not value:
        return ROUNDS
    if not value.isdigit():
        raise ArgumentError(f"environment variable {ROUNDS_ENV}={value!r}: expected a count >= 0 "
                            f"(the closed loop's default rounds; 0: off)")
    return int(value)


@dataclass
class Feedback:
    """What :func:`close_loop` did.

    Attributes
    ----------
    rounds : int
        Models compiled and profiled.
    predicted_before_ms, predicted_after_ms : float
        The prediction of the first solution (costs measured alone) and of the last one
        (in-model costs where recorded).
    measured_ms : list of float
        End-to-end latency of each profiled model (uninstrumented VM runs).
    converged : bool
        The last solution runs only candidates whose costs came from the model.
    in_model : int
        In-model records the graph's costs came from (written or found).
    seconds : float
        Wall time of the loop.
    states : list of str
        The host state (:func:`graphtune.hoststate.state_of`, or ``"contended"``:
        :func:`profile_in_shared_state`) of each round's profile.
    profiles : int
        Profiles taken (more than ``rounds`` when a round profiled again).
    drifts : list of float
        Per round, :func:`host_drift`: its profile's times over the recorded ones of the same
        calls (1: nothing timed before); under 1 the older records were rescaled by it, over 1
        the round's own times by its inverse.
    fastest : Solution or None
        The solution of the profiled round that ran fastest end to end, when that is not the
        last solution: the final check times it too (:func:`graphtune.tune`), so a loop whose
        later rounds moved to a slower config (costs misread) does not lose the faster one.

    Examples
    --------
    >>> print(Feedback(2, 1.0, 1.4, [1.5, 1.45], True, 12).summary())
    feedback: 2 rounds, predicted before 1.000 ms after 1.400 ms, measured 1.500, 1.450 ms (converged)
    >>> Feedback(2, 1.0, 1.4, [1.5, 1.8], True, 12, drifts=[1.0, 1.2]).summary().split("ms, ")[-1]
    'host drift x1.00, x1.20 (converged)'
    """

    rounds: int
    predicted_before_ms: float
    predicted_after_ms: float
    measured_ms: list[float] = field(default_factory=list)
    converged: bool = False
    in_model: int = 0
    seconds: float = 0.0
    states: list[str] = field(default_factory=list)
    profiles: int = 0
    drifts: list[float] = field(default_factory=list)
    fastest: Solution | None = None

    def summary(self) -> str:
        """One line: rounds, the predictions before and after, the measured latencies."""
        states = self.states + ["shared"] * (len(self.measured_ms) - len(self.states))
        measured = ", ".join(f"{ms:.3f}" + ("" if state == "shared" else f" ({state})")
                             for ms, state in zip(self.measured_ms, states))
        drifts = ", ".join(f"x{ratio:.2f}" for ratio in self.drifts) if set(self.drifts) - {1.0} else ""
        return (f"feedback: {self.rounds} rounds, predicted before {self.predicted_before_ms:.3f} ms "
                f"after {self.predicted_after_ms:.3f} ms"
                + (f", measured {measured} ms" if measured else "")
                + (f", host drift {drifts}" if drifts else "")
                + (" (converged)" if self.converged else " (round limit)"))


def model_hash(module: Any, precision: str = "float32") -> str:
    """The key of a model in in-model records: the structural hash of its imported module, the
    precision it is tuned in, and the graphtune code that compiles it
    (:func:`graphtune.measure.task.code_digest`: what a candidate costs in the model changes with
    how graphtune fuses and lowers it).

    The precision is part of the key because a node's calls hold different work in a model tuned
    in another precision (a float32 node next to bfloat16 ones rounds its output, a concat read
    by bfloat16 convs fuses otherwise): a bfloat16 tune comparing its calls with a float32 tune's
    records of the same model would take that difference for host drift (``docs/timing.md``).

    Examples
    --------
    >>> from graphtune import models
    >>> from graphtune.frontend import import_model
    >>> mod = import_model(models.get("resnet18", image_size=32))
    >>> model_hash(mod).endswith(code_digest()[:12]), model_hash(mod) == model_hash(mod, "bfloat16")
    (True, False)
    """
    import tvm_ffi

    return f"{tvm_ffi.structural_hash(module)}-{precision}-{code_digest()[:12]}"


def node_task(model: str, node: str, candidate: Candidate) -> Task:
    """The in-model record task of ``node`` running ``candidate`` in model ``model`` (hash).

    Examples
    --------
    >>> node_task("1", "conv1", Candidate({"oc_bn": 8}, "NCHW", "NCHW8c", 1.0)).key[:40]
    '{"kind":"in_model","knobs":{"oc_bn":8},"'
    """
    return Task(Op.IN_MODEL, {"model": model, "node": node, "in_layout": candidate.in_layout,
                              "out_layout": candidate.out_layout, "shape": [],
                              "protocol": IN_MODEL_PROTOCOL}, dict(candidate.knobs))


def transform_task(model: str, pair: Pair) -> Task:
    """The in-model record task of layout transform ``pair`` ((shape, src, dst, dtype)) in model
    ``model``.

    Examples
    --------
    >>> transform_task("1", ((1, 8, 4, 4), "NCHW", "NCHW8c", "uint8")).workload["shape"]
    [1, 8, 4, 4]
    """
    shape, src, dst, dtype = pair
    return Task(Op.IN_MODEL, {"model": model, "node": "", "in_layout": src, "out_layout": dst,
                              "shape": list(shape), "protocol": IN_MODEL_PROTOCOL, "dtype": dtype})


def plain_task(model: str) -> Task:
    """The in-model record task of the calls of model ``model`` (hash) that no config node owns
    (:attr:`graphtune.profiling.CallTimes.other`: what the isolated timings price as the
    constant plain-layout op groups, :func:`graphtune.opgroups.pricing.fixed_cost_node`).

    Examples
    --------
    >>> plain_task("1").workload["node"], plain_task("1").workload["shape"]
    ('', [])
    """
    return Task(Op.IN_MODEL, {"model": model, "node": "", "in_layout": "", "out_layout": "",
                              "shape": [], "protocol": IN_MODEL_PROTOCOL})


def close_loop(graph: LayoutGraph, solution: Solution, transforms: MutableMapping[Pair, float], *,
               rounds: int, resolve: Callable[[Mapping[Pair, float]], tuple[Solution, Mapping[Pair, float]]],
               model: Any, model_key: str, store: Records, target: Any, key: dict, timing: str,
               shape_dict: Mapping[str, Sequence[int]] | None = None, name: str | None = None,
               progress: bool = True,
               host_ratio: Callable[[], float] | None = None) -> tuple[Solution, Feedback]:
    """Profile ``solution`` compiled, put the in-model costs in ``graph``, solve again; repeat.

    Parameters
    ----------
    graph : LayoutGraph
        The measured graph (candidates' costs are replaced in place).
    solution : Solution
        The first solve's.
    transforms : dict
        The layout transforms measured alone, to ms; extended in place by the re-solves.
    rounds : int
        At most this many models compiled and profiled.
    resolve : callable
        ``resolve(known) -> (solution, costs)``: fill the graph's edge costs (all reset)
        from ``known`` transform costs (measuring what else solutions run) and solve.
    model : onnx.ModelProto
        The model to compile.
    model_key : str
        Its :func:`model_hash`.
    store : Records
        Where in-model records are read and written.
    target, key, timing
        The compile target, its record description, and the runner's timing protocol.
    shape_dict, name
        Static input shapes, and the model's name for the configs.
    progress : bool
        A line per round on standard error.
    host_ratio : callable, optional
        A host-state gauge reading (:meth:`graphtune.hoststate.HandoffGauge.ratio`, the
        default, made once on the first round when more than one thread runs).

    Returns
    -------
    tuple
        The last solution, and :class:`Feedback`.
    """
    start = time.perf_counter()
    threads = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)
    if host_ratio is None and threads > 1:
        host_ratio = _gauge_reading()
    before = _predicted(graph, solution)
    in_model: dict[Pair, float] = {}

    def record(task: Task) -> Record | None:
        found = store.get(task, key, timing)
        return found if found is not None and found.ok else None

    isolated = {node: [c.cost for c in graph.candidates(node)]
                for node in graph.nodes if graph.op(node) in NODE_OPS}
    kinds = {node: [kind_of(c) for c in graph.candidates(node)] for node in isolated}
    sink = fixed_cost_node(graph)

    def refresh(solution: Solution) -> Solution:
        """Candidates' and transforms' costs from the in-model records, the others' scaled by
        their node's in-model / isolated ratio (:func:`in_model_costs`); solve again if any
        changed."""
        ran = {node: [record(node_task(model_key, node, c)) for c in graph.candidates(node)]
               for node in isolated}
        typical = typical_ratios(ran, isolated, kinds)
        costs = {node: in_model_costs(ran[node], row, typical, kinds[node]) for node, row in isolated.items()}
        changed = any(ms != c.cost for node, row in costs.items()
                      for ms, c in zip(row, graph.candidates(node)))
        for pair in transforms:
            found = record(transform_task(model_key, pair))
            if found is not None and in_model.get(pair) != found.median_ms:
                in_model[pair], changed = float(found.median_ms or 0.0), True
        plain = record(plain_task(model_key))
        if sink is not None and plain is not None:  # the constant: the calls no node owns
            costs[sink] = [float(plain.median_ms or 0.0)]
            changed = changed or costs[sink][0] != graph.candidates(sink)[0].cost
        if not changed:
            return solution
        for node, row in costs.items():  # every node: every edge is reset
            graph.set_candidates(node, [Candidate(c.knobs, c.in_layout, c.out_layout, ms)
                                        for c, ms in zip(graph.candidates(node), row)])
        ratio = _median([in_model[p] / transforms[p] for p in in_model if transforms.get(p, 0) > 0])
        scaled = {p: ms * ratio for p, ms in transforms.items() if p not in in_model}
        solved, known = resolve({**scaled, **in_model})
        transforms.update({p: ms for p, ms in known.items() if p not in in_model and p not in scaled})
        return solved

    def recorded_tasks() -> list[tuple[Task, Record]]:
        """Every in-model record of this model the graph's costs can come from."""
        tasks = [node_task(model_key, node, c) for node in isolated for c in graph.candidates(node)]
        tasks += [transform_task(model_key, pair) for pair in transforms] + [plain_task(model_key)]
        return [(task, found) for task in tasks if (found := record(task)) is not None]

    def recorded(assignment: Mapping[str, int]) -> bool:
        return all(record(node_task(model_key, n, graph.candidates(n)[i])) is not None
                   for n, i in assignment.items() if graph.op(n) in LAYOUT_OPS)

    solution = refresh(solution)
    measured: list[float] = []
    states: list[str] = []
    drifts: list[float] = []
    profiled: list[Solution] = []
    profiles = 0
    while not recorded(solution.assignment) and len(measured) < rounds:
        began = time.perf_counter()
        times, state, taken = _profile(graph, solution, model, target, shape_dict, name, host_ratio)
        measured.append(times.vm_ms)
        profiled.append(solution)
        states.append(state)
        profiles += taken
        new = [(node_task(model_key, n, graph.candidates(n)[solution.assignment[n]]), ms)
               for n, ms in times.nodes.items() if n in solution.assignment]
        new += [(transform_task(model_key, pair), ms) for pair, ms in times.transforms.items()]
        # the drift from the calls both profiles ran: not the unowned ones, which depend on the
        # solution (a bfloat16 node's input conversion) and may have been none (~0) before
        ratio = host_drift([(record(task), ms) for task, ms in new])
        new.append((plain_task(model_key), [max(ms, 1e-6) for ms in times.other]))  # none: ~0
        drifts.append(ratio)
        taken_now = {task.key for task, _ in new}
        if ratio > 1.0:  # a slower spell: this profile at the older profiles' host speed
            new = [(task, [ms / ratio for ms in times_ms]) for task, times_ms in new]
        elif ratio < 1.0:  # the older profiles at this faster one's
            new += [(task, [ms * ratio for ms in found.ms]) for task, found in recorded_tasks()
                    if task.key not in taken_now]
        for task, ms in new:  # the newest profile of a candidate replaces an older one
            store.append(Record.success(task, key, ms, threads=threads, timing=timing))
        solution = refresh(solution)
        if progress:
            print(f"feedback round {len(measured)}: measured {times.vm_ms:.3f} ms in the model "
                  f"({time.perf_counter() - began:.1f} s, {taken} profile(s), host {state}, "
                  f"host drift x{ratio:.2f}); predicted now "
                  f"{_predicted(graph, solution):.3f} ms", file=sys.stderr, flush=True)
    used = sum(record(node_task(model_key, n, c)) is not None
               for n in graph.nodes if graph.op(n) in NODE_OPS for c in graph.candidates(n))
    fastest = min(zip(measured, profiled), key=lambda pair: pair[0])[1] if profiled else None
    if fastest is not None and fastest.assignment == solution.assignment:
        fastest = None
    return solution, Feedback(len(measured), before, _predicted(graph, solution), measured,
                              recorded(solution.assignment), used + len(in_model),
                              time.perf_counter() - start, states, profiles, drifts, fastest)


def host_drift(pairs: Sequence[tuple[Record | None, Sequence[float]]]) -> float:
    """How much slower this profile ran than the recorded one: the median, over the tasks both
    timed, of the new median time over the recorded one (1 when none was timed before).

    ``pairs`` are the same calls in both profiles: a node's candidate or a transform, never the
    calls no node owns (:func:`plain_task`), which change with the solution.

    The host's speed drifts between rounds by more than candidates differ (a model profiled
    7.5 ms, then 9.0 ms with one node changed); the same calls timed in both profiles measure
    that drift, and whichever side ran slower is rescaled to the other's speed, so every
    in-model cost the solver compares is at one host speed, the fastest the loop has seen: a
    slow spell is what passes (``docs/timing.md``, "Closed loop").

    Examples
    --------
    >>> task = plain_task("1")
    >>> old = Record.success(task, {"kind": "llvm"}, [1.0], threads=1)
    >>> host_drift([(old, [1.2, 1.2]), (old, [1.3]), (None, [9.0])])
    1.25
    """
    ratios = [statistics.median(ms) / found.median_ms for found, ms in pairs
              if found is not None and found.median_ms and ms]
    return _median(ratios)


def in_model_costs(found: Sequence[Record | None], isolated: Sequence[float],
                   typical: Mapping[Any, float] | None = None,
                   kinds: Sequence[Any] | None = None) -> list[float]:
    """A node's candidates' costs: each in-model record's time, and the isolated cost of a
    candidate the model has not run times the median in-model / isolated ratio of the node's
    candidates of its kind that it has run (so that a candidate is not chosen for never having been
    profiled: the loop converges) -- unless that ratio is more than :data:`OUTLIER` times the
    model's typical ratio of the kind (``typical``, :func:`typical_ratios`), then times that: a
    penalty only the profiled candidate pays (a register tile of one pixel re-reading its
    weights from a cache the model fills with other data) must not price the node's other
    candidates out of the next solve, which profiles the one it takes instead. A kind the node
    has not run takes the model's typical ratio of that kind, else the node's ratio of the kinds
    it has run (the median, each as above).

    ``kinds`` tells the kernels apart (:func:`kind_of`: a node's float32 and bfloat16 candidates):
    the isolated timing is off by different factors for them (a bfloat16 conv on a 14x14 map ran
    in half its isolated time in the model, its float32 twin in its isolated time), so one kind's
    ratio does not price the other (``docs/timing.md``, "Closed loop").

    Examples
    --------
    >>> task = transform_task("1", ((1, 8, 4, 4), "NCHW", "NCHW8c", "float32"))
    >>> ran = Record.success(task, {"kind": "llvm"}, [1.5], threads=1)
    >>> in_model_costs([ran, None], [1.0, 2.0]), in_model_costs([ran, None], [1.0, 2.0], {None: 1.1})
    ([1.5, 3.0], [1.5, 2.2])
    >>> in_model_costs([ran, None, None], [1.0, 2.0, 2.0], {None: 1.5, "bfloat16": 0.5},
    ...                kinds=[None, None, "bfloat16"])
    [1.5, 3.0, 1.0]
    """
    kinds = [None] * len(found) if kinds is None else list(kinds)
    typical = typical or {}

    def ratio_of(kind: Any) -> float | None:
        own = _ratios([r for r, k in zip(found, kinds) if k == kind],
                      [m for m, k in zip(isolated, kinds) if k == kind])
        usual = typical.get(kind)
        if not own:
            return usual
        ratio = _median(own)
        return usual if usual is not None and ratio > OUTLIER * usual else ratio

    known = {kind: ratio_of(kind) for kind in dict.fromkeys(kinds)}
    fallback = _median([r for r in known.values() if r is not None])
    ratios = {kind: fallback if ratio is None else ratio for kind, ratio in known.items()}
    return [float(record.median_ms) if record is not None and record.median_ms is not None
            else ms * ratios[kind] for record, ms, kind in zip(found, isolated, kinds)]


def typical_ratios(found: Mapping[str, Sequence[Record | None]], isolated: Mapping[str, Sequence[float]],
                   kinds: Mapping[str, Sequence[Any]] | None = None) -> dict[Any, float]:
    """The model's typical in-model / isolated ratio per candidate kind: the median over nodes of
    each node's median ratio over its candidates of that kind with a record (nodes without one
    left out; kinds no node ran left out). ``kinds`` as :func:`in_model_costs` (default: one).

    Examples
    --------
    >>> task = transform_task("1", ((1, 8, 4, 4), "NCHW", "NCHW8c", "float32"))
    >>> ran = Record.success(task, {"kind": "llvm"}, [1.5], threads=1)
    >>> typical_ratios({"a": [ran, None], "b": [None]}, {"a": [1.0, 2.0], "b": [1.0]})
    {None: 1.5}
    >>> typical_ratios({"a": [ran, ran]}, {"a": [1.0, 3.0]}, {"a": [None, "bfloat16"]})
    {None: 1.5, 'bfloat16': 0.5}
    """
    per_kind: dict[Any, list[float]] = {}
    for node, records in found.items():
        labels = [None] * len(records) if kinds is None else list(kinds[node])
        for kind in dict.fromkeys(labels):
            ran = _ratios([r for r, k in zip(records, labels) if k == kind],
                          [m for m, k in zip(isolated[node], labels) if k == kind])
            if ran:
                per_kind.setdefault(kind, []).append(_median(ran))
    return {kind: _median(ratios) for kind, ratios in per_kind.items()}


def kind_of(candidate: Candidate) -> Any:
    """What sets a candidate's kernel apart from its node's others for :func:`in_model_costs`:
    its ``precision`` knob (None: the node's own op).

    Examples
    --------
    >>> kind_of(Candidate({"oc_bn": 16, "precision": "bfloat16"}, "NCHW16c", "NCHW16c", 1.0))
    'bfloat16'
    """
    return candidate.knobs.get(PRECISION)


def _ratios(found: Sequence[Record | None], isolated: Sequence[float]) -> list[float]:
    """In-model / isolated time of each candidate with a record."""
    return [r.median_ms / ms for r, ms in zip(found, isolated)
            if r is not None and r.median_ms is not None and ms > 0]


def _median(values: Sequence[float]) -> float:
    """The median of ``values``; 1 when there are none."""
    ordered = sorted(values)
    if not ordered:
        return 1.0
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _predicted(graph: LayoutGraph, solution: Solution) -> float:
    """The predicted latency of ``solution`` (ms): its candidates and the transforms it runs."""
    return float(sum(graph.candidates(n)[i].cost for n, i in solution.assignment.items())
                 + graph.transform_cost(solution.assignment))


def profile_in_shared_state(profile: Callable[[], profiling.CallTimes],
                            host_ratio: Callable[[], float] | None,
                            tries: int = PROFILES) -> tuple[profiling.CallTimes, str, int]:
    """Run ``profile`` with a host-state reading before and after, again while the readings do
    not both say the threads shared a cache or other work took the CPUs meanwhile
    (:mod:`graphtune.measure.contention`), at most ``tries`` times.

    Returns the first profile taken in the shared state, else the fastest (lowest ``vm_ms``);
    its state (:func:`graphtune.hoststate.state_of`; ``"shared"`` without a gauge, one thread;
    ``"contended"`` when other work took more than
    :data:`graphtune.measure.contention.LIMIT` of the CPUs); and the number of profiles taken.

    Examples
    --------
    >>> readings = iter([3.0, 2.9, 1.0, 1.1])  # split, then shared
    >>> runs = iter([5.0, 4.0])
    >>> slow_then_fast = lambda: profiling.CallTimes({}, {}, [], next(runs))
    >>> times, state, taken = profile_in_shared_state(slow_then_fast, readings.__next__)
    >>> times.vm_ms, state, taken
    (4.0, 'shared', 2)
    """
    gauge = host_ratio or (lambda: 1.0)  # no gauge (one thread): always the shared state
    best: tuple[profiling.CallTimes, str] | None = None
    for taken in range(1, max(1, tries) + 1):
        before = gauge()
        start = contention.read()
        times = profile()
        if contention.disturbed(contention.share(start, contention.read())) and contention.retakes():
            state = "contended"
        else:
            state = hoststate.state_of([before, gauge()])
        if state == "shared":
            return times, state, taken
        if best is None or times.vm_ms < best[0].vm_ms:
            best = (times, state)
    assert best is not None
    return best[0], best[1], taken


def _gauge_reading() -> Callable[[], float]:
    """A reading of a small host-state gauge (a handoff ratio), made once."""
    gauge = hoststate.HandoffGauge(megabytes=1.0)
    return lambda: gauge.ratio(calls=20)


def _profile(graph: LayoutGraph, solution: Solution, model: Any, target: Any,
             shape_dict: Mapping[str, Sequence[int]] | None, name: str | None,
             host_ratio: Callable[[], float] | None = None) -> tuple[profiling.CallTimes, str, int]:
    """Compile ``solution``'s config of ``model`` and time its calls in the model
    (:func:`profile_in_shared_state`): the times, the host state, the profiles taken."""
    import warnings

    from .compiler import compile as gt_compile
    from .config import Config

    config = Config.from_solution(graph, solution, model_name=name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        compiled = gt_compile(model, config, target, shape_dict=shape_dict)
    return profile_in_shared_state(
        lambda: profiling.call_times(compiled, config, model, REPEAT, seconds=PROFILE_SECONDS), host_ratio)
