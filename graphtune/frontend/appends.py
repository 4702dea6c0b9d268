"""Loops that grow a tensor by concatenation, rewritten to stack their rows once.

torchvision's Mask R-CNN exports its mask pasting (``paste_masks_in_image``) as an ONNX
``Loop`` over the detections whose body appends each pasted mask to a loop-carried tensor:
``res = Concat(res, Unsqueeze(mask, 0), axis=0)``. Iteration ``i`` copies the ``i`` masks
before it, so ``n`` detections copy ``n^2 / 2`` image-sized masks; on a Mask R-CNN at 320 px
with 100 detections that concatenation alone was a tenth of ONNX Runtime's whole run.
:func:`loop_appends` makes each such row a *scan output* of the loop instead (the loop stacks
them once, along a new first axis) and concatenates the carried tensor's initial value in
front after the loop: the same tensor, each mask copied once.

The rule: a loop-carried value ``v`` whose next value is ``Concat(v, x, axis=0)`` with ``x =
Unsqueeze(y, axes=[0])``, where nothing else in the body reads ``v`` or its next value, and the
loop's final ``v`` is used. Then the final ``v`` is ``Concat(v_initial, stack(y_0 ..
y_{n-1}), axis=0)``. :func:`graphtune.partition.plan` applies it to the part ONNX Runtime runs.

Examples
--------
>>> import numpy as np
>>> from onnx import TensorProto as T, helper
>>> body = helper.make_graph([
...     helper.make_node("Cast", ["i"], ["i_float"], to=T.FLOAT),
...     helper.make_node("Add", ["x", "i_float"], ["row"]),
...     helper.make_node("Constant", [], ["first"], value_ints=[0]),
...     helper.make_node("Unsqueeze", ["row", "first"], ["row1"]),
...     helper.make_node("Concat", ["rows", "row1"], ["rows_next"], axis=0),
...     helper.make_node("Identity", ["cond"], ["cond_next"])],
...     "body", [helper.make_tensor_value_info("i", T.INT64, []),
...              helper.make_tensor_value_info("cond", T.BOOL, []),
...              helper.make_tensor_value_info("rows", T.FLOAT, None)],
...     [helper.make_tensor_value_info("cond_next", T.BOOL, []),
...      helper.make_tensor_value_info("rows_next", T.FLOAT, None)])
>>> graph = helper.make_graph([helper.make_node("Loop", ["n", "", "empty"], ["out"], name="paste",
...                                             body=body)], "g",
...     [helper.make_tensor_value_info("n", T.INT64, []),
...      helper.make_tensor_value_info("empty", T.FLOAT, [None, 4]),
...      helper.make_tensor_value_info("x", T.FLOAT, [4])],
...     [helper.make_tensor_value_info("out", T.FLOAT, [None, 4])])
>>> model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
>>> rewritten = loop_appends(model)
>>> [n.op_type for n in rewritten.graph.node], list(rewritten.graph.node[0].output)
(['Loop', 'Concat'], ['paste/row'])
>>> import onnxruntime as ort
>>> feeds = {"n": np.array(3), "empty": np.zeros((0, 4), np.float32), "x": np.ones(4, np.float32)}
>>> def run(m):
...     session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
...     return session.run(None, feeds)[0]
>>> run(rewritten).tolist() == run(model).tolist() == [[1.0] * 4, [2.0] * 4, [3.0] * 4]
True
"""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from .fold import drop_dead, names_read

__all__ = ["loop_appends"]


def loop_appends(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the appending loops of its graph rewritten (module docstring's rule);
    ``model`` itself when it has none."""
    consts = {t.name: t for t in model.graph.initializer}
    nodes: list[onnx.NodeProto] = []
    changed = False
    for node in model.graph.node:
        stacked = _stacking(node, consts)
        changed |= stacked is not None
        nodes += stacked or [node]
    if not changed:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def _stacking(loop: onnx.NodeProto, consts: dict[str, onnx.TensorProto]
              ) -> list[onnx.NodeProto] | None:
    """The loop with its appended rows as scan outputs, then one concat per appended value;
    None when ``loop`` is no loop or appends nothing by the rule."""
    if loop.op_type != "Loop":
        return None
    body = next(a.g for a in loop.attribute if a.name == "body")
    carried = len(loop.input) - 2
    producer = {o: n for n in body.node for o in n.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in body.node:
        for name in names_read(n):
            readers.setdefault(name, []).append(n)
    appended: dict[int, tuple[str, onnx.NodeProto]] = {}
    for k in range(carried):
        value, nxt = body.input[2 + k].name, body.output[1 + k].name
        concat = producer.get(nxt)
        if (concat is None or concat.op_type != "Concat" or _axis(concat) != 0
                or list(concat.input[:1]) != [value] or len(concat.input) != 2
                or readers.get(value) != [concat] or nxt in readers or not loop.output[k]):
            continue
        row = _unsqueezed_first(producer.get(concat.input[1]), producer, consts)
        if row is not None:
            appended[k] = (row, concat)
    if not appended:
        return None
    new_body = onnx.GraphProto()
    new_body.CopyFrom(body)
    dropped = {id(concat) for _, concat in appended.values()}
    del new_body.node[:]
    new_body.node.extend(n for n in body.node if id(n) not in dropped)
    kept = [k for k in range(carried) if k not in appended]
    del new_body.input[:], new_body.output[:]
    new_body.input.extend([body.input[0], body.input[1]] + [body.input[2 + k] for k in kept])
    scans = list(body.output[1 + carried:])
    new_body.output.extend([body.output[0]] + [body.output[1 + k] for k in kept] + scans + [
        helper.make_tensor_value_info(row, body.output[1 + k].type.tensor_type.elem_type, None)
        for k, (row, _) in appended.items()])
    drop_dead(new_body)
    name = loop.name or loop.output[0]
    stacked = {k: f"{name}/{row}" for k, (row, _) in appended.items()}
    new_loop = helper.make_node(
        "Loop", [loop.input[0], loop.input[1]] + [loop.input[2 + k] for k in kept],
        [loop.output[k] for k in kept] + list(loop.output[carried:]) + list(stacked.values()),
        name=loop.name, body=new_body)
    return [new_loop] + [
        helper.make_node("Concat", [loop.input[2 + k], stacked[k]], [loop.output[k]],
                         name=f"{stacked[k]}/append", axis=0)
        for k in appended]


def _axis(node: onnx.NodeProto) -> int | None:
    return next((a.i for a in node.attribute if a.name == "axis"), None)


def _unsqueezed_first(node: onnx.NodeProto | None, producer: dict[str, onnx.NodeProto],
                      consts: dict[str, onnx.TensorProto]) -> str | None:
    """``y`` if ``node`` is ``Unsqueeze(y, axes=[0])`` (axes an attribute, a body
    ``Constant`` or an outer initializer), else None."""
    if node is None or node.op_type != "Unsqueeze":
        return None
    axes = next((list(a.ints) for a in node.attribute if a.name == "axes"), None)
    if axes is None and len(node.input) == 2:
        source = producer.get(node.input[1])
        if source is not None and source.op_type == "Constant":
            attr = source.attribute[0]
            axes = (list(attr.ints) if attr.name == "value_ints"
                    else numpy_helper.to_array(attr.t).reshape(-1).tolist() if attr.name == "value"
                    else None)
        elif node.input[1] in consts:
            axes = numpy_helper.to_array(consts[node.input[1]]).reshape(-1).tolist()
    return node.input[0] if axes == [0] else None
