"""``make demo``: tune and compile a zoo model on this machine, print the latency table.

Runs :func:`graphtune.tune` (measurements reused from the records file on
reruns), writes the config, then compiles gt-uniform, gt-kernel-best and
gt-graph and times them side by side with ONNX Runtime.

Examples
--------
.. code-block:: sh

    python -m graphtune.demo --model resnet18 --out out/
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence

__all__ = ["main", "LEGEND"]

LEGEND = """\
ort: ONNX Runtime; gt-uniform: graphtune, every node in 16-channel blocks, default knobs;
gt-kernel-best: each node its fastest kernel, layout transforms ignored; gt-graph: the tuned
config (the solver's optimum); predicted: what the tuner expects gt-graph to take;
prediction error: (measured - predicted) / measured."""
"""What the demo table's columns are, printed under it."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m graphtune.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18", help="zoo model name")
    parser.add_argument("--image-size", type=int, default=None)
    parser.add_argument("--max-candidates", type=int, default=32,
                        help="kernel candidates measured per workload")
    parser.add_argument("--out", default="out", help="folder for records, config and results")
    parser.add_argument("--repeat", type=int, default=30, help="timed rounds per runtime")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also show the samples and figures per host state (shared / split cache)")
    args = parser.parse_args(argv)

    from . import models, tune
    from .report import evaluate, markdown_table

    os.makedirs(args.out, exist_ok=True)
    records = os.path.join(args.out, f"{args.model}.records.jsonl")
    config_path = os.path.join(args.out, f"{args.model}.graphtune.json")
    model = models.get(args.model, image_size=args.image_size)
    print(f"tuning {args.model} (records: {records}; a rerun reuses them)")
    result = tune(model, records=records, max_candidates=args.max_candidates)
    result.config.save(config_path)
    print(result.summary())
    print("compiling and timing gt-uniform, gt-kernel-best, gt-graph and ONNX Runtime ...")
    row = evaluate(model, result, args.model, peers=["ort"], repeat=args.repeat)
    with open(os.path.join(args.out, f"{args.model}.e2e.json"), "w") as handle:
        json.dump(row, handle, indent=2)
    print()
    print(markdown_table([row], verbose=args.verbose))
    print(f"\nmedian latency in ms over {args.repeat} interleaved runs, "
          f"{row['threads']} threads; max |diff| vs ORT: "
          + ", ".join(f"{k} {v:.1e}" for k, v in row["max_abs_diff"].items() if k != "ort"))
    print(LEGEND)
    print(f"config written to {config_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
