"""Batched non-max suppressions written with the coordinate trick, rewritten per class.

torchvision's ``batched_nms`` (every detector's last step, and the R-CNNs' region proposals per
feature level) exports its "coordinate trick": each box is shifted by ``label * (max coordinate
+ 1)`` so that boxes of different labels never overlap, then one single-class
``NonMaxSuppression`` runs over all of them. ONNX Runtime's suppression compares every box it
keeps with every box after it: SSDlite320's 27000 boxes of 90 labels took 78 ms of its 96 ms
post-processing (AMD EPYC Zen 4, 2 threads), where one suppression per label compares only
boxes of the same label. :func:`batched_nms` rewrites the trick as ONNX's multi-class
suppression on the unshifted boxes — scores ``[1, labels, N]`` (one row per label from the
smallest to the largest), each row a label's scores and minus infinity elsewhere, a score
threshold below every finite score — and sorts what it
selects by score, keeping ``max_output_boxes_per_class`` of them, into the single-class
``[K, 3]`` output the graph reads. The suppression in a subgraph (torchvision's ``If`` on an
empty input) is rewritten too.

The rule: a ``NonMaxSuppression`` without score threshold whose boxes are, through ``Cast`` /
``Unsqueeze`` / ``Slice`` (of everything), ``Add(B, offsets[:, None])`` with ``offsets =
Mul(Cast(L), Add(ReduceMax(B), c))`` and whose scores are ``S`` through ``Cast`` /
``Unsqueeze``, where B is ``[N, 4]``, L ``[N]`` integer labels and S ``[N]``. The same boxes
are kept (the trick only separates labels; a shifted box's IoU with its own label's boxes is
the unshifted one up to the rounding the shift adds) in the same order up to ties of equal scores.

Examples
--------
>>> import numpy as np
>>> import onnxruntime as ort
>>> model = coordinate_trick_model()
>>> rewritten = batched_nms(model)
>>> [(n.op_type, len(n.input)) for n in rewritten.graph.node if n.op_type == "NonMaxSuppression"]
[('NonMaxSuppression', 5)]
>>> rng = np.random.default_rng(0)
>>> xy = rng.uniform(0, 50, (200, 2)).astype(np.float32)
>>> feeds = {"boxes": np.concatenate([xy, xy + rng.uniform(5, 20, (200, 2)).astype(np.float32)], 1),
...          "scores": rng.random(200, dtype=np.float32), "labels": rng.integers(0, 5, 200)}
>>> def run(m):
...     session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
...     return session.run(None, feeds)[0]
>>> bool((run(model) == run(rewritten)).all())
True
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["batched_nms", "coordinate_trick_model"]

_PASS = ("Cast", "Unsqueeze", "Squeeze", "Identity")
"""Ops the boxes and scores pass through between the trick and the suppression."""


def batched_nms(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its coordinate-trick suppressions rewritten per label (module docstring);
    the model itself when it has none."""
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    return rewritten if _rewrite(rewritten.graph, {}) else model


def _rewrite(graph: onnx.GraphProto, outer: dict[str, onnx.NodeProto]) -> bool:
    """Rewrite the suppressions of ``graph`` and its subgraphs (``outer``: producers of the
    names enclosing graphs define); True if any was."""
    producers = {**outer, **{o: n for n in graph.node for o in n.output}}
    changed = False
    for node in list(graph.node):
        for attr in node.attribute:
            for sub in [attr.g] * (attr.type == onnx.AttributeProto.GRAPH) + list(attr.graphs):
                changed |= _rewrite(sub, producers)
        if node.op_type != "NonMaxSuppression" or len([i for i in node.input if i]) != 4:
            continue
        found = _trick(node, producers)
        if found is None:
            continue
        boxes, labels, scores = found
        index = list(graph.node).index(node)
        graph.node.remove(node)
        for k, new in enumerate(_per_label(node, boxes, labels, scores)):
            graph.node.insert(index + k, new)
        changed = True
    return changed


def _through(name: str, producers: dict[str, onnx.NodeProto], ops: tuple = _PASS) -> str:
    """``name`` followed back through ``ops`` (and ``Slice``s of everything) to its source."""
    while name in producers:
        node = producers[name]
        if node.op_type in ops or (node.op_type == "Slice" and _whole_slice(node, producers)):
            name = node.input[0]
        else:
            break
    return name


def _whole_slice(node: onnx.NodeProto, producers: dict[str, onnx.NodeProto]) -> bool:
    """True if the ``Slice`` takes everything: starts 0, ends INT64_MAX (constants)."""
    values = [_constant(name, producers) for name in node.input[1:3]]
    return (len(node.input) >= 3 and values[0] is not None and values[1] is not None
            and bool((values[0] == 0).all()) and bool((values[1] >= 2**62).all()))


def _constant(name: str, producers: dict[str, onnx.NodeProto]) -> np.ndarray | None:
    node = producers.get(name)
    if node is not None and node.op_type == "Constant" and node.attribute \
            and node.attribute[0].name == "value":
        return numpy_helper.to_array(node.attribute[0].t)
    return None


def _trick(node: onnx.NodeProto, producers: dict[str, onnx.NodeProto]) -> tuple[str, str, str] | None:
    """``(B, L, S)`` of a coordinate-trick suppression (module docstring's rule), else None."""
    shifted = producers.get(_through(node.input[0], producers))
    if shifted is None or shifted.op_type != "Add":
        return None
    for boxes, shift in (shifted.input, reversed(shifted.input)):
        offsets = producers.get(_through(shift, producers))
        if offsets is None or offsets.op_type != "Mul":
            continue
        for label_side, spacing_side in (offsets.input, reversed(offsets.input)):
            spacing = producers.get(spacing_side)
            if spacing is None or spacing.op_type != "Add":
                continue
            top = next((producers[i] for i in spacing.input if i in producers
                        and producers[i].op_type == "ReduceMax"), None)
            if top is None or top.input[0] != boxes:
                continue
            labels = _through(label_side, producers, ("Cast",))
            return boxes, labels, _through(node.input[1], producers)
    return None


def _per_label(node: onnx.NodeProto, boxes: str, labels: str, scores: str) -> list[onnx.NodeProto]:
    """Nodes computing ``node``'s single-class ``[K, 3]`` output by a suppression per label."""
    p = f"{node.name or node.output[0]}/per_label"
    make = helper.make_node

    def const(name: str, value) -> onnx.NodeProto:
        return make("Constant", [], [f"{p}/{name}"], name=f"{p}/{name}",
                    value=numpy_helper.from_array(np.asarray(value), f"{p}/{name}"))

    max_out, iou = node.input[2], node.input[3]
    return [
        const("zero", np.int64(0)), const("one", np.int64(1)), const("axis0", np.array([0], np.int64)),
        const("axis1", np.array([1], np.int64)), const("col", np.int64(2)),
        const("minus_inf", np.float32(-np.inf)),
        const("lowest", np.array([np.finfo(np.float32).min], np.float32)),
        make("Cast", [labels], [f"{p}/labels"], name=f"{p}/labels", to=TensorProto.INT64),
        make("ReduceMin", [f"{p}/labels"], [f"{p}/first"], name=f"{p}/first", keepdims=0),
        make("ReduceMax", [f"{p}/labels"], [f"{p}/top"], name=f"{p}/top", keepdims=0),
        make("Add", [f"{p}/top", f"{p}/one"], [f"{p}/end"], name=f"{p}/end"),
        make("Range", [f"{p}/first", f"{p}/end", f"{p}/one"], [f"{p}/classes"], name=f"{p}/classes"),
        make("Unsqueeze", [f"{p}/classes", f"{p}/axis1"], [f"{p}/classes2"], name=f"{p}/classes2"),
        make("Unsqueeze", [f"{p}/labels", f"{p}/axis0"], [f"{p}/labels2"], name=f"{p}/labels2"),
        make("Equal", [f"{p}/classes2", f"{p}/labels2"], [f"{p}/mine"], name=f"{p}/mine"),
        make("Cast", [scores], [f"{p}/scores"], name=f"{p}/scores", to=TensorProto.FLOAT),
        make("Unsqueeze", [f"{p}/scores", f"{p}/axis0"], [f"{p}/scores2"], name=f"{p}/scores2"),
        make("Where", [f"{p}/mine", f"{p}/scores2", f"{p}/minus_inf"], [f"{p}/masked"],
             name=f"{p}/masked"),
        make("Unsqueeze", [f"{p}/masked", f"{p}/axis0"], [f"{p}/scores3"], name=f"{p}/scores3"),
        make("Cast", [boxes], [f"{p}/boxes"], name=f"{p}/boxes", to=TensorProto.FLOAT),
        make("Unsqueeze", [f"{p}/boxes", f"{p}/axis0"], [f"{p}/boxes3"], name=f"{p}/boxes3"),
        make("NonMaxSuppression", [f"{p}/boxes3", f"{p}/scores3", max_out, iou, f"{p}/lowest"],
             [f"{p}/selected"], name=f"{p}/nms"),
        make("Gather", [f"{p}/selected", f"{p}/col"], [f"{p}/index"], name=f"{p}/index", axis=1),
        make("Gather", [f"{p}/scores", f"{p}/index"], [f"{p}/kept_scores"], name=f"{p}/kept_scores"),
        make("Shape", [f"{p}/index"], [f"{p}/kept"], name=f"{p}/kept"),
        make("Reshape", [max_out, f"{p}/axis1"], [f"{p}/limit"], name=f"{p}/limit"),
        make("Min", [f"{p}/kept", f"{p}/limit"], [f"{p}/k"], name=f"{p}/k"),
        make("TopK", [f"{p}/kept_scores", f"{p}/k"], [f"{p}/best", f"{p}/order"], name=f"{p}/topk",
             largest=1, sorted=1),
        make("Gather", [f"{p}/index", f"{p}/order"], [f"{p}/ranked"], name=f"{p}/ranked"),
        make("Unsqueeze", [f"{p}/ranked", f"{p}/axis1"], [f"{p}/ranked2"], name=f"{p}/ranked2"),
        make("Mul", [f"{p}/ranked2", f"{p}/zero"], [f"{p}/zeros"], name=f"{p}/zeros"),
        make("Concat", [f"{p}/zeros", f"{p}/zeros", f"{p}/ranked2"], [node.output[0]],
             name=f"{p}/selected_single", axis=1),
    ]


def coordinate_trick_model(max_out: int = 2**63 - 1, iou: float = 0.5) -> onnx.ModelProto:
    """A model running torchvision's coordinate-trick suppression on ``boxes`` ``[N, 4]``,
    ``scores`` ``[N]`` and integer ``labels`` ``[N]``; its output the kept box indices."""
    make = helper.make_node
    consts = {"one": np.float32(1), "axis0": np.array([0], np.int64), "axis1": np.array([1], np.int64),
              "max_out": np.array([max_out], np.int64), "iou": np.array([iou], np.float32),
              "col": np.array([2], np.int64)}
    nodes = [make("ReduceMax", ["boxes"], ["max_coordinate"], keepdims=0),
             make("Cast", ["labels"], ["labels_f"], to=TensorProto.FLOAT),
             make("Add", ["max_coordinate", "one"], ["spacing"]),
             make("Mul", ["labels_f", "spacing"], ["offsets"]),
             make("Unsqueeze", ["offsets", "axis1"], ["offsets2"]),
             make("Add", ["boxes", "offsets2"], ["boxes_for_nms"]),
             make("Unsqueeze", ["boxes_for_nms", "axis0"], ["boxes3"]),
             make("Unsqueeze", ["scores", "axis0"], ["scores2"]),
             make("Unsqueeze", ["scores2", "axis0"], ["scores3"]),
             make("NonMaxSuppression", ["boxes3", "scores3", "max_out", "iou"], ["selected"], name="nms"),
             make("Gather", ["selected", "col"], ["column"], axis=1),
             make("Squeeze", ["column", "axis1"], ["keep"])]
    graph = helper.make_graph(
        nodes, "batched_nms",
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["n", 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n"]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("keep", TensorProto.INT64, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
