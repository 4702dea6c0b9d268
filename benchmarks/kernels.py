"""graphtune's kernels against ONNX Runtime, one workload at a time.

Suites (``--suite``): ``resnet50`` (default), every distinct conv2d workload of
ResNet-50 (batch 1, 224x224, taken from the zoo model's ONNX Conv nodes after
shape inference); ``groups``, the group convs of ResNeXt-50 32x4d and RegNetY-800MF, each also
timed against its same-size dense conv (``vs_dense``: GFLOP/s ratio, useful
FLOPs only); ``decoder``, U-Net decoder transposed convs (2x2 stride 2
and 4x4 stride 2 pad 1 upsampling 512->256 at 28x28, 256->128 at 56x56,
128->64 at 112x112) and token-MLP MatMuls of ConvNeXt-like blocks; ``depthwise``, the
depthwise convs of MobileNetV3-Large and EfficientNet-B0. For each,
measure up to ``--budget`` graphtune candidates, re-time the best one, and
time the same op as a one-node ONNX model in ONNX Runtime with the same
number of threads. Prints a table and writes JSON (``--json PATH``)::

    python benchmarks/kernels.py [--suite resnet50|groups|decoder|depthwise] [--quick] [--budget N] \\
        [--json PATH]

``ratio`` is ``ort_ms / gt_ms`` (> 1: graphtune is faster). graphtune's time
is its blocked-layout kernel alone; ONNX Runtime's includes whatever layout
reorders it inserts around its one-node graph. ONNX Runtime is timed with
and without spinning worker threads and credited with the faster. Both are
timed the same way for the ratio: calls back to back on the same weights
(hot caches), in interleaved rounds (graphtune, ORT spinning, ORT not), one
settle call before each timed repeat. The candidate sweep uses graphtune's records protocol, which
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
from graphtune.latency import wait_idle
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


def decoder_workloads() -> list[tuple[dict, list[str]]]:
    """U-Net decoder transposed convs and token-MLP MatMuls (the ``decoder`` suite)."""
    found = []
    for c, o, size in ((512, 256, 28), (256, 128, 56), (128, 64, 112)):
        found.append((x86.conv2d_transpose_workload([1, c, size, size], [c, o, 2, 2], [2, 2]),
                      [f"up{c}_k2"]))
        found.append((x86.conv2d_transpose_workload([1, c, size, size], [c, o, 4, 4], [2, 2],
                                                     [1, 1, 1, 1]), [f"up{c}_k4"]))
    for rows, c, hidden in ((56, 96, 384), (14, 384, 1536)):
        found.append((x86.dense_workload([1, rows, rows, c], [hidden, c]), [f"mlp{c}.fc1"]))
        found.append((x86.dense_workload([1, rows, rows, hidden], [c, hidden]), [f"mlp{c}.fc2"]))
    return found


def distinct_workloads(model_names: tuple[str, ...], ops: tuple[str, ...]) -> list[tuple[dict, list[str]]]:
    """Distinct ``ops`` workloads of the zoo models ``model_names``, each with the nodes using it
    (``model:node``): the ``groups`` and ``depthwise`` suites."""
    found: dict[str, tuple[dict, list[str]]] = {}
    for name in model_names:
        for workload, nodes in conv_workloads(models.get(name), ops):
            key = json.dumps(workload, sort_keys=True)
            found.setdefault(key, (workload, []))[1].extend(f"{name}:{n}" for n in nodes)
    return list(found.values())


SUITES = {
    "resnet50": lambda: conv_workloads(models.get("resnet50")),
    "decoder": decoder_workloads,
    "groups": lambda: distinct_workloads(("resnext50_32x4d", "regnet_y_800mf"), ("group_conv2d",)),
    "depthwise": lambda: distinct_workloads(("mobilenet_v3_large", "efficientnet_b0"), ("depthwise_conv2d",)),
}


def dense_twin(workload: dict) -> dict:
    """The ``groups=1`` conv with the same channels, pixels and kernel size as a group conv."""
    o, _, kh, kw = workload["kernel"]
    return {**workload, "kernel": [o, workload["data"][1], kh, kw], "groups": 1}


def _one_node(workload: dict) -> tuple[onnx.NodeProto, np.ndarray]:
    """The ONNX node computing ``workload`` from ``x`` and weight ``w``, and the weight."""
    rng = np.random.default_rng(0)
    op = x86.op_of(workload)
    if op == "dense":  # ONNX MatMul takes the weight as [K, M]
        weight = rng.uniform(-1, 1, workload["weight"][::-1]).astype(np.float32)
        return helper.make_node("MatMul", ["x", "w"], ["y"]), weight
    weight = rng.uniform(-1, 1, workload["kernel"]).astype(np.float32)
    attrs = {"strides": workload["strides"], "pads": workload["padding"],
             "dilations": workload["dilation"], "group": workload["groups"]}
    if op == "conv2d_transpose":
        return helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs,
                                output_padding=workload["output_padding"]), weight
    return helper.make_node("Conv", ["x", "w"], ["y"], **attrs), weight


def one_conv_model(workload: dict) -> onnx.ModelProto:
    """A one-node ONNX model (input ``x``, output ``y``) computing ``workload``'s op."""
    node, weight = _one_node(workload)
    out = x86.output_shape(workload)
    graph = helper.make_graph(
        [node], "conv",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, workload["data"])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, out)],
        [numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # ONNX Runtime 1.31 rejects IR 14
    return model


def _repeat_timer(call, min_repeat_ms: float):
    """A function timing one repeat of ``call`` (settle calls, then >= ``min_repeat_ms`` of calls), in ms."""
    for _ in range(3):
        call()
    start = time.perf_counter()
    call()
    number = max(1, math.ceil(min_repeat_ms / 1000 / (time.perf_counter() - start)))

    def one_repeat() -> float:
        call()  # settle: another runtime's threads may have run just before
        start = time.perf_counter()
        for _ in range(number):
            call()
        return (time.perf_counter() - start) / number * 1000

    return one_repeat


def ort_timer(workload: dict, threads: int, min_repeat_ms: float, spinning: bool):
    """Repeat timer of the one-node model in ONNX Runtime (same threads, spinning or not)."""
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
    def call(_bound=(x, y)) -> None:  # the binding points into x and y: they must outlive the timer
        session.run_with_iobinding(binding)

    return _repeat_timer(call, min_repeat_ms)


def hot_timer(workload: dict, knobs: dict, min_repeat_ms: float):
    """Repeat timer of graphtune's kernel called back to back (hot caches, like ORT's)."""
    import tvm

    target = x86.host_target()
    func = x86.kernel_func(workload, knobs, target).with_attr("global_symbol", "main")
    module = tvm.compile(func, target=target).jit()
    dev = tvm.cpu(0)
    rng = np.random.default_rng(1)
    args = [tvm.runtime.tensor(rng.uniform(-1, 1, shape).astype(np.float32), dev)
            for shape in x86.kernel_shapes(workload, knobs)]
    evaluator = module.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=int(min_repeat_ms))
    evaluator(*args)  # warm-up

    def one_repeat() -> float:
        module["main"](*args)  # settle: another runtime's threads may have run just before
        return evaluator(*args).mean * 1000

    return one_repeat


def interleaved(timers: dict, repeat: int) -> dict:
    """Median ms of each timer over ``repeat`` rounds, one repeat of each per round (shared-host noise
    hits every runtime alike). Each waits until the previous one's spinning threads are idle (TVM's
    spin ~150 ms after a parallel call, ORT's ~40 ms: see :func:`graphtune.latency.wait_idle`)."""
    times = {name: [] for name in timers}
    for _ in range(repeat):
        for name, timer in timers.items():
            wait_idle([None])
            times[name].append(timer())
    return {name: statistics.median(values) for name, values in times.items()}


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
    """``C->O kHxkW /s HxW`` label of a conv (``T`` for transposed), ``rows K->M`` of a dense."""
    op = x86.op_of(workload)
    if op == "dense":
        m, k = workload["weight"]
        return f"dense {'x'.join(map(str, workload['data'][:-1]))} {k}->{m}"
    _, c, h, w = workload["data"]
    _, o, oh, ow = x86.output_shape(workload)
    kh, kw = workload["kernel"][2:]
    if op == "conv2d_transpose":
        return f"{c}->{o} {kh}x{kw}/{workload['strides'][0]}T {h}x{w}->{oh}x{ow}"
    return f"{c}->{o} {kh}x{kw}/{workload['strides'][0]} {h}x{w}"


def sweep(workload: dict, budget: int, records: str | None, runner) -> tuple | None:
    """Measure ``budget`` candidates: ``(best record, tasks, good records, seconds)``, None if all fail."""
    tasks = [Task(x86.op_of(workload), workload, k)
             for k in x86.candidates(workload, max_candidates=budget)]
    start = time.perf_counter()
    swept = measure(tasks, records=records, runner=runner, progress=False)
    seconds = time.perf_counter() - start
    good = [r for r in swept if r.ok]
    if not good:
        print(f"{short(workload)}: every candidate failed: {swept[0].error}", file=sys.stderr)
        return None
    return min(good, key=lambda r: r.median_ms), tasks, good, seconds


def run(budget: int, repeat: int, min_repeat_ms: float, records: str | None,
        suite: str = "resnet50") -> dict:
    """Measure every workload of ``suite`` with graphtune and ONNX Runtime.

    Candidates are swept with measure()'s defaults (3 repeats of >= 100 ms,
    weights flushed before each call); the best one is then timed hot, back to
    back, in rounds interleaved with ONNX Runtime (same protocol, same moments:
    on a shared machine that keeps the ratio honest). Both get ``repeat`` repeats of
    at least ``min_repeat_ms``; ONNX Runtime is timed with its worker threads
    spinning and not, and credited with the faster.
    """
    threads = x86.num_threads()
    workloads = SUITES[suite]()
    rows = []
    with LocalRunner() as runner:
        for workload, nodes in workloads:
            found = sweep(workload, budget, records, runner)
            if found is None:
                continue
            best, tasks, good, seconds = found
            gt_cold_ms = best.median_ms
            timers = {"gt": hot_timer(workload, best.knobs, min_repeat_ms),
                      True: ort_timer(workload, threads, min_repeat_ms, True),
                      False: ort_timer(workload, threads, min_repeat_ms, False)}
            twin = dense_twin(workload) if x86.op_of(workload) == "group_conv2d" else None
            twin_best = twin and sweep(twin, budget, records, runner)
            if twin_best:
                timers["dense"] = hot_timer(twin, twin_best[0].knobs, min_repeat_ms)
            timed = interleaved(timers, repeat)
            gt_ms = timed.pop("gt")
            dense_ms = timed.pop("dense", None)
            # GFLOP/s of the group conv (useful FLOPs only) over its same-size dense twin's
            vs_dense = None if dense_ms is None else \
                (x86.flops(workload) / gt_ms) / (x86.flops(twin) / dense_ms)
            ort = timed
            ort_spinning = min(ort, key=ort.get)
            ort_ms = ort[ort_spinning]
            flop = x86.flops(workload)
            rows.append({
                "workload": workload, "nodes": nodes, "label": short(workload),
                "gt_ms": gt_ms, "gt_cold_ms": gt_cold_ms, "ort_ms": ort_ms,
                "ratio": ort_ms / gt_ms, "op": x86.op_of(workload), "vs_dense": vs_dense,
                "gflops": flop / gt_ms / 1e6, "ort_gflops": flop / ort_ms / 1e6,
                "ort_spinning": ort_spinning,
                "best_knobs": best.knobs, "candidates_measured": len(tasks),
                "candidates_failed": len(tasks) - len(good),
                "seconds_per_candidate": seconds / len(tasks),
            })
            print(f"  {short(workload):34s} gt {gt_ms:8.3f} ms  ort {ort_ms:8.3f} ms  "
                  f"ratio {ort_ms / gt_ms:5.2f}", file=sys.stderr, flush=True)
    ratios = [r["ratio"] for r in rows]
    sgemm = sgemm_gflops()
    observed = max([r["gflops"] for r in rows] + [r["ort_gflops"] for r in rows])
    measured = sum(r["candidates_measured"] for r in rows)
    return {
        "suite": suite, "threads": threads, "target": x86.target_key(x86.host_target()),
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
    print(f"{'workload':34s} {'nodes':>5s} {'gt ms':>8s} {'cold ms':>8s} {'ort ms':>8s} "
          f"{'ratio':>6s} {'GFLOP/s':>8s} {'vs dense':>8s} {'cands':>5s} {'s/cand':>6s}  best knobs")
    for r in result["workloads"]:
        print(f"{r['label']:34s} {len(r['nodes']):5d} {r['gt_ms']:8.3f} {r['gt_cold_ms']:8.3f} "
              f"{r['ort_ms']:8.3f} "
              f"{r['ratio']:6.2f} {r['gflops']:8.1f} "
              f"{'' if r['vs_dense'] is None else format(r['vs_dense'], '.2f'):>8s} "
              f"{r['candidates_measured']:5d} "
              f"{r['seconds_per_candidate']:6.2f}  {json.dumps(r['best_knobs'])}")
    print(f"geomean ratio (ort/gt) {result['geomean_ratio']:.3f}, min {result['min_ratio']:.3f}; "
          f"{result['seconds_per_candidate']:.2f} s per candidate over "
          f"{result['candidates_measured']}; threads {result['threads']}; peak estimate "
          f"{result['peak_gflops_estimate']:.0f} GFLOP/s (sgemm {result['sgemm_gflops']:.0f})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=sorted(SUITES), default="resnet50",
                        help="workloads: ResNet-50's convs, decoder transposed convs and token MLPs, the "
                             "group convs of ResNeXt-50 / RegNetY-800MF, or the depthwise convs of "
                             "MobileNetV3-Large / EfficientNet-B0")
    parser.add_argument("--quick", action="store_true",
                        help="3 candidates per workload, 3 repeats (< 3 min)")
    parser.add_argument("--budget", type=int, help="candidates per workload (default 24)")
    parser.add_argument("--records", help="records file to reuse and extend (default: none)")
    parser.add_argument("--json", help="write the results to this JSON file")
    args = parser.parse_args(argv)
    budget = args.budget or (3 if args.quick else 24)
    start = time.perf_counter()
    result = run(budget, 3 if args.quick else 10, 100.0, args.records, args.suite)
    result["wall_s"] = time.perf_counter() - start
    print_table(result)
    print(f"wall time {result['wall_s']:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
