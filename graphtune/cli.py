"""``graphtune`` command line: tune, solve, compile, bench, profile and show, on top of the Python API.

Every option and output path is checked before any work starts. Errors
graphtune raises on bad input (and file-system errors) are printed as one line
saying what to do, with exit status 2; anything else is a bug, reported as one
line asking for a bug report (exit status 3; ``GRAPHTUNE_TRACEBACK=1`` shows
the traceback).

Examples
--------
.. code-block:: sh

    graphtune tune resnet18 -o resnet18.graphtune.json
    graphtune show resnet18.graphtune.json
    graphtune bench resnet18 --config resnet18.graphtune.json --vs ort,openvino
    graphtune compile resnet18 resnet18.graphtune.json -o resnet18.so
    graphtune profile resnet18 --config resnet18.graphtune.json --json profile.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from .checks import check_choice, check_positive, check_writable, parse_shape_dict
from .errors import ArgumentError, GraphtuneError
from .safejson import printable

__all__ = ["main", "build_parser"]


def _tune(args: argparse.Namespace) -> None:
    from .pipeline import TRANSFORMS, tune
    from .solve import METHODS

    check_choice(args.solver, METHODS, "--solver")
    check_choice(args.transforms, TRANSFORMS, "--transforms")
    out = args.output or f"{os.path.splitext(os.path.basename(args.model))[0]}.graphtune.json"
    check_writable(out, "config file (-o)")
    if args.graph:
        check_writable(args.graph, "layout graph file (--graph)")
    runner = None
    if args.rpc_tracker or args.rpc_key:
        if not (args.rpc_tracker and args.rpc_key):
            raise ArgumentError("--rpc-tracker and --rpc-key go together: give both "
                                 "(e.g. --rpc-tracker 127.0.0.1:9190 --rpc-key x86)")
        from .measure import RPCRunner

        runner = RPCRunner(args.rpc_tracker, args.rpc_key)
    result = tune(args.model, records=args.records, max_candidates=args.max_candidates,
                  solver=args.solver, time_limit=args.time_limit, image_size=args.image_size,
                  runner=runner, retry_errors=args.retry_errors,
                  shape_dict=parse_shape_dict(args.shape), transforms=args.transforms,
                  progress=not args.quiet, final_check=False if args.no_final_check else None,
                  feedback_rounds=args.feedback_rounds, precision=args.precision)
    result.config.save(out)
    if args.graph:
        with open(args.graph, "w") as handle:
            handle.write(result.graph.to_json())
    _echo(result.summary())
    print(f"config written to {out}" + (f", layout graph to {args.graph}" if args.graph else ""))


def _solve(args: argparse.Namespace) -> None:
    from .graph import MAX_JSON_CHARS, LayoutGraph
    from .solve import METHODS, solve

    check_choice(args.method, METHODS, "--method")
    try:
        with open(args.graph, encoding="utf-8") as handle:
            text = handle.read(MAX_JSON_CHARS + 1)  # bounded: /dev/zero never ends
        if len(text) > MAX_JSON_CHARS:
            raise ArgumentError(f"{args.graph}: more than {MAX_JSON_CHARS >> 20} MiB; not a "
                                "layout graph graphtune wrote")
        graph = LayoutGraph.from_json(text)
    except OSError as err:
        raise ArgumentError(f"{args.graph}: cannot read the layout graph "
                            f"({err.strerror})") from None
    except UnicodeDecodeError:
        raise ArgumentError(f"{args.graph}: not a layout graph (binary, not JSON)") from None
    sol = solve(graph, method=args.method, time_limit=args.time_limit)
    status = "proven optimal" if sol.optimal else f"gap {sol.relative_gap:.2%}"
    print(f"{len(graph)} nodes: energy {sol.energy:.4f} ms, lower bound {sol.lower_bound:.4f} ms, "
          f"{status} ({sol.method}, {sol.seconds:.3f} s)")
    unmeasured = graph.unmeasured(sol.assignment)
    if unmeasured:
        _echo(f"note: {len(unmeasured)} edge(s) of this assignment run transforms never measured "
              f"(e.g. {unmeasured[0][0]} -> {unmeasured[0][1]}); the energy is a lower bound. "
              "Write the graph with graphtune tune --transforms all for exact costs everywhere.")
    if args.verbose:
        for name, index in sol.assignment.items():
            cand = graph.candidates(name)[index]
            _echo(f"  {name:40s} {cand.in_layout:>9s} -> {cand.out_layout:<9s} {cand.cost:.4f} ms")


def _compile(args: argparse.Namespace) -> None:
    from .compiler import compile
    from .compiler.partitioned import PartitionedModel
    from .config import Config
    from .models.resolve import resolve

    check_writable(args.output, "library (-o)")
    shapes = parse_shape_dict(args.shape)
    config = Config.load(args.config)
    model, _ = resolve(args.model, image_size=args.image_size)
    compiled = compile(model, config, shape_dict=shapes)
    compiled.export_library(args.output)
    if isinstance(compiled, PartitionedModel):
        what = "archive of the partitioned model (TVM library and ONNX Runtime part; graphtune.load reads it)"
        summary = compiled.summary()
    else:
        what, summary = "library", compiled.schedule_summary()
    print(f"compiled in {compiled.compile_seconds:.1f} s, {what} written to {args.output}")
    _echo(summary)


def _bench(args: argparse.Namespace) -> None:
    from .peers import PEERS
    from .report import bench_model, markdown_table

    peers = [p for p in args.vs.split(",") if p] if args.vs else []
    for name in peers:
        check_choice(name, PEERS, "--vs peer")
    check_positive(args.repeat, "--repeat", integer=True)
    if args.json:
        check_writable(args.json, "JSON file (--json)")
    row = bench_model(args.model, config=args.config, peers=peers, image_size=args.image_size,
                      repeat=args.repeat)
    print(markdown_table([row], verbose=args.verbose))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(row, handle, indent=2)


def _profile(args: argparse.Namespace) -> None:
    from .config import Config
    from .profiling import profile

    check_positive(args.repeat, "--repeat", integer=True)
    check_positive(args.top, "--top", integer=True)
    if args.json:
        check_writable(args.json, "JSON file (--json)")
    if args.records is not None and not os.path.exists(args.records):
        raise ArgumentError(f"--records {args.records}: no such file; give the records file "
                            "graphtune tune measured this model into (its --records, by default "
                            "MODEL.records.jsonl), or leave --records out")
    config = Config.load(args.config) if args.config else None
    result = profile(args.model, config, repeat=args.repeat, ort=not args.no_ort,
                     image_size=args.image_size, shape_dict=parse_shape_dict(args.shape),
                     records=args.records)
    _echo(result.table(top=args.top))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result.to_dict(), handle, indent=1)
        print(f"profile written to {args.json}")


def _show(args: argparse.Namespace) -> None:
    from .config import Config
    from .frontend.cut import recorded_summary
    from .report import config_table

    config = Config.load(args.config)
    partition = recorded_summary(config)
    _echo(config_table(config) + (f"\n{partition}" if partition else ""))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``graphtune`` command.

    Examples
    --------
    >>> build_parser().parse_args(["show", "a.json"]).config
    'a.json'
    """
    parser = argparse.ArgumentParser(prog="graphtune", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def model_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("model", help="zoo name (see graphtune.models.names()) or .onnx path")
        p.add_argument("--image-size", type=int, default=None,
                       help="input size for zoo models (default: the published size)")

    def shape_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                       help="static shape of a dynamic ONNX input (repeatable), "
                            "e.g. input=1,3,224,224")

    p = sub.add_parser("tune", help="measure and solve; write the config")
    model_args(p)
    shape_arg(p)
    p.add_argument("-o", "--output", help="config file (default MODEL.graphtune.json)")
    p.add_argument("--records", default="auto",
                   help="records file, created if missing (default MODEL.records.jsonl); "
                        "the probe index X.probes.jsonl is kept beside X.records.jsonl")
    p.add_argument("--max-candidates", type=int, default=32,
                   help="kernel candidates measured per workload (default 32)")
    p.add_argument("--solver", default="auto", help="auto, dp, pbqp, cpsat, lp or brute")
    p.add_argument("--retry-errors", action="store_true",
                   help="measure again the tasks recorded as errors (e.g. time-outs)")
    p.add_argument("--time-limit", type=float, default=None, help="solver time limit (s)")
    p.add_argument("--graph", help="also write the measured layout graph (JSON)")
    p.add_argument("--transforms", default="lazy",
                   help="lazy (default): measure the layout transforms solutions run; all: every "
                        "one (a graph exact everywhere, e.g. for --graph and graphtune solve)")
    p.add_argument("--rpc-tracker", metavar="HOST:PORT",
                   help="measure on the servers of a TVM RPC tracker (with --rpc-key)")
    p.add_argument("--rpc-key", metavar="KEY", help="device key the servers registered under")
    p.add_argument("--no-final-check", action="store_true",
                   help="skip the final check: compiling the solver's, the uniform, the "
                        "kernel-best and the closed loop's fastest profiled configs and keeping "
                        "the fastest measured (the solver's "
                        "unless another wins beyond the spread); GRAPHTUNE_FINAL_CHECK=0 makes "
                        "skipping the default")
    p.add_argument("--feedback-rounds", type=int, default=None, metavar="N",
                   help="close the loop: profile the solver's config compiled, replace the chosen "
                        "candidates' costs by their in-model times and solve again, at most N "
                        "models profiled (default 2, or $GRAPHTUNE_FEEDBACK_ROUNDS; 0: off; "
                        "docs/timing.md, 'Closed loop')")
    p.add_argument("--precision", choices=["float32", "bfloat16", "bf16"], default="float32",
                   help="bfloat16 (bf16): conv2d, depthwise and batch-1 dense nodes may also run with "
                        "bfloat16 inputs and weights where measured faster (AVX512-BF16 / AMX; changes the "
                        "numerics; docs/bf16.md)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(run=_tune)

    p = sub.add_parser("solve", help="solve a saved layout graph (graphtune tune --graph)")
    p.add_argument("graph", help="layout graph JSON")
    p.add_argument("--method", default="auto", help="auto, dp, pbqp, cpsat, lp or brute")
    p.add_argument("--time-limit", type=float, default=None)
    p.add_argument("-v", "--verbose", action="store_true", help="print the chosen candidates")
    p.set_defaults(run=_solve)

    p = sub.add_parser("compile", help="compile a model with a config to a shared library")
    model_args(p)
    shape_arg(p)
    p.add_argument("config", help="config file from graphtune tune")
    p.add_argument("-o", "--output", required=True,
                   help="library to write (.so); for a partitioned model an archive of both parts "
                        "(.zip; graphtune.load reads it)")
    p.set_defaults(run=_compile)

    p = sub.add_parser("bench", help="latency of graphtune builds and peers, side by side")
    model_args(p)
    p.add_argument("--config", help="config to compile with (default: also gt-uniform only)")
    p.add_argument("--vs", default="ort", help="comma-separated peers: ort, openvino, openvino-bf16, "
                   "ort-int8, openvino-int8 (the int8 ones for QDQ models: same file, their int8 paths)")
    p.add_argument("--repeat", type=int, default=30, help="timed rounds (median reported)")
    p.add_argument("--json", help="write the result row as JSON")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also show the samples and figures per host state (shared / split cache)")
    p.set_defaults(run=_bench)

    p = sub.add_parser("profile", help="per-op in-model time vs predicted cost vs ONNX Runtime "
                                       "(a partitioned model's ONNX Runtime part: a row of its own)")
    model_args(p)
    shape_arg(p)
    p.add_argument("--config", help="config to compile with (default: uniform 16c)")
    p.add_argument("--records", help="records file the config was tuned with (transform costs)")
    p.add_argument("--repeat", type=int, default=10, help="runs per side (medians; default 10)")
    p.add_argument("--top", type=int, default=15, help="slowest calls listed (default 15)")
    p.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime's profile")
    p.add_argument("--json", help="write rows and totals as JSON")
    p.set_defaults(run=_profile)

    p = sub.add_parser("show", help="print a config: per-node layouts, knobs, costs, totals, and "
                                    "the partition it was tuned for")
    p.add_argument("config", help="config file")
    p.set_defaults(run=_show)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    Examples
    --------
    Errors are one line on standard error (``graphtune: error: unknown model
    'resnet-18': not a file, and not a zoo model; valid names: ...``) and exit status 2:

    >>> main(["tune", "resnet-18"])
    2
    """
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except GraphtuneError as err:
        return _fail(f"error: {err}", 2)
    except OSError as err:  # the file system refused (disk full, file vanished...)
        where = f"{err.filename}: " if err.filename else ""
        return _fail(f"error: {where}{err.strerror or err}", 2)
    except KeyboardInterrupt:
        return _fail("interrupted; finished measurements are in the records file", 130)
    except Exception as err:  # anything else is a bug: one line, not a traceback
        if os.environ.get("GRAPHTUNE_TRACEBACK"):
            raise
        return _fail(f"internal error ({type(err).__name__}: {err}); this is a bug, please "
                     "report it with the command line (GRAPHTUNE_TRACEBACK=1 shows the "
                     "traceback)", 3)
    return 0


def _echo(text: str) -> None:
    """Print ``text`` with what could mislead a terminal escaped (names from files and models may
    hold U+202E, escape sequences...: :func:`graphtune.safejson.printable`), line by line."""
    print("\n".join(printable(line) for line in text.split("\n")))


def _fail(message: str, status: int) -> int:
    """Print ``message`` as one line on stderr; return ``status``."""
    print(f"graphtune: {printable(' '.join(message.split()))}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
