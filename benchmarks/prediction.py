"""Prediction error with and without the op groups in the objective, side by side.

For each model: ``graphtune.tune`` (kernels, op groups, transforms; records in
``OUT/MODEL.records.jsonl``), then the same graph without op costs solved
again — what graphtune predicted and chose before op groups were costed
("before": kernels + transforms only) — and both configs compiled and timed in
the same interleaved rounds. Prints per model: predicted and measured ms of
each, prediction error ((predicted - measured) / measured), op groups' share
of the prediction. ``--json PATH`` writes the rows.

Examples
--------
``python benchmarks/prediction.py --models resnet18,efficientnet_b0 --max-candidates 4
--json out/prediction.json``
``python benchmarks/prediction.py --quick``  (resnet18 and efficientnet_b0 at 64x64, 2 candidates)
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys

import numpy as np

import graphtune
from graphtune import models
from graphtune.config import Config
from graphtune.graph import Candidate
from graphtune.latency import interleaved, median_ms
from graphtune.solve import solve


def without_ops(result) -> "graphtune.graph.LayoutGraph":
    """A copy of the tuned graph with the op costs taken out of its candidates (the old objective)."""
    graph = copy.deepcopy(result.graph)
    ops = result.ops
    for node in graph.nodes:
        cands = graph.candidates(node)
        if graph.op(node) == "boundary":
            extra = [0.0] * len(cands) if graph.nx.out_degree(node) else [c.cost for c in cands]
        else:
            extra = [ops.per_layout.get((node, c.out_layout), 0.0) for c in cands]
        graph.set_candidates(node, [Candidate(c.knobs, c.in_layout, c.out_layout, c.cost - e)
                                    for c, e in zip(cands, extra)])
    for u, v, data in graph.nx.edges(data=True):  # same candidate layouts: same transform costs
        data["cost"] = result.graph.nx.edges[u, v]["cost"]
    return graph


def run(name: str, image_size: int | None, max_candidates: int, out: str, repeat: int) -> dict:
    """Tune one model, solve it with and without op costs, time both side by side."""
    result = graphtune.tune(name, image_size=image_size, max_candidates=max_candidates,
                            records=os.path.join(out, f"{name}.records.jsonl"),
                            transforms="all")  # re-solved below with other node costs
    old_graph = without_ops(result)
    old = solve(old_graph)
    old_config = Config.from_solution(old_graph, old, model_name=name)
    model = models.get(name, image_size=image_size)
    compiled = {"before": graphtune.compile(model, old_config),
                "after": graphtune.compile(model, result.config)}
    shape = compiled["after"].inputs[0][1]
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    ms = median_ms(interleaved({k: (lambda c=c: c(x)) for k, c in compiled.items()}, repeat=repeat))
    row = {"model": name, "image_size": image_size, "max_candidates": max_candidates,
           "before_predicted_ms": float(old.energy), "before_measured_ms": ms["before"],
           "after_predicted_ms": result.predicted_ms, "after_measured_ms": ms["after"],
           "after_kernel_ms": result.kernel_ms, "after_ops_ms": result.ops_ms,
           "after_transform_ms": result.transform_ms, "op_groups": len(result.op_groups),
           "measured": result.measured, "phase_seconds": result.phase_seconds}
    for when in ("before", "after"):
        row[f"{when}_error"] = row[f"{when}_predicted_ms"] / row[f"{when}_measured_ms"] - 1
    return row


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,mobilenet_v2,efficientnet_b0,"
                        "mobilenet_v3_large,googlenet", help="comma-separated zoo models")
    parser.add_argument("--image-size", type=int, default=None, help="default: each model's own")
    parser.add_argument("--max-candidates", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=20, help="interleaved rounds (default 20)")
    parser.add_argument("--out", default="out", help="records folder (default out/)")
    parser.add_argument("--quick", action="store_true",
                        help="resnet18 and efficientnet_b0 at 64x64, 2 candidates, 10 rounds")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.image_size, args.max_candidates, args.repeat = \
            "resnet18,efficientnet_b0", 64, 2, 10
    os.makedirs(args.out, exist_ok=True)
    rows = []
    print("| model | before predicted | before measured | before error | after predicted | "
          "after measured | after error | ops ms | op groups |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        row = run(name, args.image_size, args.max_candidates, args.out, args.repeat)
        rows.append(row)
        print(f"| {name} | {row['before_predicted_ms']:.2f} | {row['before_measured_ms']:.2f} | "
              f"{row['before_error']:+.1%} | {row['after_predicted_ms']:.2f} | "
              f"{row['after_measured_ms']:.2f} | {row['after_error']:+.1%} | "
              f"{row['after_ops_ms']:.2f} | {row['op_groups']} |", flush=True)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump({"cpu": platform.processor(), "threads": os.environ.get("TVM_NUM_THREADS"),
                           "rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
