"""End-to-end latency: graphtune's tuned models against ONNX Runtime and OpenVINO (batch 1, fp32).

For each model: ``graphtune.tune`` (measurements reused from
``OUT/MODEL.records.jsonl`` on reruns; ``make demo`` uses the same files), then, timed side by side in the same
interleaved rounds with the same thread count:

- ``ort`` (ONNX Runtime, no spinning), ``openvino`` (fp32 forced; OpenVINO
  defaults to bf16 on AVX512-BF16 CPUs: ``--bf16`` adds ``openvino-bf16``
  as its own column),
- ``gt-uniform`` (16c everywhere, default knobs: the "default heuristic"),
- ``gt-kernel-best`` (each node its fastest measured kernel, transforms
  ignored when choosing: the old "history best"),
- ``gt-graph`` (the solver's optimum) and ``predicted`` (its objective),
- with ``--random``, ``gt-random`` (a random candidate per node: many transforms).

JSON per model: every latency, ``speedup_vs_ort`` (ort / gt-graph),
``speedup_vs_uniform``, ``prediction_error`` ((measured - predicted) /
measured), ``max_abs_diff`` vs ORT, tuning wall time and solver status. The
measured layout graphs are saved to ``OUT/MODEL.graph.json`` for
``benchmarks/solvers.py --graphs OUT``. A Markdown table is printed.

Examples
--------
``python benchmarks/e2e.py --models resnet18,resnet50,ssd_resnet50_512 --json e2e.json``
``python benchmarks/e2e.py --quick``  (resnet18 at 64x64, 4 candidates, few repeats: a smoke run)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import graphtune
from graphtune import models, x86
from graphtune.config import Config
from graphtune.report import evaluate, markdown_table


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,resnet50,ssd_resnet50_512",
                        help=f"comma-separated zoo models; any of {', '.join(models.names())}")
    parser.add_argument("--image-size", type=int, default=None,
                        help="input height/width (default: each model's own)")
    parser.add_argument("--max-candidates", type=int, default=32,
                        help="kernel candidates measured per workload (default 32)")
    parser.add_argument("--repeat", type=int, default=30, help="timed interleaved rounds (default 30)")
    parser.add_argument("--peers", default="ort,openvino", help="peer runtimes (default ort,openvino)")
    parser.add_argument("--bf16", action="store_true", help="also time OpenVINO in its default bf16")
    parser.add_argument("--random", action="store_true", help="also time a random per-node config")
    parser.add_argument("--out", default="out",
                        help="records, configs and graphs folder (default out/, shared with make demo)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: resnet18 at 64x64, 4 candidates, 5 rounds")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    if args.quick:
        if args.models == parser.get_default("models"):
            names = ["resnet18"]
        args.image_size = args.image_size or 64
        args.max_candidates, args.repeat = 4, 5
    peers = [p for p in args.peers.split(",") if p] + (["openvino-bf16"] if args.bf16 else [])
    os.makedirs(args.out, exist_ok=True)

    rows = []
    for name in names:
        model = models.get(name, image_size=args.image_size)
        tag = name if args.image_size is None else f"{name}@{args.image_size}"
        print(f"== {tag}: tuning", flush=True)
        result = graphtune.tune(model, records=os.path.join(args.out, f"{tag}.records.jsonl"),
                                max_candidates=args.max_candidates)
        result.config.save(os.path.join(args.out, f"{tag}.graphtune.json"))
        with open(os.path.join(args.out, f"{tag}.graph.json"), "w") as handle:
            handle.write(result.graph.to_json())
        print(result.summary(), flush=True)
        extra = {"gt-random": Config.random(model, seed=0)} if args.random else {}
        row = evaluate(model, result, tag, peers=peers, repeat=args.repeat, extra=extra)
        rows.append(row)
        print(markdown_table([row]), "\n", flush=True)

    print(markdown_table(rows))
    if args.json:
        import tvm

        report = {"benchmark": "e2e", "target": x86.target_key(), "tvm": tvm.__version__,
                  "python": platform.python_version(), "machine": platform.processor() or
                  platform.machine(), "repeat": args.repeat, "max_candidates": args.max_candidates,
                  "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "loadavg": os.getloadavg(), "results": rows}
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
