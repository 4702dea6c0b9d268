"""Measuring through a TVM RPC tracker: throughput with 1 and 2 servers, and agreement with local.

The same candidate set (ResNet-style conv2d candidates and layout
transforms) is measured three times from scratch: locally
(:class:`~graphtune.measure.LocalRunner`), through a loopback tracker with one
server, and with two servers (:class:`~graphtune.measure.RPCRunner`). For each
run: wall time (building included, worker start-up included), candidates
per second, and how far its medians are from the local ones for the same
candidate. A fourth run, ``rpc x1 alt``, alternates building and timing
(``build_ahead=False``) so that compiling here does not slow the loopback
server's kernels: its differences are the protocol's own. Prints a table and
writes JSON (``--json PATH``)::

    python benchmarks/rpc_scaling.py [--quick] [--json PATH]

Loopback servers share this machine's cores with the local build workers and
with each other, so two servers on a 2-core box show the protocol's overhead
and fault handling rather than real scaling; on N separate machines the
timing part divides by N until the local builds become the bottleneck.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import graphtune  # noqa: F401  (sets TVM_NUM_THREADS, which the servers inherit)
import graphtune.x86 as x86
from graphtune.measure import LocalRunner, RPCRunner, Task, measure
from loopback import LoopbackFleet  # benchmarks/loopback.py, next to this script

CONVS = [  # (data, kernel, padding): ResNet-style layers at small spatial size
    ([1, 64, 28, 28], [64, 64, 3, 3], [1, 1, 1, 1]),
    ([1, 128, 14, 14], [128, 128, 3, 3], [1, 1, 1, 1]),
    ([1, 256, 14, 14], [64, 256, 1, 1], [0, 0, 0, 0]),
]
TRANSFORMS = [("NCHW", "NCHW16c"), ("NCHW16c", "NCHW8c"), ("NCHW8c", "NCHW16c"),
              ("NCHW16c", "NCHW")]


def candidate_set(quick: bool) -> list[Task]:
    """Conv2d candidates of :data:`CONVS` and transforms of their input tensors."""
    convs = CONVS[:1] if quick else CONVS
    per_conv = 4 if quick else 8
    tasks = []
    for data, kernel, padding in convs:
        wl = x86.conv2d_workload(data, kernel, padding=padding)
        tasks += [Task("conv2d", wl, k) for k in x86.candidates(wl, max_candidates=per_conv)]
        tasks += [Task("transform", {"shape": data, "src": src, "dst": dst, "dtype": "float32"})
                  for src, dst in (TRANSFORMS[:2] if quick else TRANSFORMS)]
    return tasks


def run(name: str, tasks: list[Task], runner, timing: dict) -> dict:
    """Measure ``tasks`` from scratch with ``runner``; wall time and medians."""
    start = time.perf_counter()
    records = measure(tasks, runner=runner, records=None, progress=False, **timing)
    wall = time.perf_counter() - start
    return {"mode": name, "tasks": len(tasks), "ok": sum(r.ok for r in records),
            "wall_s": wall, "per_s": len(tasks) / wall, "target": records[0].target,
            "median_ms": {t.key: r.median_ms for t, r in zip(tasks, records)}}


def compare(row: dict, local: dict) -> None:
    """Add the largest and the median relative difference of ``row``'s medians to local's."""
    diffs = [abs(ms - local["median_ms"][key]) / local["median_ms"][key]
             for key, ms in row["median_ms"].items()
             if ms is not None and local["median_ms"].get(key) is not None]
    row["max_rel_diff"] = max(diffs) if diffs else None
    row["median_rel_diff"] = statistics.median(diffs) if diffs else None
    if diffs:
        worst = max(row["median_ms"], key=lambda k: (
            abs(row["median_ms"][k] - local["median_ms"][k]) / local["median_ms"][k]
            if row["median_ms"][k] is not None and local["median_ms"].get(k) else -1))
        row["worst_task"] = json.loads(worst)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6 tasks instead of 36")
    parser.add_argument("--json", help="write the results to this JSON file")
    args = parser.parse_args(argv)

    tasks = candidate_set(args.quick)
    timing = {"min_repeat_ms": 20 if args.quick else 50, "repeat": 3, "timeout": 120}
    rows = [run("local", tasks, LocalRunner(), timing)]
    for n_servers, build_ahead in ((1, True), (2, True), (1, False)):
        with LoopbackFleet(n_servers=n_servers) as fleet:
            runner = RPCRunner(fleet.tracker, fleet.key, build_ahead=build_ahead)
            name = f"rpc x{n_servers}" + ("" if build_ahead else " alt")
            rows.append(run(name, tasks, runner, timing))
    for row in rows[1:]:
        compare(row, rows[0])

    print(f"{len(tasks)} tasks, TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')}, "
          f"min_repeat_ms={timing['min_repeat_ms']}, repeat={timing['repeat']}")
    print(f"{'mode':10s} {'ok':>5s} {'wall s':>8s} {'cand/s':>7s} {'max rel diff':>13s} "
          f"{'median rel diff':>16s}")
    for row in rows:
        diff = row.get("max_rel_diff")
        med = row.get("median_rel_diff")
        print(f"{row['mode']:10s} {row['ok']:>2d}/{row['tasks']:<2d} {row['wall_s']:8.1f} "
              f"{row['per_s']:7.2f} {'' if diff is None else f'{diff:13.1%}':>13s} "
              f"{'' if med is None else f'{med:16.1%}':>16s}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"tasks": len(tasks), "timing": timing, "cpu_count": os.cpu_count(),
                       "threads": os.environ.get("TVM_NUM_THREADS"), "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
