"""Tuning cost per kernel candidate by precision: a model's fp32 candidates against its int8 form's.

For each zoo model, the kernel candidates ``graphtune.tune`` measures (``--max-candidates``
per workload, timed as ``tune`` times them) are built and timed from an empty records
file: once for the fp32 model, once for its int8 QDQ form (:func:`graphtune.quantize` on
``e2e.py``'s seeded calibration inputs). The int8 form's candidates are two sets, timed
apart: its int8 kernels, and the fp32 alternatives of its quantized nodes (precision is part
of a node's format, so ``tune`` measures both). One kept ``LocalRunner`` and the default
timing protocol serve every set; the sets run in alternating order per model, so that
neither always comes first on a warming machine.

Reported per model and set: candidates, wall seconds of their ``measure`` call (builds in
parallel worker processes, then timing), seconds per candidate; and int8 / fp32 seconds per
candidate (the int8 issue asks for at most 1.5x).

Examples
--------
``python benchmarks/precision_cost.py --models resnet50,mobilenet_v2 --json cost.json``
``python benchmarks/precision_cost.py --quick``  (resnet18 at 64x64, 2 candidates)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import onnx

import graphtune
from e2e import calibration_data  # the int8 benchmark's seeded calibration
from graphtune import models
from graphtune.measure import LocalRunner, Task, measure
from graphtune.ops import INT8_OPS, LAYOUT_OPS, timed_as
from runinfo import footer, run_models


def kernel_tasks(model: onnx.ModelProto, target, max_candidates: int) -> list[Task]:
    """The distinct kernel tasks ``tune`` measures for ``model``, in node order.

    Examples
    --------
    >>> tasks = kernel_tasks(models.get("resnet18", image_size=32), None, 1)
    >>> len(tasks) > 0 and {t.kind for t in tasks} <= {"conv2d", "dense"}
    True
    """
    graph = graphtune.extract(model, target, max_candidates)
    tasks = [Task(*timed_as(graph.op(node), graph.workload(node), candidate.knobs))
             for node in graph.nodes if graph.op(node) in LAYOUT_OPS
             for candidate in graph.candidates(node)]
    return list(dict.fromkeys(tasks))


def split_by_precision(tasks: list[Task]) -> dict[str, list[Task]]:
    """``{"int8": ..., "fp32 alternatives": ...}``: an int8 model's int8 kernels and the rest.

    Examples
    --------
    >>> wl = graphtune.x86.conv2d_workload([1, 8, 4, 4], [8, 8, 1, 1])
    >>> sets = split_by_precision([Task("conv2d", wl, {"ic_bn": 8})])
    >>> [len(v) for v in sets.values()]
    [0, 1]
    """
    int8 = [t for t in tasks if t.kind in INT8_OPS]
    return {"int8": int8, "fp32 alternatives": [t for t in tasks if t.kind not in INT8_OPS]}


def time_sets(sets: dict[str, list[Task]], runner: LocalRunner, folder: str) -> dict[str, dict]:
    """Measure each set from its own empty records file; candidates, seconds, failures per set."""
    first = next(tasks for tasks in sets.values() if tasks)
    measure(first[:1], records=None, runner=runner, progress=False)  # warm-up: starts the workers
    out = {}
    for label, tasks in sets.items():
        if not tasks:
            continue
        path = os.path.join(folder, f"{label.replace(' ', '-')}.records.jsonl")
        if os.path.exists(path):
            os.remove(path)  # every set is measured from scratch
        start = time.perf_counter()
        records = measure(tasks, records=path, runner=runner, desc=label)
        seconds = time.perf_counter() - start
        out[label] = {"candidates": len(tasks), "seconds": seconds,
                      "s_per_candidate": seconds / len(tasks),
                      "failed": sum(not r.ok for r in records)}
    return out


def run_model(name: str, image_size: int | None, max_candidates: int, flip: bool,
              runner: LocalRunner, folder: str) -> dict:
    """fp32 and int8 candidates of one zoo model: :func:`time_sets` of each, and the ratio."""
    model = models.get(name, image_size=image_size)
    print(f"[{name}] quantizing ...", flush=True)
    qdq = graphtune.quantize(model, calibration_data(model))
    target = runner.resolve_target(None)
    sets = {"fp32": kernel_tasks(model, target, max_candidates),
            **split_by_precision(kernel_tasks(qdq, target, max_candidates))}
    order = list(sets)[::-1] if flip else list(sets)
    timed = time_sets({label: sets[label] for label in order}, runner, folder)
    ratio = (timed["int8"]["s_per_candidate"] / timed["fp32"]["s_per_candidate"]
             if "int8" in timed and "fp32" in timed else None)
    return {"model": name, "image_size": image_size, "max_candidates": max_candidates,
            "order": order, "sets": timed, "int8_over_fp32": ratio}


def table(results: list[dict]) -> str:
    """Markdown table: one line per model and candidate set."""
    lines = ["| model | candidates of | candidates | failed | seconds | s / candidate | vs fp32 |",
             "|---|---|---|---|---|---|---|"]
    for res in results:
        fp32 = res["sets"].get("fp32", {}).get("s_per_candidate")
        for label, row in res["sets"].items():
            ratio = f"{row['s_per_candidate'] / fp32:.2f}x" if fp32 else "-"
            lines.append(f"| {res['model']} | {label} | {row['candidates']} | {row['failed']} "
                         f"| {row['seconds']:.1f} | {row['s_per_candidate']:.3f} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet50,mobilenet_v2",
                        help=f"comma-separated zoo models; any of {', '.join(models.names())}")
    parser.add_argument("--max-candidates", type=int, default=4,
                        help="kernel candidates per workload (default 4, as the int8 suite)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: resnet18 at 64x64, 2 candidates")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    names = args.models.split(",")
    unknown = [n for n in names if n not in models.names()]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(models.names())}")
    if args.max_candidates < 1:
        parser.error("--max-candidates must be >= 1")
    image_size, max_candidates = None, args.max_candidates
    if args.quick:
        names, image_size, max_candidates = ["resnet18"], 64, 2
    with tempfile.TemporaryDirectory() as folder, LocalRunner() as runner:
        cpu, _ = run_models(names, lambda index, name: run_model(name, image_size, max_candidates,
                                                                 index % 2 == 1, runner, folder),
                            table, args.json)
    print("\n" + footer(cpu))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
