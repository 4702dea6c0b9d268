"""A detector with post-processing TVM cannot import whole: ONNX Runtime vs graphtune's partition.

The zoo's SSD-ResNet-50 (``ssd_resnet50_512`` at ``--image-size``) with a post-processing
graph appended the way exporters write it: softmax over classes, best foreground score per
anchor, boxes decoded against constant anchors, the top 200 anchors (``TopK``),
``NonMaxSuppression`` and the kept boxes and scores gathered by its selected indices. The
suppression's readers make graphtune cut there (``docs/partition.md``): TVM compiles the
network and the top-k, ONNX Runtime runs the suppression and the gathers. Prints ONNX
Runtime (whole model) vs the partitioned model and the time of each part, in ms (medians of
interleaved rounds, each runtime first in turn, ``TVM_NUM_THREADS`` threads for both, ONNX
Runtime's without spinning as in the partition), and how far the outputs are from ONNX
Runtime's, beside how far ONNX Runtime's own are with its graph optimisations off.

``--model FILE.onnx`` takes a detector exported with its post-processing instead, e.g.
torchvision's (``benchmarks/export_torchvision.py --exporter torchscript --models
ssdlite320_mobilenet_v3_large``); ``--json PATH`` writes the figures.

Examples
--------
``TVM_NUM_THREADS=2 .venv/bin/python benchmarks/partition_detector.py --image-size 320
--max-candidates 8 --records out/partition.records.jsonl``
``TVM_NUM_THREADS=2 .venv/bin/python benchmarks/partition_detector.py --model
out/exported/ssdlite320_mobilenet_v3_large.torchscript.onnx --records out/ssdlite.records.jsonl``
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import graphtune
from graphtune import models
from graphtune.frontend.cut import onnxruntime_session
from graphtune.numerics import max_abs_diff
from runinfo import cpu_name

RELATIVE_TOLERANCE = 1e-4
"""Largest max |diff| / max |output| of any output against ONNX Runtime that counts as a match."""


def detector(image_size: int, top: int = 200) -> onnx.ModelProto:
    """SSD-ResNet-50 with softmax, box decoding, top-k and non-max suppression appended."""
    model = models.get("ssd_resnet50_512", image_size=image_size)
    loc, conf = (o.name for o in model.graph.output)
    anchors = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim][1]
    rng = np.random.default_rng(0)
    centers = rng.uniform(0, 1, (1, anchors, 2)).astype(np.float32)
    sizes = rng.uniform(0.05, 0.5, (1, anchors, 2)).astype(np.float32)
    consts = {"anchor_centers": centers, "anchor_sizes": sizes, "variance": np.float32(0.1),
              "half": np.float32(0.5), "k": np.array([min(top, anchors)], np.int64),
              "fg_start": np.array([1], np.int64), "fg_end": np.array([1 << 30], np.int64),
              "class_axis": np.array([2], np.int64), "xy_start": np.array([0], np.int64),
              "xy_end": np.array([2], np.int64), "wh_end": np.array([4], np.int64),
              "max_out": np.array([100], np.int64), "iou": np.array([0.5], np.float32),
              "score_thr": np.array([0.0], np.float32), "box_col": np.int64(2),
              "batch": np.array([0], np.int64)}
    nodes = [
        helper.make_node("Softmax", [conf], ["probs"], name="post.softmax", axis=2),
        helper.make_node("Slice", ["probs", "fg_start", "fg_end", "class_axis"], ["fg"],
                         name="post.foreground"),
        helper.make_node("ReduceMax", ["fg"], ["score"], name="post.best", axes=[2], keepdims=0),
        helper.make_node("Slice", [loc, "xy_start", "xy_end", "class_axis"], ["dxy"], name="post.dxy"),
        helper.make_node("Slice", [loc, "xy_end", "wh_end", "class_axis"], ["dwh"], name="post.dwh"),
        helper.make_node("Mul", ["dxy", "variance"], ["dxy_s"], name="post.dxy_scale"),
        helper.make_node("Mul", ["dxy_s", "anchor_sizes"], ["dxy_a"], name="post.dxy_size"),
        helper.make_node("Add", ["dxy_a", "anchor_centers"], ["cxy"], name="post.center"),
        helper.make_node("Mul", ["dwh", "variance"], ["dwh_s"], name="post.dwh_scale"),
        helper.make_node("Exp", ["dwh_s"], ["dwh_e"], name="post.dwh_exp"),
        helper.make_node("Mul", ["dwh_e", "anchor_sizes"], ["wh"], name="post.size"),
        helper.make_node("Mul", ["wh", "half"], ["half_wh"], name="post.half_size"),
        helper.make_node("Sub", ["cxy", "half_wh"], ["xy0"], name="post.corner0"),
        helper.make_node("Add", ["cxy", "half_wh"], ["xy1"], name="post.corner1"),
        helper.make_node("Concat", ["xy0", "xy1"], ["boxes"], name="post.boxes", axis=2),
        helper.make_node("TopK", ["score", "k"], ["top_score", "top_index"], name="post.topk",
                         axis=1),
        helper.make_node("Squeeze", ["top_index", "batch"], ["top_flat"], name="post.top_flat"),
        helper.make_node("Gather", ["boxes", "top_flat"], ["top_boxes"], name="post.top_boxes",
                         axis=1),
        helper.make_node("Unsqueeze", ["top_score", "batch"], ["nms_scores"], name="post.nms_scores"),
        helper.make_node("NonMaxSuppression", ["top_boxes", "nms_scores", "max_out", "iou",
                                               "score_thr"], ["selected"], name="post.nms"),
        helper.make_node("Gather", ["selected", "box_col"], ["keep"], name="post.keep", axis=1),
        helper.make_node("Squeeze", ["top_boxes", "batch"], ["cand_boxes"], name="post.cand_boxes"),
        helper.make_node("Gather", ["cand_boxes", "keep"], ["det_boxes"], name="post.det_boxes",
                         axis=0),
        helper.make_node("Squeeze", ["top_score", "batch"], ["cand_scores"], name="post.cand_scores"),
        helper.make_node("Gather", ["cand_scores", "keep"], ["det_scores"], name="post.det_scores",
                         axis=0),
    ]
    graph = model.graph
    graph.node.extend(nodes)
    graph.initializer.extend(numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items())
    del graph.output[:]
    graph.output.extend([helper.make_tensor_value_info("det_boxes", TensorProto.FLOAT, ["n", 4]),
                         helper.make_tensor_value_info("det_scores", TensorProto.FLOAT, ["n"])])
    onnx.checker.check_model(model)
    return model


def relative_diffs(ours: list[np.ndarray], theirs: list[np.ndarray]) -> list[float]:
    """Per output: max |ours - theirs| over max |theirs| (a box's few 1e-3 px on a 320 px image
    from fp32 summation order, amplified by the box decoding); inf when the shapes differ."""
    return [max_abs_diff(a, b) / max(float(np.max(np.abs(b.astype(np.float64)))), 1e-30)
            if b.size else max_abs_diff(a, b) for a, b in zip(ours, theirs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image-size", type=int, default=320)
    parser.add_argument("--max-candidates", type=int, default=8)
    parser.add_argument("--records", default="out/partition.records.jsonl")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--no-final-check", action="store_true",
                        help="keep the solver's config (a rerun from complete records)")
    parser.add_argument("--model", metavar="FILE", help="an exported detector (.onnx) instead of the "
                        "zoo's SSD with appended post-processing")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()
    os.makedirs(os.path.dirname(args.records) or ".", exist_ok=True)
    model = onnx.load(args.model) if args.model else detector(args.image_size)
    threads = int(os.environ["TVM_NUM_THREADS"])
    # ONNX Runtime alone, as the partition runs its part: without spinning threads, which would
    # slow whichever runtime comes next in the interleaved rounds (../shared/benchmark-notes.md)
    session = onnxruntime_session(model, threads)
    start = time.perf_counter()
    result = graphtune.tune(model, records=args.records, max_candidates=args.max_candidates,
                            final_check=not args.no_final_check)
    print(f"tune: {time.perf_counter() - start:.0f} s; {result.summary()}")
    compiled = graphtune.compile(model, result.config)
    print(compiled.summary())
    inputs = compiled.random_inputs(seed=0)
    feeds = dict(zip(compiled.input_names, inputs))
    ours, theirs = compiled(*inputs), session.run(None, feeds)
    ours = ours if isinstance(ours, (list, tuple)) else [ours]
    diffs = relative_diffs(ours, theirs)
    verdict = "match" if max(diffs) <= RELATIVE_TOLERANCE else "DIFFER FROM"
    print(f"outputs {verdict} ONNX Runtime (max |diff| / max |output| per output "
          f"{', '.join(f'{d:.1e}' for d in diffs)}; tolerance {RELATIVE_TOLERANCE:g}): "
          f"{[np.shape(a) for a in ours]}")
    # how far ONNX Runtime moves from itself with another summation order: its graph
    # optimisations off (no conv + add fusion, other kernels)
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain.intra_op_num_threads = threads
    unoptimised = ort.InferenceSession(model.SerializeToString(), plain,
                                       providers=["CPUExecutionProvider"]).run(None, feeds)
    ort_spread = relative_diffs(unoptimised, theirs)
    print(f"ONNX Runtime without graph optimisations against itself (per output): "
          f"{', '.join(f'{d:.1e}' for d in ort_spread)}")
    run_ort = lambda: session.run(None, feeds)  # noqa: E731
    run_gt = compiled.bound_call(*inputs)
    times: dict[str, list[float]] = {"onnxruntime": [], "partitioned": []}
    order = [("onnxruntime", run_ort), ("partitioned", run_gt)]
    for round_ in range(args.rounds):
        for name, call in order[round_ % 2:] + order[:round_ % 2]:  # each goes first in turn
            call()
            begin = time.perf_counter()
            for _ in range(5):
                call()
            times[name].append((time.perf_counter() - begin) / 5 * 1e3)
    parts = compiled.time_parts(repeat=5 * args.rounds)
    ort_ms, gt_ms = (float(np.median(times[k])) for k in ("onnxruntime", "partitioned"))
    figures = {"model": args.model or f"ssd_resnet50_512@{args.image_size}+nms",
               "cpu": cpu_name(),
               "threads": threads, "onnxruntime_ms": ort_ms, "partitioned_ms": gt_ms,
               "speedup_vs_ort": ort_ms / gt_ms, "tvm_part_ms": float(np.median(parts["tvm"])),
               "onnxruntime_part_ms": float(np.median(parts["onnxruntime"])),
               "row_regions_ms": float(np.median(parts["rows"])) if "rows" in parts else None,
               "predicted_ms": result.predicted_ms, "relative_diffs": diffs,
               "onnxruntime_unoptimised_diffs": ort_spread,
               "output_shapes": [list(np.shape(a)) for a in ours], "partition": compiled.summary()}
    print(f"ONNX Runtime {ort_ms:.2f} ms | partitioned {gt_ms:.2f} ms (ORT/partitioned "
          f"{ort_ms / gt_ms:.2f}) | parts: tvm {figures['tvm_part_ms']:.2f} ms, onnxruntime "
          f"{figures['onnxruntime_part_ms']:.3f} ms"
          + (f", row regions (tvm) {figures['row_regions_ms']:.2f} ms" if "rows" in parts else "")
          + " | predicted (all parts) "
          f"{result.predicted_ms:.2f} ms")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(figures, handle, indent=1)


if __name__ == "__main__":
    main()
