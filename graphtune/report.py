"""Compare graphtune builds with peer runtimes, and print configs and results as tables.

:func:`compare` compiles each given config, checks every runtime's output
against the first peer's on the same random input, and times all of them
side by side (:func:`graphtune.latency.interleaved`). The CLI's ``bench`` and
``benchmarks/e2e.py`` both use it.

Examples
--------
>>> from graphtune import models
>>> from graphtune.config import Config
>>> model = models.get("resnet18", image_size=32)
>>> row = compare(model, {"gt-uniform": Config.uniform(model)}, peers=["ort"], repeat=3)
>>> sorted(row["latency_ms"])
['gt-uniform', 'ort']
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from .hoststate import HandoffGauge, by_state
from .latency import gauged_rounds, median_ms
from .numerics import max_abs_diff

__all__ = ["compare", "evaluate", "bench_model", "markdown_table", "runtimes", "config_table",
           "GAUGE_CALLS"]

GAUGE_CALLS = 20
"""Copy pairs of each kind per host-state gauge reading (:meth:`graphtune.hoststate.HandoffGauge.ratio`)
around every timed turn: the two states' ratios (about 1 and 4-10) are told apart by far fewer."""


def compare(model: Any, configs: Mapping[str, Any], peers: Sequence[str] = ("ort",),
            repeat: int = 30, warmup: int = 3, threads: int | None = None,
            seed: int = 0, peer_processes: int = 1) -> dict:
    """Latency and output agreement of graphtune builds and peers on one model.

    Peers run in processes of their own (:class:`graphtune.peers.PeerProcess`);
    graphtune's builds run in this one. With ``peer_processes`` > 1 the rounds
    are split between that many fresh processes of each peer, started one after
    the other: a peer process's speed is a draw (``docs/timing.md``).

    Parameters
    ----------
    model : onnx.ModelProto
        The model (as given to graphtune and the peers).
    configs : mapping of str to Config
        Build name (``gt-uniform``, ``gt-graph``...) -> config to compile with.
    peers : sequence of str
        Peer names of :data:`graphtune.peers.PEERS`; the first one (that runs) is
        the reference for ``max_abs_diff``. Peers whose package is missing are
        skipped (listed under ``skipped``); a peer that fails is listed under
        ``peer_errors``.
    repeat, warmup : int
        Timed and untimed interleaved rounds (``warmup`` per peer process).
    threads : int, optional
        Threads for the peers; default ``TVM_NUM_THREADS``, the count graphtune's
        runtime uses, for a like-for-like comparison.
    seed : int
        Seed of the random input.
    peer_processes : int
        Fresh processes per peer the rounds are split between (at most ``repeat``).

    Returns
    -------
    dict
        ``latency_ms`` (median per runtime), ``samples_ms``, ``max_abs_diff`` (per
        runtime, against the reference), ``max_rel_diff`` (the same over the largest
        absolute value of the reference's outputs: int8 runtimes differ by steps of the
        output scale), ``reference``, ``compile_s`` per build, ``threads``, ``peers`` (as
        given), ``skipped``, ``peer_errors`` (peer -> why it failed to start, crashed or
        hung: it is left out of the other fields, the others are timed without it),
        ``process_ms`` (per runtime, the median of each peer process's rounds); with
        several threads also ``handoff_ratio`` (per runtime, the host-state gauge right
        before and after each of its timed turns, ``[[before, after], ...]``,
        :class:`graphtune.hoststate.HandoffGauge`) and ``by_state`` (medians over the
        samples timed wholly in each state, those timed while it changed left out:
        :func:`graphtune.hoststate.by_state`).
    """
    from . import peers as peer_mod
    from .compiler import compile as gt_compile

    threads = int(threads or os.environ.get("TVM_NUM_THREADS") or cast(int, os.cpu_count()))
    names = [i.name for i in model.graph.input]
    rng = np.random.default_rng(seed)
    shapes = [[d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input]
    arrays = [rng.standard_normal(s).astype("float32") for s in shapes]
    feeds = dict(zip(names, arrays))

    outputs: dict[str, list[np.ndarray]] = {}
    skipped = [p for p in peers if not peer_mod.available(p)]
    started = [p for p in peers if p not in skipped]
    builds: dict[str, Any] = {}
    compile_s = {}
    for name, config in configs.items():
        compiled = gt_compile(model, config)
        compile_s[name] = compiled.compile_seconds
        result = compiled(*arrays)
        outputs[name] = result if isinstance(result, list) else [result]
        builds[name] = compiled.bound_call(*arrays)

    handoff = HandoffGauge() if threads > 1 else None
    gauge = (lambda: handoff.ratio(calls=GAUGE_CALLS)) if handoff is not None else None
    parts = max(1, min(peer_processes, repeat))
    peer_errors: dict[str, str] = {}
    part_results = [_timed_part(model, started, threads, feeds, builds, gauge, outputs,
                                peer_errors, repeat=repeat // parts + (part < repeat % parts),
                                warmup=warmup)
                    for part in range(parts)]

    order = [p for p in started if p not in peer_errors] + list(configs)
    sample_lists: dict[str, list[float]] = {name: [] for name in order}
    ratios: dict[str, list[list[float]]] = {name: [] for name in order}
    process_ms: dict[str, list[float]] = {name: [] for name in order}
    for part_samples, part_ratios in part_results:
        for name in order:
            sample_lists[name].extend(part_samples[name].tolist())
            process_ms[name].append(float(np.median(part_samples[name])))
            ratios[name].extend(part_ratios[name].tolist())

    reference = order[0] if order else None
    diffs = {name: max((max_abs_diff(a, b) for a, b in zip(outputs[name], outputs[reference])),
                       default=0.0)
             for name in order} if reference else {}
    scale = max((max_abs_diff(a, np.zeros_like(a)) for a in outputs[reference]), default=0.0) \
        if reference else 0.0
    samples = {name: np.asarray(sample_lists[name]) for name in order}
    row = {"latency_ms": median_ms(samples),
           "samples_ms": {k: v.tolist() for k, v in samples.items()},
           "max_abs_diff": diffs,
           "max_rel_diff": {name: diff / scale for name, diff in diffs.items()} if scale else {},
           "reference": reference, "compile_s": compile_s,
           "threads": threads, "peers": list(peers), "skipped": skipped,
           "peer_errors": peer_errors,
           "process_ms": process_ms}
    if gauge is not None:
        row.update(handoff_ratio=ratios, by_state=by_state(samples, ratios))
    return row


def _timed_part(model: Any, peer_names: Sequence[str], threads: int,
                feeds: Mapping[str, np.ndarray], builds: Mapping[str, Any],
                gauge: Callable[[], float] | None, outputs: dict[str, list[np.ndarray]],
                peer_errors: dict[str, str], repeat: int,
                warmup: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """One part of :func:`compare`'s rounds: a fresh process of each peer not failed so far and
    the builds, timed together (:func:`graphtune.latency.gauged_rounds`).

    A peer that fails to start, crashes or hangs (:class:`graphtune.peers.PeerFailure`) gets its
    message in ``peer_errors`` and the part is timed again without it: one peer's failure
    never costs the others their rounds. A peer's outputs (of its first process) go to
    ``outputs``.
    """
    from .peers import PeerFailure, PeerProcess

    while True:
        processes: dict[str, PeerProcess] = {}
        try:
            for name in peer_names:
                if name not in peer_errors:
                    processes[name] = PeerProcess(name, model, threads, feeds)
                    outputs.setdefault(name, processes[name].outputs)
            return gauged_rounds({**processes, **builds}, gauge, repeat=repeat, warmup=warmup)
        except PeerFailure as err:
            peer_errors[err.peer] = str(err)
        finally:
            for process in processes.values():
                process.close()


def evaluate(model: Any, result: Any, name: str, peers: Sequence[str] = ("ort", "openvino"),
             repeat: int = 30, extra: Mapping[str, Any] | None = None,
             kernel_best: bool = True, peer_processes: int = 1, ort: str = "ort") -> dict:
    """The e2e row of a tuned model: peers, gt-uniform, gt-kernel-best, gt-graph, predicted.

    Parameters
    ----------
    model : onnx.ModelProto
        The tuned model.
    result : graphtune.TuneResult
        What :func:`graphtune.tune` returned for it.
    name : str
        Model name for the row.
    peers : sequence of str
        Peer runtimes; the first is the reference for ``max_abs_diff``.
    repeat : int
        Timed interleaved rounds.
    extra : mapping of str to Config, optional
        More builds to time alongside (e.g. ``{"gt-random": Config.random(model)}``).
    kernel_best : bool, default True
        Also time ``gt-kernel-best`` (each node its fastest kernel, transforms ignored).
    peer_processes : int, default 1
        Fresh processes per peer the rounds are split between (see :func:`compare`).
    ort : str, default "ort"
        The peer ``speedup_vs_ort`` divides (``ort-int8`` for a quantized model).

    Returns
    -------
    dict
        :func:`compare`'s fields plus ``model``, ``predicted_ms``, ``speedup_vs_ort``
        (``ort`` / gt-graph), ``speedup_vs_uniform``, ``prediction_error``
        ((measured - predicted) / measured), ``tune_s``, ``phase_seconds``, ``solver``;
        per host state seen while timing (``shared`` / ``split``, :mod:`graphtune.hoststate`)
        ``rounds_STATE`` (the fewer of ORT's and gt-graph's samples timed wholly in it),
        ``speedup_vs_ort_STATE`` and ``prediction_error_STATE``.

    Examples
    --------
    >>> import os, tempfile, graphtune
    >>> records = os.path.join(tempfile.gettempdir(), "graphtune-doctest-resnet18-32.records.jsonl")
    >>> result = graphtune.tune("resnet18", image_size=32, max_candidates=2, records=records)
    >>> model = graphtune.models.get("resnet18", image_size=32)
    >>> row = evaluate(model, result, "resnet18", repeat=3, peers=["ort"])
    >>> sorted(row["latency_ms"]), row["predicted_ms"] == result.predicted_ms
    (['gt-graph', 'gt-kernel-best', 'gt-uniform', 'ort'], True)
    """
    from .config import Config
    from .pipeline import kernel_best_solution

    configs = {"gt-uniform": Config.uniform(model)}
    if kernel_best:
        configs["gt-kernel-best"] = Config.from_solution(
            result.graph, kernel_best_solution(result.graph), model_name=name)
    configs.update({"gt-graph": result.config, **(extra or {})})
    row = {"model": name, **compare(model, configs, peers=peers, repeat=repeat,
                                    peer_processes=peer_processes)}
    lat = row["latency_ms"]
    graph_ms = lat["gt-graph"]
    sol = result.solution
    row.update(
        predicted_ms=result.predicted_ms,
        speedup_vs_ort=lat[ort] / graph_ms if ort in lat else None,
        speedup_vs_uniform=lat["gt-uniform"] / graph_ms,
        prediction_error=(graph_ms - result.predicted_ms) / graph_ms,
        tune_s=result.tune_seconds,
        phase_seconds=dict(result.phase_seconds),
        measured=dict(result.measured),
        solver={"method": sol.method, "optimal": bool(sol.optimal), "gap": sol.relative_gap,
                "energy": sol.energy, "lower_bound": sol.lower_bound, "seconds": sol.seconds},
    )
    for state, part in row.get("by_state", {}).items():
        state_ms = part["latency_ms"]
        row[f"rounds_{state}"] = min(part["samples"][n] for n in (ort, "gt-graph")
                                     if n in part["samples"])
        if "gt-graph" not in state_ms:
            continue
        if ort in state_ms:
            row[f"speedup_vs_ort_{state}"] = state_ms[ort] / state_ms["gt-graph"]
        row[f"prediction_error_{state}"] = (state_ms["gt-graph"] - result.predicted_ms) / state_ms["gt-graph"]
    return row


def bench_model(model: Any, config: str | os.PathLike | None = None,
                peers: Sequence[str] = ("ort",), image_size: int | None = None,
                repeat: int = 30) -> dict:
    """``graphtune bench``: gt-uniform (and a given config) against peers on one model.

    Examples
    --------
    >>> row = bench_model("resnet18", image_size=32, repeat=3)
    >>> sorted(row["latency_ms"]), row["max_abs_diff"]["gt-uniform"] < 1e-3
    (['gt-uniform', 'ort'], True)
    """
    from .config import Config
    from .models.resolve import resolve

    proto, name = resolve(model, image_size=image_size)
    configs = {"gt-uniform": Config.uniform(proto)}
    if config is not None:
        configs["gt-config"] = Config.load(config)
        configs["gt-config"].check(proto)  # a mismatch fails before any peer starts
    row = compare(proto, configs, peers=peers, repeat=repeat)
    row["model"] = name
    return row


def _fmt(value: Any, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


SUMMARY_COLUMNS = {
    "predicted_ms": ("predicted", ".2f"),
    "speedup_vs_ort": ("ORT/gt-graph", ".2f"),
    "speedup_vs_uniform": ("uniform/gt-graph", ".2f"),
    "prediction_error": ("prediction error", "+.1%"),
    "tune_s": ("tuning s", ".1f"),
}
"""Row fields :func:`markdown_table` shows after the latencies: field -> (header, format)."""

STATE_COLUMNS = {
    f"{field}_{state}": (f"{header} ({state})", spec)
    for state in ("shared", "split")
    for field, header, spec in (("rounds", "samples", "d"), ("speedup_vs_ort", "ORT/gt-graph", ".2f"),
                                ("prediction_error", "prediction error", "+.1%"))
}
"""Host-state fields (:mod:`graphtune.hoststate`) shown only by ``markdown_table(verbose=True)``:
per state, the samples timed wholly in it and the ratios over those samples."""


def _state_fields(row: Mapping[str, Any]) -> dict:
    """``rounds_STATE`` from a row's ``by_state`` (a :func:`compare` row has no ``rounds_*``), then
    the row's own state fields."""
    fields = {f"rounds_{state}": part["rounds"] for state, part in (row.get("by_state") or {}).items()}
    return {**fields, **{k: v for k, v in row.items() if k in STATE_COLUMNS}}


def runtimes(row: Mapping[str, Any]) -> list[str]:
    """The runtimes of a :func:`compare` row in table order: its peers as asked for (``peers``),
    the failed ones (``peer_errors``) included, then graphtune's builds.

    Examples
    --------
    >>> runtimes({"peers": ["ort", "openvino"], "peer_errors": {"ort": "crashed"},
    ...           "latency_ms": {"openvino": 2.0, "gt-graph": 1.0}})
    ['ort', 'openvino', 'gt-graph']
    """
    failed = row.get("peer_errors") or {}
    asked = row.get("peers") or list(failed)
    peers = [p for p in asked if p in failed or p in row["latency_ms"]]
    return peers + [name for name in row["latency_ms"] if name not in peers]


def markdown_table(rows: Sequence[Mapping[str, Any]], verbose: bool = False) -> str:
    """Markdown table of latency medians (ms), one row per model, one column per runtime; a
    peer that failed on a model (its ``peer_errors``) has ``error`` there.

    Then, where the rows have them, the prediction (``predicted``), the speed-ups
    over ONNX Runtime and over gt-uniform, the prediction error and the tuning time
    (:data:`SUMMARY_COLUMNS`). With ``verbose``, also the host-state columns: per
    state (``shared`` / ``split`` cache, :mod:`graphtune.hoststate`) the samples timed
    in it and the figures over those samples (:data:`STATE_COLUMNS`); they are in the
    JSON rows either way.

    Examples
    --------
    >>> row = {"model": "m", "latency_ms": {"ort": 2.0, "gt-graph": 1.0}, "speedup_vs_ort": 2.0,
    ...        "rounds_shared": 3, "speedup_vs_ort_shared": 2.1}
    >>> print(markdown_table([row]))
    | model | ort | gt-graph | ORT/gt-graph |
    |---|---|---|---|
    | m | 2.00 | 1.00 | 2.00 |
    >>> print(markdown_table([row], verbose=True))
    | model | ort | gt-graph | ORT/gt-graph | samples (shared) | ORT/gt-graph (shared) |
    |---|---|---|---|---|---|
    | m | 2.00 | 1.00 | 2.00 | 3 | 2.10 |
    """
    columns: list[str] = []
    for row in rows:
        columns += [c for c in runtimes(row) if c not in columns]
    values = [{**row, **(_state_fields(row) if verbose else {})} for row in rows]
    shown = {**SUMMARY_COLUMNS, **(STATE_COLUMNS if verbose else {})}
    extras = [e for e in shown if any(e in row for row in values)]
    head = ["model", *columns, *(shown[e][0] for e in extras)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in values:
        cells = [row["model"], *("error" if c in (row.get("peer_errors") or {})
                                 else _fmt(row["latency_ms"].get(c)) for c in columns)]
        cells += [_fmt(row.get(e), shown[e][1]) for e in extras]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def config_table(config: Any) -> str:
    """Per-node table of a config (layouts, knobs, cost) with totals and solver status.

    A tuned config also lists its op groups: every PrimFunc the compiled model
    runs around the bare kernels (fused epilogues, pools, joins, the head), the
    node whose layout it runs in (``(plain)``: a constant cost) and its measured
    ms. A node's ``cost_ms`` is its kernel plus its op groups.

    Examples
    --------
    >>> from graphtune.config import Config, NodeConfig
    >>> node = NodeConfig("dense", {"data": [1, 8], "weight": [4, 8], "dtype": "float32"},
    ...                   "NC", "NC", {"oc_bn": 4}, 0.01)
    >>> print(config_table(Config({"fc": node}, model={"name": "toy"})))  # doctest: +NORMALIZE_WHITESPACE
    model toy: 1 nodes
    node  op     in  out  cost_ms  knobs
    fc    dense  NC  NC   0.0100   oc_bn=4
    kernels 0.0100 ms
    """
    rows = [("node", "op", "in", "out", "cost_ms", "knobs")]
    total = 0.0
    for name, node in config.nodes.items():
        total += node.cost_ms or 0.0
        knobs = " ".join(f"{k}={v}" for k, v in node.knobs.items())
        rows.append((name, node.op, node.in_layout, node.out_layout, _fmt(node.cost_ms, ".4f"),
                     knobs))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    body = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    model = (config.model or {}).get("name") or "?"
    lines = [f"model {model}: {len(config.nodes)} nodes", *body, f"kernels {total:.4f} ms"]
    sol = config.solution or {}
    groups = sol.get("op_groups") or []
    if groups:
        group_rows = [("op groups", "node", "layout", "ms")] + [
            (label, node or "(plain)", layout, _fmt(ms, ".4f")) for node, layout, label, ms in groups]
        widths = [max(len(r[i]) for r in group_rows) for i in range(4)]
        lines += ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in group_rows]
        lines.append(f"ops {sum(g[3] for g in groups):.4f} ms")
    if "predicted_ms" in sol:
        status = "proven optimal" if sol.get("optimal") else f"gap {sol.get('gap', 0):.2%}"
        ops = f" + ops {sol['ops_ms']:.4f}" if "ops_ms" in sol else ""
        lines.append(f"predicted {sol['predicted_ms']:.4f} ms (kernels {sol['kernel_ms']:.4f}{ops} + "
                     f"transforms {sol['transform_ms']:.4f}); {sol['method']}, {status}, "
                     f"solved in {sol['solve_s']:.3f} s")
    return "\n".join(lines)
