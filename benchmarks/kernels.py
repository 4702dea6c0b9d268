"""graphtune's conv2d kernels against ONNX Runtime on the distinct convs of zoo models.

For every distinct conv2d workload of ResNet-50 (batch 1, 224x224, taken from
the zoo model's ONNX Conv nodes after shape inference), measure up to
``--budget`` graphtune candidates, re-time the best one, and time the same
convolution as a one-node ONNX model in ONNX Runtime with the same number of
threads. Prints a table and writes JSON (``--json PATH``)::

    python benchmarks/kernels.py [--quick] [--budget N] [--models resnet50,...] [--ops conv2d,group_conv2d] [--json PATH]

Group convs (``resnext50_32x4d``, ``regnet_y_800mf``) are also compared with
the dense conv of the same size (``groups=1``, same channels and pixels):
``vs_dense`` is the group conv's GFLOP/s over the dense conv's (its useful
FLOPs only: the zeros of a block-diagonal weight count as waste).

``ratio`` is ``ort_ms / gt_ms`` (> 1: graphtune is faster). graphtune's time
is its blocked-layout kernel alone; ONNX Runtime's includes whatever layout
reorders it inserts around its one-node graph. ONNX Runtime is timed with
and without spinning worker threads and credited with the faster. Both are
timed the same way for the ratio: calls back to back on the same weights
(hot caches). The candidate sweep uses graphtune's records protocol, which
flushes the weights before every call as inside a model; that figure is
reported as ``gt_cold_ms``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

import graphtune  # noqa: F401  (sets TVM_NUM_THREADS)
import graphtune.x86 as x86
from graphtune import models
from graphtune.measure import LocalRunner, Task, measure


def conv_workloads(model: onnx.ModelProto, ops: tuple = ("conv2d",)) -> list[tuple[dict, list[str]]]:
    """Distinct conv workloads of ``model`` whose op is in ``ops``, with the nodes that have each."""
    model = shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(model.graph.input) + list(model.graph.value_info)}
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    found: dict[str, tuple[dict, list[str]]] = {}
    for node in model.graph.node:
        if node.op_type != "Conv":
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        workload = x86.conv2d_workload(
            shapes[node.input[0]], weights[node.input[1]], attrs.get("strides", [1, 1]),
            attrs.get("pads", [0, 0, 0, 0]), attrs.get("dilations", [1, 1]),
            attrs.get("group", 1))
        if x86.op_of(workload) not in ops:
            continue
        key = json.dumps(workload, sort_keys=True)
        found.setdefault(key, (workload, []))[1].append(node.name)
    return list(found.values())


def one_conv_model(workload: dict) -> onnx.ModelProto:
    """A one-node ONNX model (input ``x``, output ``y``) computing ``workload``'s conv."""
    rng = np.random.default_rng(0)
    weight = rng.uniform(-1, 1, workload["kernel"]).astype(np.float32)
    out = x86.output_shape(workload)
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=workload["strides"],
                            pads=workload["padding"], dilations=workload["dilation"],
                            group=workload["groups"])
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, workload["data"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, out)],
        [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # ONNX Runtime 1.31 rejects IR 14
    return model


def time_ort(workload: dict, threads: int, repeat: int, min_repeat_ms: float,
             spinning: bool) -> list[float]:
    """Per-repeat mean ms of the one-conv model in ONNX Runtime (warm-up, then repeats)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    session = ort.InferenceSession(one_conv_model(workload).SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).uniform(-1, 1, workload["data"]).astype(np.float32)
    y = np.empty(x86.output_shape(workload), np.float32)
    binding = session.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output("y", "cpu", 0, np.float32, y.shape, y.ctypes.data)
    for _ in range(3):
        session.run_with_iobinding(binding)
    start = time.perf_counter()
    session.run_with_iobinding(binding)
    number = max(1, math.ceil(min_repeat_ms / 1000 / (time.perf_counter() - start)))
    results = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            session.run_with_iobinding(binding)
        results.append((time.perf_counter() - start) / number * 1000)
    return results


def time_hot(workload: dict, knobs: dict, repeat: int, min_repeat_ms: float) -> list[float]:
    """Per-repeat mean ms of graphtune's kernel called back to back (hot caches, like ORT's)."""
    timer = hot_timer(workload, knobs, min_repeat_ms)
    return [timer() for _ in range(repeat)]


def hot_timer(workload: dict, knobs: dict, min_repeat_ms: float):
    """Build the kernel once; return a function timing one repeat (mean ms, hot caches)."""
    import tvm

    target = x86.host_target()
    func = x86.kernel_func(workload, knobs, target).with_attr("global_symbol", "main")
    module = tvm.compile(func, target=target).jit()
    dev = tvm.cpu(0)
    rng = np.random.default_rng(1)
    args = [tvm.runtime.tensor(rng.uniform(-1, 1, shape).astype(np.float32), dev)
            for shape in x86.kernel_shapes(workload, knobs)]
    timer = module.time_evaluator("main", dev, number=1, repeat=1,
                                  min_repeat_ms=int(min_repeat_ms))
    return lambda: timer(*args).mean * 1000


def gflops_vs_dense(workload: dict, knobs: dict, twin: dict, twin_knobs: dict, repeat: int,
                    min_repeat_ms: float) -> float:
    """Median over ``repeat`` interleaved pairs of the group conv's GFLOP/s over its dense twin's."""
    group, dense = hot_timer(workload, knobs, min_repeat_ms), hot_timer(twin, twin_knobs, min_repeat_ms)
    ratios = [(x86.flops(workload) / group()) / (x86.flops(twin) / dense()) for _ in range(repeat)]
    return statistics.median(ratios)


def sgemm_gflops(n: int = 2048, repeat: int = 5) -> float:
    """GFLOP/s of NumPy's BLAS on an n x n float32 matrix product (a peak estimate)."""
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (n, n)).astype(np.float32) for _ in range(2))
    a @ b
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * n ** 3 / min(times) / 1e9


def short(workload: dict) -> str:
    """``C->O kHxkW /s HxW`` label of a conv workload."""
    _, c, h, w = workload["data"]
    o, _, kh, kw = workload["kernel"]
    return f"{c}->{o} {kh}x{kw}/{workload['strides'][0]} {h}x{w}"


def best_hot(workload: dict, budget: int, repeat: int, min_repeat_ms: float, records: str | None,
             runner) -> tuple:
    """Sweep ``budget`` candidates; ``(best record, hot ms, tasks, good, seconds)`` or None."""
    tasks = [Task(x86.op_of(workload), workload, k)
             for k in x86.candidates(workload, max_candidates=budget)]
    start = time.perf_counter()
    swept = measure(tasks, records=records, runner=runner, progress=False)
    seconds = time.perf_counter() - start
    good = [r for r in swept if r.ok]
    if not good:
        print(f"{short(workload)}: every candidate failed: {swept[0].error}", file=sys.stderr)
        return None
    best = min(good, key=lambda r: r.median_ms)
    hot = statistics.median(time_hot(workload, best.knobs, repeat, min_repeat_ms))
    return best, hot, tasks, good, seconds


def dense_twin(workload: dict) -> dict:
    """The ``groups=1`` conv with the same channels, pixels and kernel size."""
    o, _, kh, kw = workload["kernel"]
    return {**workload, "kernel": [o, workload["data"][1], kh, kw], "groups": 1}


def run(budget: int, repeat: int, min_repeat_ms: float, records: str | None,
        model_names: tuple = ("resnet50",), ops: tuple = ("conv2d",)) -> dict:
    """Measure every distinct conv (of ``ops``) of the models with graphtune and ONNX Runtime.

    Candidates are swept with measure()'s defaults (3 repeats of >= 100 ms,
    weights flushed before each call); the best one is then timed hot, back to
    back, right before ONNX Runtime is (same protocol, same moment: on a
    shared machine that keeps the ratio honest). Both get ``repeat`` repeats of
    at least ``min_repeat_ms``; ONNX Runtime is timed with its worker threads
    spinning and not, and credited with the faster.
    """
    threads = x86.num_threads()
    workloads, seen = [], set()
    for name in model_names:
        for workload, nodes in conv_workloads(models.get(name), ops):
            key = json.dumps(workload, sort_keys=True)
            if key not in seen:
                seen.add(key)
                workloads.append((workload, [f"{name}:{n}" for n in nodes]))
    rows = []
    with LocalRunner() as runner:
        for workload, nodes in workloads:
            found = best_hot(workload, budget, repeat, min_repeat_ms, records, runner)
            if found is None:
                continue
            best, gt_ms, tasks, good, seconds = found
            gt_cold_ms = best.median_ms
            ort = {spin: statistics.median(time_ort(workload, threads, repeat, min_repeat_ms, spin))
                   for spin in (True, False)}
            ort_spinning = min(ort, key=ort.get)
            ort_ms = ort[ort_spinning]
            flop = x86.flops(workload)
            vs_dense = None
            if x86.op_of(workload) == "group_conv2d":
                twin = dense_twin(workload)
                dense = best_hot(twin, budget, 1, min_repeat_ms, records, runner)
                if dense is not None:
                    vs_dense = gflops_vs_dense(workload, best.knobs, twin, dense[0].knobs, repeat,
                                               min_repeat_ms)
            rows.append({
                "op": x86.op_of(workload), "vs_dense": vs_dense,
                "workload": workload, "nodes": nodes, "label": short(workload),
                "gt_ms": gt_ms, "gt_cold_ms": gt_cold_ms, "ort_ms": ort_ms,
                "ratio": ort_ms / gt_ms,
                "gflops": flop / gt_ms / 1e6, "ort_gflops": flop / ort_ms / 1e6,
                "ort_spinning": ort_spinning,
                "best_knobs": best.knobs, "candidates_measured": len(tasks),
                "candidates_failed": len(tasks) - len(good),
                "seconds_per_candidate": seconds / len(tasks),
            })
            print(f"  {short(workload):24s} gt {gt_ms:8.3f} ms  ort {ort_ms:8.3f} ms  "
                  f"ratio {ort_ms / gt_ms:5.2f}", file=sys.stderr, flush=True)
    ratios = [r["ratio"] for r in rows]
    sgemm = sgemm_gflops()
    observed = max([r["gflops"] for r in rows] + [r["ort_gflops"] for r in rows])
    measured = sum(r["candidates_measured"] for r in rows)
    return {
        "threads": threads, "target": x86.target_key(x86.host_target()),
        "budget": budget, "repeat": repeat, "min_repeat_ms": min_repeat_ms,
        "workloads": rows,
        "geomean_ratio": math.exp(statistics.fmean(math.log(r) for r in ratios)),
        "min_ratio": min(ratios),
        "sgemm_gflops": sgemm,
        "peak_gflops_estimate": max(sgemm, observed),
        "seconds_per_candidate": sum(r["seconds_per_candidate"] * r["candidates_measured"]
                                     for r in rows) / measured,
        "candidates_measured": measured,
    }


def print_table(result: dict) -> None:
    """The per-workload table and the summary lines."""
    print(f"{'workload':24s} {'nodes':>5s} {'gt ms':>8s} {'cold ms':>8s} {'ort ms':>8s} "
          f"{'ratio':>6s} {'GFLOP/s':>8s} {'vs dense':>8s} {'cands':>5s} {'s/cand':>6s}  best knobs")
    for r in result["workloads"]:
        print(f"{r['label']:24s} {len(r['nodes']):5d} {r['gt_ms']:8.3f} {r['gt_cold_ms']:8.3f} "
              f"{r['ort_ms']:8.3f} "
              f"{r['ratio']:6.2f} {r['gflops']:8.1f} "
              f"{'' if r['vs_dense'] is None else format(r['vs_dense'], '.2f'):>8s} {r['candidates_measured']:5d} "
              f"{r['seconds_per_candidate']:6.2f}  {json.dumps(r['best_knobs'])}")
    print(f"geomean ratio (ort/gt) {result['geomean_ratio']:.3f}, min {result['min_ratio']:.3f}; "
          f"{result['seconds_per_candidate']:.2f} s per candidate over "
          f"{result['candidates_measured']}; threads {result['threads']}; peak estimate "
          f"{result['peak_gflops_estimate']:.0f} GFLOP/s (sgemm {result['sgemm_gflops']:.0f})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="3 candidates per workload, 3 repeats (< 3 min)")
    parser.add_argument("--budget", type=int, help="candidates per workload (default 24)")
    parser.add_argument("--records", help="records file to reuse and extend (default: none)")
    parser.add_argument("--models", default="resnet50", help="comma-separated zoo models")
    parser.add_argument("--ops", default="conv2d,group_conv2d",
                        help="conv ops to measure (conv2d, group_conv2d, depthwise_conv2d)")
    parser.add_argument("--json", help="write the results to this JSON file")
    args = parser.parse_args(argv)
    budget = args.budget or (3 if args.quick else 24)
    start = time.perf_counter()
    result = run(budget, 3 if args.quick else 10, 100.0, args.records,
                 tuple(args.models.split(",")), tuple(args.ops.split(",")))
    result["wall_s"] = time.perf_counter() - start
    print_table(result)
    print(f"wall time {result['wall_s']:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
