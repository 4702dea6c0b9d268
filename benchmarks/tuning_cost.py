"""Tuning cost: wall time of ``graphtune.tune`` and the accuracy of its prediction, per timing protocol.

For each model, ``graphtune.tune`` runs once per timing protocol (``long-repeats``,
formerly ``flush-v1``: repeats of >= 100 ms of kernel time; ``cold-output``, formerly
``flush-v2``: repeats of ~10 ms of wall time with the flush included, extra repeats
only when noisy, early cut-off of clearly slower candidates), each from an
empty records file, in alternating order. Then the two gt-graph models are
compiled and timed side by side in the same interleaved rounds, and each
protocol's prediction error is ``(measured - predicted) / measured``.

Also reported: how the two protocols' times of the same kernel candidates
agree (geomean and spread of new / old over the candidates both measured in
full), how many candidates were cut off, and the cost of the cache flush
itself: the kernel time vs the wall time of one flushed call of the model's
conv with the most weight bytes (the difference is the flush and the call).

JSON per model and protocol: phase seconds, seconds per kernel candidate
(kernels phase / candidates) and per transform, predicted and measured ms,
prediction error. A Markdown table is printed.

Examples
--------
``python benchmarks/tuning_cost.py --models resnet18,mobilenet_v2 --json cost.json``
``python benchmarks/tuning_cost.py --quick``  (resnet18 at 64x64, 4 candidates, 10 rounds)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile

import graphtune
from graphtune import models
from graphtune.measure import LocalRunner, Records
from graphtune.report import compare
from runinfo import footer, run_models

PROTOCOL_SETTINGS = {"long-repeats": {"min_repeat_ms": 100.0}, "cold-output": {"min_repeat_ms": 10.0}}
"""Each protocol with the repeat length it shipped with."""


def tune_with(model, name: str, timing: str, folder: str, max_candidates: int) -> tuple:
    """Tune ``model`` from an empty records file with protocol ``timing``; (result, records)."""
    path = os.path.join(folder, f"{name}.{timing}.records.jsonl")
    if os.path.exists(path):
        os.remove(path)  # every run measures from scratch
    with LocalRunner(timing=timing) as runner:  # workers serve both phases, as in tune()
        result = graphtune.tune(model, records=path, runner=runner,
                                max_candidates=max_candidates, progress=False,
                                **PROTOCOL_SETTINGS[timing])
    return result, list(Records.load(path))


def agreement(old: list, new: list) -> dict:
    """cold-output / long-repeats time ratios of the kernel candidates both protocols measured in full."""
    old_ms = {r.task: r.median_ms for r in old if r.ok and r.kind != "transform"}
    ratios = [r.median_ms / old_ms[r.task] for r in new
              if r.ok and r.cutoff_ms is None and r.task in old_ms]
    if not ratios:
        return {"candidates": 0}
    logs = [math.log(x) for x in ratios]
    return {"candidates": len(ratios), "geomean_new_over_old": math.exp(statistics.fmean(logs)),
            "p10": sorted(ratios)[len(ratios) // 10], "p90": sorted(ratios)[9 * len(ratios) // 10]}


def transform_model(records: list) -> dict:
    """How well ``ms = a + b * bytes`` per (src, dst) pair predicts the measured transforms.

    Leave-one-out: each transform of a pair with >= 3 measured shapes is
    predicted from a least-squares fit to the others; the relative errors are
    summarised (a model is only worth using in place of measurements if they
    are small).
    """
    import numpy as np

    pairs: dict = {}
    for r in records:
        if r.ok and r.kind == "transform":
            nbytes = math.prod(r.workload["shape"]) * 4
            pairs.setdefault((r.workload["src"], r.workload["dst"]), []).append((nbytes, r.median_ms))
    errors = []
    for points in pairs.values():
        if len(points) < 3:
            continue
        x, y = np.array(points, dtype=float).T
        for i in range(len(points)):
            keep = np.arange(len(points)) != i
            if len(set(x[keep])) < 2:
                continue
            b, a = np.polyfit(x[keep], y[keep], 1)
            errors.append(abs(a + b * x[i] - y[i]) / y[i])
    if not errors:
        return {"pairs": len(pairs), "predicted": 0}
    errors.sort()
    return {"pairs": len(pairs), "transforms": sum(map(len, pairs.values())),
            "predicted": len(errors), "median_abs_error": errors[len(errors) // 2],
            "p90_abs_error": errors[9 * len(errors) // 10], "max_abs_error": errors[-1]}


def flush_cost(records: list) -> dict:
    """Kernel ms vs wall ms of one flushed call of the conv with the most weight bytes."""
    from graphtune.measure import Task
    from graphtune.measure.build import build_task, prim_func_of
    from graphtune.measure.timing import time_library

    convs = [r for r in records if r.ok and r.kind == "conv2d" and r.cutoff_ms is None]
    biggest = max(convs, key=lambda r: (math.prod(r.workload["kernel"]), -r.median_ms))
    best = min((r for r in convs if r.workload == biggest.workload), key=lambda r: r.median_ms)
    task = Task(best.kind, best.workload, best.knobs)
    with tempfile.TemporaryDirectory() as folder:
        built = build_task(prim_func_of, task, graphtune.x86.host_target(), folder)
        out = time_library(built["path"], built["args"], repeat=3, min_repeat_ms=10)
    weight_mb = sum(math.prod(shape) * 4 for shape, _ in built["args"][1:-1]) / 1e6
    kernel = statistics.median(out["ms"])
    return {"workload": best.workload, "knobs": best.knobs, "weights_mb": weight_mb,
            "kernel_ms": kernel, "flushed_call_wall_ms": out["wall_ms"],
            "flush_and_call_ms": out["wall_ms"] - kernel}


def run_model(name: str, image_size: int | None, max_candidates: int, rounds: int,
              order: list[str], folder: str) -> dict:
    """Both protocols on one model: tuning cost, agreement, flush cost, prediction errors."""
    model = models.get(name, image_size=image_size)
    rows, records = {}, {}
    for timing in order:
        print(f"[{name}] tuning with {timing} ...", flush=True)
        result, records[timing] = tune_with(model, name, timing, folder, max_candidates)
        result.config.save(os.path.join(folder, f"{name}.{timing}.graphtune.json"))
        phases = dict(result.phase_seconds)
        kernels, transforms = result.measured["kernels"], result.measured["transforms"]
        rows[timing] = {
            "result": result,
            "phase_seconds": phases, "tune_s": result.tune_seconds,
            "kernels": kernels, "transforms": transforms,
            "s_per_kernel": phases["kernels"] / max(1, kernels),
            "s_per_transform": phases["transforms"] / max(1, transforms),
            "cut_off": sum(r.cutoff_ms is not None for r in records[timing]),
            "predicted_ms": result.predicted_ms,
        }
    current = records.get("cold-output") or records[order[-1]]
    flush = flush_cost(current)
    print(f"[{name}] timing both gt-graph models side by side ({rounds} rounds) ...", flush=True)
    configs = {f"gt-graph {t}": rows[t]["result"].config for t in order}
    measured = compare(model, configs, peers=[], repeat=rounds)
    for timing, row in rows.items():
        row["measured_ms"] = measured["latency_ms"][f"gt-graph {timing}"]
        row["prediction_error"] = (row["measured_ms"] - row["predicted_ms"]) / row["measured_ms"]
        del row["result"]
    return {"model": name, "image_size": image_size, "max_candidates": max_candidates,
            "protocols": rows,
            "agreement": agreement(records.get("long-repeats", []), records.get("cold-output", [])),
            "flush": flush, "transform_model": transform_model(current),
            "max_abs_diff": measured["max_abs_diff"], "rounds": rounds}


def table(results: list[dict]) -> str:
    """Markdown table: one line per model and protocol."""
    lines = ["| model | protocol | kernels | transforms | kernels s | transforms s | tune s "
             "| s / kernel | s / transform | cut off | predicted ms | measured ms | error |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for res in results:
        for timing, r in res["protocols"].items():
            p = r["phase_seconds"]
            lines.append(
                f"| {res['model']} | {timing} | {r['kernels']} | {r['transforms']} "
                f"| {p['kernels']:.0f} | {p['transforms']:.0f} | {r['tune_s']:.0f} "
                f"| {r['s_per_kernel']:.3f} | {r['s_per_transform']:.3f} | {r['cut_off']} "
                f"| {r['predicted_ms']:.2f} | {r['measured_ms']:.2f} "
                f"| {r['prediction_error']:+.1%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,resnet50,mobilenet_v2",
                        help=f"comma-separated zoo models; any of {', '.join(models.names())}")
    parser.add_argument("--max-candidates", type=int, default=32,
                        help="kernel candidates per workload (default 32)")
    parser.add_argument("--rounds", type=int, default=30,
                        help="interleaved rounds timing the tuned models (default 30)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: resnet18 at 64x64, 4 candidates, 10 rounds")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--protocols", default=",".join(PROTOCOL_SETTINGS),
                        help="comma-separated timing protocols to compare (default all)")
    parser.add_argument("--out", default=None,
                        help="keep the records and config files here (default: a temporary folder)")
    args = parser.parse_args(argv)
    names = args.models.split(",")
    unknown = [n for n in names if n not in models.names()]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(models.names())}")
    image_size, max_candidates, rounds = None, args.max_candidates, args.rounds
    if args.quick:
        names, image_size, max_candidates, rounds = ["resnet18"], 64, 4, 10
    protocols = args.protocols.split(",")
    if not set(protocols) <= set(PROTOCOL_SETTINGS):
        parser.error(f"--protocols: choose from {', '.join(PROTOCOL_SETTINGS)}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        cpu, results = run_models(
            names, lambda index, name: run_model(name, image_size, max_candidates, rounds,
                                                 protocols[::-1 if index % 2 else 1], args.out or scratch),
            table, args.json, protocol_settings=PROTOCOL_SETTINGS)
    for res in results:
        f, a = res["flush"], res["agreement"]
        print(f"{res['model']}: flushed call of the largest conv ({f['weights_mb']:.1f} MB of "
              f"weights): kernel {f['kernel_ms']:.3f} ms, wall {f['flushed_call_wall_ms']:.3f} ms; "
              f"new/old per candidate: geomean {a.get('geomean_new_over_old', math.nan):.3f} "
              f"(p10 {a.get('p10', math.nan):.3f}, p90 {a.get('p90', math.nan):.3f}, "
              f"{a['candidates']} candidates)")
        t = res["transform_model"]
        if t.get("predicted"):
            print(f"  transforms as a + b * bytes per layout pair (leave-one-out, {t['predicted']} of "
                  f"{t['transforms']}): median |error| {t['median_abs_error']:.0%}, "
                  f"p90 {t['p90_abs_error']:.0%}, max {t['max_abs_error']:.0%}")
    print("\n" + footer(cpu))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
