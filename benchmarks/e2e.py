"""End-to-end latency: graphtune's tuned models against ONNX Runtime and OpenVINO (batch 1, fp32 or int8).

For each model: ``graphtune.tune`` (measurements reused from
``OUT/MODEL.records.jsonl`` on reruns; ``make demo`` uses the same files), then, timed side by
side in the same interleaved rounds with the same thread count:

- ``ort`` (ONNX Runtime, no spinning; the rounds split between ``--peer-processes``
  fresh processes of each peer, default 3), ``openvino`` (fp32 forced; OpenVINO
  defaults to bf16 on AVX512-BF16 CPUs: ``--bf16`` adds ``openvino-bf16``
  as its own column, and ``gt-bf16``: the model tuned again with ``precision="bfloat16"``,
  its conv2d nodes free to run in bfloat16 where measured faster),
- ``gt-uniform`` (16c everywhere, default knobs: the "default heuristic"),
- ``gt-kernel-best`` (each node its fastest measured kernel, transforms
  ignored when choosing: the old "history best"),
- ``gt-graph`` (the config ``tune`` returns: the solver's optimum, unless tune's final check
  measured uniform, kernel-best or the closed loop's fastest profiled config faster beyond its
  spread, :mod:`graphtune.final_check`;
  ``--no-final-check`` times the solver's always) and ``predicted`` (that config's
  prediction: none for uniform),
- with ``--random``, ``gt-random`` (a random candidate per node: many transforms).

``--int8`` does all of this for each model's int8 form instead: the model quantized by
:func:`graphtune.quantize` (static QDQ, uint8 activations, int8 weights) on
:data:`CALIBRATION_INPUTS` seeded random inputs of its input shapes (standard normal, like
the timed input; the ranges fit no real data, which matters for accuracy, not for speed),
saved as ``OUT/MODEL-int8.onnx`` and reused on reruns. graphtune tunes and compiles that QDQ
file (its quantized convs on int8 kernels) and the peers run the same file: ``ort-int8``
(ONNX Runtime's int8 kernels) and ``openvino-int8`` (OpenVINO runs the quantized ops in u8 /
i8 by itself, the rest in f32). Rows are named ``MODEL-int8`` and the JSON says
``precision: "int8"``; ``max_abs_diff`` is against ``ort-int8`` on the same file, and
``max_rel_diff`` the same over the largest absolute ORT output (int8 runtimes differ by steps
of the output scale; on AVX2 ONNX Runtime's optimized int8 convs saturate, ``docs/int8.md``,
so the difference includes ONNX Runtime's own error). ``--reduce-range`` quantizes with 7-bit
weights (``graphtune.quantize(..., reduce_range=True)``, what ONNX Runtime recommends on CPUs
without VNNI): its saturating path is then exact, and graphtune offers its ``vpmaddubsw``
kernels (``docs/int8.md``); rows are named ``MODEL-int8r``.

A peer that fails on a model (fails to start, crashes or hangs in its process,
:class:`graphtune.peers.PeerProcess`) has ``error`` in its cell and the message in the row's
``peer_errors``; the other runtimes are timed without it.

``--suite`` runs every zoo model at its published size (224 px; unet and SSD at
their own) unless ``--models`` narrows it, leaves out ``gt-kernel-best``, keeps
going when a model fails (its row then holds ``error``), and ends with the
geomean and minimum of ORT / gt-graph over the suite. ``--records FILE`` puts
every model's measurements in one records file (default one per model in
``OUT``); either way a rerun resumes where the last one stopped.

JSON per model: ``precision`` (``fp32`` / ``int8``), every latency, ``speedup_vs_ort`` (ort /
gt-graph), ``speedup_vs_uniform`` (gt-uniform / gt-graph, the table's ``uniform/gt-graph``
column), ``prediction_error`` ((measured - predicted) / measured), ``max_abs_diff`` and
``max_rel_diff`` vs the first peer (ORT), ``peer_errors``, tuning wall
time (the final check included) and solver status, ``final_check`` (tune's final check:
medians, spreads, samples, the config kept and why; with the solver's config replaced, also
``solver_predicted_ms``); with 2+
threads also the host-state gauge right before and after every runtime's timed turn
(``handoff_ratio``, per runtime, see :mod:`graphtune.hoststate`) and the same figures
over the samples timed wholly in each state (``rounds_shared``: the fewer of ORT's and
gt-graph's, ``speedup_vs_ort_shared``, ``prediction_error_shared``, and ``..._split``;
a sample timed while the state changed counts in neither); the suite summary adds the
geomean per state (``by_state``). The report also names the CPU (``cpu``), the thread
count, the ``precision``, the ``peers`` and the command that produced it, which
``benchmarks/results.py`` puts above its table in ``benchmarks/RESULTS.md``. The
measured layout graphs are saved to ``OUT/MODEL.graph.json`` for
``benchmarks/solvers.py --graphs OUT``. A Markdown table is printed (``--verbose``: with
the per-state columns).

Examples
--------
``python benchmarks/e2e.py --models resnet18,resnet50,ssd_resnet50_512 --json e2e.json``
``python benchmarks/e2e.py --quick``  (resnet18 at 64x64, 4 candidates, few repeats: a smoke run)
``python benchmarks/e2e.py --suite --records out/suite.records.jsonl --json out/suite.json``
(``--resume``: a suite stopped half-way goes on with the models its JSON lacks)
``python benchmarks/e2e.py --suite --models resnet18,mobilenet_v2 --max-candidates 2 --repeat 3``
``python benchmarks/e2e.py --int8 --quick``  (the same smoke run on quantized resnet18)
``python benchmarks/e2e.py --suite --models out/exported/resnet50.dynamo.onnx`` (a model as
``torch.onnx.export`` wrote it: ``benchmarks/export_torchvision.py``)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import sys
import time

import numpy as np
import onnx

import graphtune
from graphtune import models, x86
from graphtune.checks import check_choice, check_positive, check_writable
from graphtune.config import Config
from graphtune.errors import GraphtuneError, ModelError
from graphtune.feedback import Feedback
from graphtune.models.resolve import resolve
from graphtune.peers import PEERS
from graphtune.report import evaluate, markdown_table
from runinfo import cpu_name

CALIBRATION_INPUTS = 4
"""Seeded random inputs ``--int8`` calibrates each model's quantization on."""

INT8_PEERS = {"ort": "ort-int8", "openvino": "openvino-int8"}
"""``--peers`` names -> the peers ``--int8`` runs the QDQ model in (others keep their name)."""

MIN_STATE_ROUNDS = 5
"""Samples (of ORT and of gt-graph) a model needs in a host state for its ratio in that state to
enter the summary."""


def suite_summary(rows: list[dict]) -> dict:
    """Geomean and minimum of ORT / gt-graph over the rows that have it, and the slowest model;
    the same over the rounds timed in each host state (``shared`` / ``split``, see
    :mod:`graphtune.hoststate`), for models with at least :data:`MIN_STATE_ROUNDS` of them.

    Examples
    --------
    >>> suite_summary([{"model": "a", "speedup_vs_ort": 2.0}, {"model": "b", "speedup_vs_ort": 0.5}])
    ... # doctest: +NORMALIZE_WHITESPACE
    {'models': 2, 'geomean_ort_over_gt': 1.0, 'min_ort_over_gt': 0.5, 'min_model': 'b',
     'failed': [], 'by_state': {}}
    >>> suite_summary([{"model": "a", "speedup_vs_ort": 1.0, "speedup_vs_ort_split": 0.8,
    ...                 "rounds_split": 9}])["by_state"]
    {'split': {'models': 1, 'geomean_ort_over_gt': 0.8, 'min_ort_over_gt': 0.8, 'min_model': 'a'}}
    """
    summary = {**_ratios_summary({row["model"]: row["speedup_vs_ort"] for row in rows
                                  if row.get("speedup_vs_ort")}),
               "failed": [row["model"] for row in rows if "error" in row], "by_state": {}}
    for state in ("shared", "split"):
        ratios = {row["model"]: row[f"speedup_vs_ort_{state}"] for row in rows
                  if row.get(f"speedup_vs_ort_{state}")
                  and row.get(f"rounds_{state}", 0) >= MIN_STATE_ROUNDS}
        if ratios:
            summary["by_state"][state] = _ratios_summary(ratios)
    return summary


def _ratios_summary(ratios: dict) -> dict:
    slowest = min(ratios, key=ratios.get) if ratios else None
    return {"models": len(ratios),
            "geomean_ort_over_gt": math.exp(sum(map(math.log, ratios.values())) / len(ratios))
            if ratios else None,
            "min_ort_over_gt": ratios.get(slowest), "min_model": slowest}


def with_final_check(row: dict, result: graphtune.TuneResult) -> dict:
    """``row`` with ``result``'s final check, and its prediction fields made the kept config's.

    :func:`graphtune.report.evaluate` compares gt-graph with ``result.predicted_ms``, the
    solver's prediction; when the final check kept another config, gt-graph is that config:
    its own prediction replaces the solver's (kernel-best's and the loop's fastest profiled
    config have one, uniform's none),
    which stays in ``solver_predicted_ms``.

    Examples
    --------
    >>> from graphtune.final_check import FinalCheck
    >>> class Result:
    ...     final = FinalCheck("uniform", "faster", "solver", {"solver": 2.0, "uniform": 1.0}, {})
    ...     config = graphtune.Config({}, solution={"method": "uniform"})
    >>> row = with_final_check({"latency_ms": {"gt-graph": 1.0}, "predicted_ms": 1.8,
    ...                         "prediction_error": -0.8}, Result())
    >>> row["final_check"]["chosen"], row["solver_predicted_ms"], row["predicted_ms"], row["prediction_error"]
    ('uniform', 1.8, None, None)
    """
    final = result.final
    if final is None:
        return row
    row["final_check"] = final.to_dict()
    if not final.replaced:
        return row
    predicted = (result.config.solution or {}).get("predicted_ms")
    row["solver_predicted_ms"], row["predicted_ms"] = row.get("predicted_ms"), predicted
    row["prediction_error"] = _error(row["latency_ms"]["gt-graph"], predicted)
    for state, part in (row.get("by_state") or {}).items():
        if f"prediction_error_{state}" in row:
            row[f"prediction_error_{state}"] = _error(part["latency_ms"]["gt-graph"], predicted)
    return row


def _error(measured: float, predicted: float | None) -> float | None:
    return None if predicted is None else (measured - predicted) / measured


def calibration_data(model: onnx.ModelProto, count: int = CALIBRATION_INPUTS,
                     seed: int = 0) -> list[dict[str, np.ndarray]]:
    """``count`` random ``{input: array}`` feeds of ``model``'s input shapes and dtypes (standard
    normal, seeded: the same ones on every run), for :func:`graphtune.quantize`.

    Examples
    --------
    >>> feeds = calibration_data(graphtune.models.get("resnet18", image_size=32), count=2)
    >>> len(feeds), feeds[0]["input"].shape, feeds[0]["input"].dtype
    (2, (1, 3, 32, 32), dtype('float32'))
    """
    initializers = {t.name for t in model.graph.initializer}
    specs = {}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value for d in tensor.shape.dim]
        if not all(n > 0 for n in shape):
            raise ModelError(f"input {value.name!r} has a dynamic shape {shape} (0: unknown); "
                             "--int8 calibrates on inputs of static shapes: export the model "
                             "with fixed input sizes")
        specs[value.name] = (shape, onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))
    rng = np.random.default_rng(seed)
    return [{name: rng.standard_normal(shape).astype(dtype) for name, (shape, dtype) in specs.items()}
            for _ in range(count)]


def quantized(model: onnx.ModelProto, path: str, reduce_range: bool = False) -> onnx.ModelProto:
    """The QDQ form of ``model`` saved at ``path``: read from there when it exists (a rerun), else
    made by :func:`graphtune.quantize` on :func:`calibration_data` (7-bit weights with
    ``reduce_range``) and saved there."""
    if os.path.isfile(path):
        return onnx.load(path)
    qdq = graphtune.quantize(model, calibration_data(model), reduce_range=reduce_range)
    onnx.save(qdq, path)
    return qdq


def diff_line(row: dict) -> str:
    """gt-graph's largest output difference from the row's reference peer, absolute and over the
    reference's largest absolute output (int8 runtimes differ by steps of the output scale).

    Examples
    --------
    >>> diff_line({"model": "m-int8", "reference": "ort-int8", "max_abs_diff": {"gt-graph": 0.2},
    ...            "max_rel_diff": {"gt-graph": 0.0625}})
    'm-int8: gt-graph vs ort-int8: max abs diff 2.0e-01, 6.2e-02 of max |ort-int8 output|'
    """
    reference = row.get("reference")
    absolute = (row.get("max_abs_diff") or {}).get("gt-graph")
    if reference is None or absolute is None:
        return f"{row['model']}: no reference output"
    relative = (row.get("max_rel_diff") or {}).get("gt-graph")
    share = "" if relative is None else f", {relative:.1e} of max |{reference} output|"
    return f"{row['model']}: gt-graph vs {reference}: max abs diff {absolute:.1e}{share}"


def feedback_fields(feedback: Feedback, row: dict) -> dict:
    """The closed loop's record in a row (``--feedback-rounds``): its rounds, the prediction
    of the first solution (isolated costs) and of the last (in-model costs), and the error
    of the first against gt-graph's measured latency (``prediction_error`` is the last's).

    >>> loop = Feedback(2, 8.0, 9.5, [10.2, 10.0], True, 30)
    >>> fields = feedback_fields(loop, {"latency_ms": {"gt-graph": 10.0}})
    >>> fields["prediction_error_before"], fields["converged"]
    (0.2, True)
    """
    measured = row["latency_ms"].get("gt-graph")
    before = feedback.predicted_before_ms
    return {"rounds": feedback.rounds, "converged": feedback.converged,
            "predicted_before_ms": before, "predicted_after_ms": feedback.predicted_after_ms,
            "profiled_ms": list(feedback.measured_ms), "in_model_records": feedback.in_model,
            "seconds": feedback.seconds,
            "prediction_error_before": (measured - before) / measured if measured else None}


def closed_loop_line(row: dict) -> str:
    """One line on a row's closed loop; "-" for an error that does not apply (no gt-graph
    time, or the final check kept another config than the solver's, whose prediction it is).

    >>> row = {"feedback": {"rounds": 1, "predicted_before_ms": 8.0, "predicted_after_ms": 9.5,
    ...                     "prediction_error_before": 0.2}, "prediction_error": None}
    >>> closed_loop_line(row)
    'closed loop: 1 rounds, predicted 8.00 -> 9.50 ms (error before +20.0%, after -)'
    """
    loop = row["feedback"]

    def error(value: float | None) -> str:
        return "-" if value is None else f"{value:+.1%}"

    return (f"closed loop: {loop['rounds']} rounds, predicted {loop['predicted_before_ms']:.2f} -> "
            f"{loop['predicted_after_ms']:.2f} ms (error before {error(loop['prediction_error_before'])}, "
            f"after {error(row.get('prediction_error'))})")


def write_report(args: argparse.Namespace, rows: list[dict]) -> None:
    """Write ``rows`` (the models timed so far) and their suite summary to ``args.json``."""
    import tvm

    report = {"benchmark": "e2e", "target": x86.target_key(), "tvm": tvm.__version__,
              "python": platform.python_version(), "machine": platform.processor() or
              platform.machine(), "cpu": cpu_name(),
              "threads": os.environ.get("TVM_NUM_THREADS"), "command": args.command,
              "precision": args.precision, "reduce_range": args.reduce_range,
              "peers": args.peer_names,
              "repeat": args.repeat, "max_candidates": args.max_candidates,
              "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "loadavg": os.getloadavg(), "results": rows, "suite": args.suite,
              "summary": suite_summary(rows)}
    with open(args.json, "w", encoding="utf-8") as file:
        json.dump(report, file, indent=1)


def resumed_rows(path: str) -> list[dict]:
    """The timed rows (not the failed ones) of the e2e report at ``path``; none if it does not
    exist yet."""
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as file:
        report = json.load(file)
    return [row for row in report.get("results", []) if "error" not in row]


def main(argv: list[str] | None = None) -> int:
    """Command line entry point (see ``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="resnet18,resnet50,ssd_resnet50_512",
                        help="comma-separated zoo models or .onnx files (e.g. torch.onnx exports); "
                             f"zoo models: {', '.join(models.names())}")
    parser.add_argument("--image-size", type=int, default=None,
                        help="input height/width (default: each model's own)")
    parser.add_argument("--max-candidates", type=int, default=32,
                        help="kernel candidates measured per workload (default 32)")
    parser.add_argument("--repeat", type=int, default=30, help="timed interleaved rounds (default 30)")
    parser.add_argument("--peers", default="ort,openvino", help="peer runtimes (default ort,openvino)")
    parser.add_argument("--peer-processes", type=int, default=3,
                        help="fresh processes per peer the rounds are split between (default 3: "
                             "a process's speed is a draw)")
    parser.add_argument("--bf16", action="store_true",
                        help="also time OpenVINO in bf16 and graphtune tuned with precision='bfloat16' "
                             "(gt-bf16)")
    parser.add_argument("--int8", action="store_true",
                        help="time each model's int8 QDQ form (graphtune.quantize on "
                             f"{CALIBRATION_INPUTS} seeded random inputs, saved as OUT/MODEL-int8.onnx) "
                             "against ort-int8 and openvino-int8 running the same file")
    parser.add_argument("--reduce-range", action="store_true",
                        help="with --int8: 7-bit weights (exact on AVX2's vpmaddubsw, for ONNX "
                             "Runtime and graphtune alike); rows MODEL-int8r")
    parser.add_argument("--random", action="store_true", help="also time a random per-node config")
    parser.add_argument("--out", default="out",
                        help="records, configs and graphs folder (default out/, shared with make demo)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: resnet18 at 64x64, 4 candidates, 5 rounds")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--resume", action="store_true",
                        help="with --json: keep the rows of the models the JSON file already has and "
                             "time only the others (a suite stopped half-way goes on where it stopped)")
    parser.add_argument("--suite", action="store_true",
                        help="every zoo model (or --models) at its published size, without "
                             "gt-kernel-best; geomean ORT/gt over the suite")
    parser.add_argument("--records", metavar="FILE",
                        help="one records file for every model (default OUT/MODEL.records.jsonl)")
    parser.add_argument("--no-final-check", action="store_true",
                        help="tune without the final check (gt-graph is then always the solver's "
                             "config)")
    parser.add_argument("--feedback-rounds", type=int, default=None, metavar="N",
                        help="tune's closed loop: at most N models profiled (default: tune's, 2; "
                             "0: off)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="tables with the samples and figures per host state (shared / split "
                             "cache); the JSON has them either way")
    args = parser.parse_args(argv)
    if args.reduce_range and not args.int8:
        parser.error("--reduce-range quantizes the models: it goes with --int8")
    if args.resume and not args.json:
        parser.error("--resume continues the report of --json: give its path")
    args.command = shlex.join(["benchmarks/e2e.py", *(sys.argv[1:] if argv is None else argv)])
    os.makedirs(args.out, exist_ok=True)
    try:
        check_positive(args.max_candidates, "--max-candidates", integer=True)
        check_positive(args.repeat, "--repeat", integer=True)
        check_positive(args.peer_processes, "--peer-processes", integer=True)
        for path, what in ((args.json, "JSON file (--json)"), (args.records, "records (--records)")):
            if path:
                check_writable(path, what)
        for name in args.peers.split(","):
            if name:
                check_choice(name, PEERS, "--peers")
    except GraphtuneError as err:
        parser.error(str(err))
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in models.names() and not os.path.isfile(n)]
    if unknown:
        parser.error(f"--models: {', '.join(unknown)}: neither a zoo model nor an .onnx file; "
                     f"zoo models: {', '.join(models.names())}")
    if args.suite and args.models == parser.get_default("models"):
        names = models.names()
    if args.quick:
        if args.models == parser.get_default("models"):
            names = ["resnet18"]
        args.image_size = args.image_size or 64
        args.max_candidates, args.repeat, args.peer_processes = 4, 5, 1
    peers = [p for p in args.peers.split(",") if p] + (["openvino-bf16"] if args.bf16 else [])
    if args.int8:
        peers = [INT8_PEERS.get(p, p) for p in peers]
    args.precision, args.peer_names = ("int8" if args.int8 else "fp32"), peers

    rows = resumed_rows(args.json) if args.resume else []
    done = {row["model"] for row in rows}
    for name in names:
        tag = name  # the error row's name if the model cannot be read
        try:
            model, tag = resolve(name, image_size=args.image_size)  # a file keeps its own input size
            if args.image_size is not None and name in models.names():
                tag = f"{tag}@{args.image_size}"
            if args.int8:
                tag = f"{tag}-int8{'r' if args.reduce_range else ''}"
            if tag in done:
                print(f"== {tag}: kept from {args.json}", flush=True)
                continue
            if args.int8:
                qdq_path = os.path.join(args.out, f"{tag}.onnx")
                print(f"== {tag}: {'reading' if os.path.isfile(qdq_path) else 'quantizing to'} "
                      f"{qdq_path}", flush=True)
                model = quantized(model, qdq_path, args.reduce_range)
            print(f"== {tag}: tuning", flush=True)
            records = args.records or os.path.join(args.out, f"{tag}.records.jsonl")
            result = graphtune.tune(model, records=records, max_candidates=args.max_candidates,
                                    final_check=False if args.no_final_check else None,
                                    feedback_rounds=args.feedback_rounds)
            result.config.save(os.path.join(args.out, f"{tag}.graphtune.json"))
            with open(os.path.join(args.out, f"{tag}.graph.json"), "w") as handle:
                handle.write(result.graph.to_json())
            print(result.summary(), flush=True)
            extra = {"gt-random": Config.random(model, seed=0)} if args.random else {}
            if args.bf16 and not args.int8:  # the same model tuned with bfloat16 allowed
                low = graphtune.tune(model, records=records, max_candidates=args.max_candidates,
                                     final_check=False if args.no_final_check else None,
                                     feedback_rounds=args.feedback_rounds, precision="bfloat16")
                low.config.save(os.path.join(args.out, f"{tag}-bf16.graphtune.json"))
                print(low.summary(), flush=True)
                extra["gt-bf16"] = low.config
            row = with_final_check(evaluate(model, result, tag, peers=peers, repeat=args.repeat,
                                            extra=extra, kernel_best=not args.suite,
                                            peer_processes=args.peer_processes,
                                            ort=INT8_PEERS["ort"] if args.int8 else "ort"),
                                   result)
            row["precision"] = args.precision
            if result.feedback is not None:
                row["feedback"] = feedback_fields(result.feedback, row)
        except GraphtuneError as err:
            if not args.suite:
                raise
            print(f"== {tag}: failed: {err}", flush=True)
            row = {"model": tag, "precision": args.precision, "error": str(err)}
        else:
            print(markdown_table([row], verbose=args.verbose), diff_line(row), "", sep="\n",
                  flush=True)
            if "feedback" in row:
                print(closed_loop_line(row), flush=True)
        rows.append(row)
        if args.json:  # after every model: a long suite stopped half-way keeps what it timed
            write_report(args, rows)

    timed = [row for row in rows if "error" not in row]
    print(markdown_table(timed, verbose=args.verbose))
    print("\n".join(diff_line(row) for row in timed))
    summary = suite_summary(rows)
    if args.suite:
        geomean = summary["geomean_ort_over_gt"]
        print(f"suite: {summary['models']} models, geomean ORT/gt-graph "
              f"{'-' if geomean is None else format(geomean, '.3f')}, minimum "
              f"{'-' if geomean is None else format(summary['min_ort_over_gt'], '.3f')} "
              f"({summary['min_model']})"
              + (f"; failed: {', '.join(summary['failed'])}" if summary["failed"] else ""))
        for state, part in summary["by_state"].items():
            print(f"  rounds with the threads' cache {state}: {part['models']} models, geomean "
                  f"{part['geomean_ort_over_gt']:.3f}, minimum {part['min_ort_over_gt']:.3f} "
                  f"({part['min_model']})")
    if args.json:
        write_report(args, rows)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
