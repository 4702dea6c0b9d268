"""Lazy vs all layout transforms: tuning seconds, transforms measured and the optimum, per model.

For each model the kernels and op groups come from ``--records`` (copied without its transform
records, so every transform is measured anew): ``graphtune.tune(transforms="lazy")`` runs on the
copy first, then ``transforms="all"`` on the same copy (it reuses the lazy run's transforms and
measures the rest). With an exact solver both must reach the same optimum (same measurements of
the transforms the lazy solution runs); the table shows each one's transforms phase, the
transforms it measured and its optimum. JSON per model: counts, seconds, energies, predicted ms.

Examples
--------
``python benchmarks/lazy_transforms.py --models efficientnet_b0 --records out/s25/zen.records.jsonl
--json lazy.json``
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import graphtune
from graphtune import models
from runinfo import footer, run_models


def without_transforms(source: str, target: str) -> None:
    """Copy the records file ``source`` to ``target`` leaving out every transform record."""
    with open(source) as src, open(target, "w") as dst:
        dst.writelines(line for line in src if json.loads(line).get("kind") != "transform")


def transform_lines(path: str) -> int:
    with open(path) as handle:
        return sum(json.loads(line).get("kind") == "transform" for line in handle)


def run_model(name: str, records: str, folder: str, max_candidates: int) -> dict:
    """Tune ``name`` lazily, then with every transform, on one copy of ``records``."""
    path = os.path.join(folder, f"{name}.lazy.records.jsonl")
    without_transforms(records, path)
    row = {"model": name}
    for mode in ("lazy", "all"):
        before = transform_lines(path)
        result = graphtune.tune(name, records=path, max_candidates=max_candidates,
                                transforms=mode, progress=False)
        row[mode] = {"transforms_s": result.phase_seconds["transforms"],
                     "tune_s": result.tune_seconds,
                     "new_transforms": transform_lines(path) - before,
                     "rounds": result.measured["transform_rounds"],
                     "energy_ms": result.solution.energy, "optimal": result.solution.optimal,
                     "predicted_ms": result.predicted_ms}
    row["pairs"] = len(result.graph.transform_pairs(missing_only=False))
    row["energy_diff_ms"] = abs(row["lazy"]["energy_ms"] - row["all"]["energy_ms"])
    return row


def table(rows: list[dict]) -> str:
    lines = ["| model | transform pairs | lazy: measured | rounds | transforms s | all: measured "
             "(more) | transforms s | optimum lazy / all ms | both proven |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lazy, full = r["lazy"], r["all"]
        lines.append(f"| {r['model']} | {r['pairs']} | {lazy['new_transforms']} | {lazy['rounds']} | "
                     f"{lazy['transforms_s']:.1f} | {full['new_transforms']} | "
                     f"{full['transforms_s']:.1f} | {lazy['energy_ms']:.4f} / {full['energy_ms']:.4f} | "
                     f"{lazy['optimal'] and full['optimal']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="mobilenet_v2,efficientnet_b0",
                        help=f"comma-separated zoo models; any of {', '.join(models.names())}")
    parser.add_argument("--records", required=True,
                        help="records holding the models' kernels and op groups (not modified)")
    parser.add_argument("--max-candidates", type=int, default=32,
                        help="kernel candidates per workload, as the records were tuned (default 32)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    names = args.models.split(",")
    unknown = [n for n in names if n not in models.names()]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(models.names())}")
    if not os.path.exists(args.records):
        parser.error(f"--records {args.records}: no such file")
    with tempfile.TemporaryDirectory() as folder:
        cpu, _ = run_models(names, lambda _, name: run_model(name, args.records, folder, args.max_candidates),
                            table, args.json)
    print("\n" + footer(cpu))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
