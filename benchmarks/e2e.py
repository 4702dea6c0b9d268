"""End-to-end latency: ONNX Runtime vs graphtune-compiled models (batch 1, fp32).

For each model, graphtune compiles it with ``Config.uniform`` (every node block
16, default knobs: the baseline graph tuning must beat) and, for contrast, with
``Config.random`` (a random candidate per node: many layout transforms). All
runners are timed in the same rounds, their order rotated each round, with a
pause between runners (ONNX Runtime's spinning threads otherwise slow the next
one). Reports medians, ratios to ONNX Runtime, compile times and the largest
output difference to ONNX Runtime.

Examples
--------
``python benchmarks/e2e.py --models resnet50 --json e2e.json``
``python benchmarks/e2e.py --quick``  (resnet18 at 64x64, few repeats: a smoke run)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

import graphtune  # noqa: F401  (sets TVM_NUM_THREADS before TVM starts)
from graphtune import models, x86
from graphtune.compile import compile
from graphtune.config import Config

__all__ = ["main", "bench_model", "ort_session"]

CONFIGS = {
    "uniform": lambda model, seed: Config.uniform(model, block=16),
    "random": lambda model, seed: Config.random(model, seed=seed),
}


def ort_session(model, threads: int):
    """ONNX Runtime CPU session with ``threads`` intra-op threads and no spinning."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _time_ort(session, feed: dict, repeat: int) -> list[float]:
    """``repeat`` wall-clock latencies (ms) of one ONNX Runtime call each."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        session.run(None, feed)
        times.append((time.perf_counter() - start) * 1e3)
    return times


def bench_model(name: str, image_size: int | None, configs: list[str], repeat: int, rounds: int,
                threads: int, seed: int = 0) -> list[dict]:
    """Compile and time ``name`` with ONNX Runtime and each graphtune config.

    Returns
    -------
    list of dict
        One row per runner: ``model``, ``image_size``, ``runner``, ``median_ms``,
        ``ms`` (all samples), ``compile_s`` and ``max_abs_diff`` (vs ONNX Runtime).
    """
    model = models.get(name, image_size=image_size)
    size = image_size or models.info(name).image_size
    session = ort_session(model, threads)
    x = np.random.default_rng(seed).standard_normal((1, 3, size, size)).astype("float32")
    reference = session.run(None, {"input": x})
    runners = {"onnxruntime": None}
    compile_s = {"onnxruntime": None}
    diffs = {"onnxruntime": 0.0}
    for kind in configs:
        start = time.perf_counter()
        compiled = compile(model, CONFIGS[kind](model, seed))
        compile_s[kind] = time.perf_counter() - start
        outputs = compiled(x)
        outputs = outputs if isinstance(outputs, list) else [outputs]
        diffs[kind] = max(float(np.abs(a - b).max()) for a, b in zip(outputs, reference))
        runners[kind] = compiled
    samples: dict[str, list[float]] = {runner: [] for runner in runners}
    order = list(runners)
    for r in range(rounds):
        for runner in order[r % len(order):] + order[:r % len(order)]:
            time.sleep(0.05)  # let the previous runner's threads go idle
            if runner == "onnxruntime":
                _time_ort(session, {"input": x}, 2)  # warm-up
                samples[runner] += _time_ort(session, {"input": x}, repeat)
            else:
                samples[runner] += runners[runner].time(repeat=repeat, warmup=2).tolist()
    return [{"model": name, "image_size": size, "runner": runner,
             "median_ms": float(np.median(samples[runner])), "ms": samples[runner],
             "compile_s": compile_s[runner], "max_abs_diff": diffs[runner]}
            for runner in runners]


def _table(rows: list[dict]) -> str:
    """Plain-text table: one line per model and runner, with the ratio to ONNX Runtime."""
    lines = [f"{'model':<18} {'image':>5} {'runner':<12} {'median ms':>10} {'vs ORT':>7} "
             f"{'compile s':>9} {'max |diff|':>10}"]
    ort_ms = {(r["model"], r["image_size"]): r["median_ms"] for r in rows
              if r["runner"] == "onnxruntime"}
    for r in rows:
        ratio = ort_ms[(r["model"], r["image_size"])] / r["median_ms"]
        comp = "" if r["compile_s"] is None else f"{r['compile_s']:.1f}"
        lines.append(f"{r['model']:<18} {r['image_size']:>5} {r['runner']:<12} "
                     f"{r['median_ms']:>10.2f} {ratio:>6.2f}x {comp:>9} {r['max_abs_diff']:>10.1e}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["resnet50"],
                        help=f"zoo models (default resnet50); any of {', '.join(models.names())}")
    parser.add_argument("--image-size", type=int, default=None,
                        help="input height/width (default: each model's own)")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS),
                        help="graphtune configs to compile (default: uniform random)")
    parser.add_argument("--repeat", type=int, default=30, help="timed runs per round (default 30)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, order rotated (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of inputs and random configs")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: resnet18 at 64x64 (unless --models/--image-size), "
                             "5 runs x 2 rounds")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        if args.models == parser.get_default("models"):
            args.models = ["resnet18"]
        args.image_size = args.image_size or 64
        args.repeat, args.rounds = 5, 2
    threads = x86.num_threads()
    rows = []
    for name in args.models:
        rows += bench_model(name, args.image_size, args.configs, args.repeat, args.rounds,
                            threads, args.seed)
        print(_table([r for r in rows if r["model"] == name]), "\n", flush=True)
    if len(args.models) > 1:
        print(_table(rows))
    if args.json:
        import onnxruntime
        import tvm

        report = {"benchmark": "e2e", "target": x86.target_key(), "threads": threads,
                  "tvm": tvm.__version__, "onnxruntime": onnxruntime.__version__,
                  "python": platform.python_version(), "repeat": args.repeat,
                  "rounds": args.rounds, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "loadavg": os.getloadavg(),
                  "results": rows}
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(report, file, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
