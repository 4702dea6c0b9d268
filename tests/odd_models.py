"""Small ONNX models with ops outside graphtune's layout tables (built with onnx.helper).

``convnext_model``: a ConvNeXt-style net (7x7 depthwise conv, LayerNorm over
channels after a Transpose to NHWC, MatMul of the 4-D NHWC activation by
constant weights, GELU, Transpose back, residual add, mean-pool head).
``nms_model``: Conv -> ReduceMean -> Reshape -> NonMaxSuppression, whose
output shape depends on the data.
``exported_axes_model``: a head and a squeeze-excitation spelled as PyTorch's
``torch.onnx.export(dynamo=True)`` spells them (opset 20): ``ReduceMean`` over
axes ``[-1, -2]`` given as an input, a ``Concat`` on axis ``-3``.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["convnext_model", "nms_model", "exported_axes_model"]


class _Graph:
    """Collects nodes and seeded initializers."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []

    def const(self, name: str, array) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, name: str, shape, scale: float = 0.2) -> str:
        return self.const(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def node(self, op: str, inputs: list, name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def model(self, name: str, inputs: list, outputs: list, opset: int) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def _block(g: _Graph, x: str, prefix: str, dim: int) -> str:
    """One ConvNeXt block on an NCHW tensor of ``dim`` channels."""
    dw = g.node("Conv", [x, g.weight(f"{prefix}.dw.w", (dim, 1, 7, 7)),
                         g.weight(f"{prefix}.dw.b", (dim,))], f"{prefix}.dwconv",
                kernel_shape=[7, 7], pads=[3, 3, 3, 3], group=dim)
    nhwc = g.node("Transpose", [dw], f"{prefix}.to_nhwc", perm=[0, 2, 3, 1])
    ln = g.node("LayerNormalization", [nhwc, g.const(f"{prefix}.ln.g", np.ones(dim, np.float32)),
                                       g.weight(f"{prefix}.ln.b", (dim,))],
                f"{prefix}.norm", axis=-1, epsilon=1e-6)
    up = g.node("MatMul", [ln, g.weight(f"{prefix}.pw1.w", (dim, 4 * dim))], f"{prefix}.pw1")
    up = g.node("Add", [up, g.weight(f"{prefix}.pw1.b", (4 * dim,))], f"{prefix}.pw1.bias")
    # GELU, erf form: 0.5 x (1 + erf(x / sqrt 2))
    scaled = g.node("Mul", [up, g.const(f"{prefix}.rsqrt2", np.float32(1 / np.sqrt(2)))],
                    f"{prefix}.gelu.scale")
    erf = g.node("Erf", [scaled], f"{prefix}.gelu.erf")
    erf1 = g.node("Add", [erf, g.const(f"{prefix}.one", np.float32(1))], f"{prefix}.gelu.add")
    half = g.node("Mul", [up, g.const(f"{prefix}.half", np.float32(0.5))], f"{prefix}.gelu.half")
    act = g.node("Mul", [half, erf1], f"{prefix}.gelu")
    down = g.node("MatMul", [act, g.weight(f"{prefix}.pw2.w", (4 * dim, dim), 0.1)], f"{prefix}.pw2")
    down = g.node("Add", [down, g.weight(f"{prefix}.pw2.b", (dim,))], f"{prefix}.pw2.bias")
    nchw = g.node("Transpose", [down], f"{prefix}.to_nchw", perm=[0, 3, 1, 2])
    return g.node("Add", [x, nchw], f"{prefix}.residual")


def convnext_model(image_size: int = 32, dim: int = 32, blocks: int = 2,
                   classes: int = 10) -> onnx.ModelProto:
    """ConvNeXt-style classifier: 4x4/4 stem conv, ``blocks`` blocks, mean pool, Gemm.

    Examples
    --------
    >>> [n.op_type for n in convnext_model().graph.node][:3]
    ['Conv', 'Conv', 'Transpose']
    """
    g = _Graph(seed=0)
    x = g.node("Conv", ["input", g.weight("stem.w", (dim, 3, 4, 4)), g.weight("stem.b", (dim,))],
               "stem", kernel_shape=[4, 4], strides=[4, 4])
    for i in range(blocks):
        x = _block(g, x, f"stages.{i}", dim)
    pooled = g.node("ReduceMean", [x], "pool", axes=[2, 3], keepdims=0)
    g.node("Gemm", [pooled, g.weight("head.w", (classes, dim)), g.weight("head.b", (classes,))],
           "output", transB=1)
    return g.model(
        "convnext_style",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, image_size, image_size])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, classes])], opset=17)


def nms_model(size: int = 16) -> onnx.ModelProto:
    """Conv -> ReduceMean -> Reshape -> NonMaxSuppression (selected indices, shape [K, 3]).

    Boxes come from a 4-channel conv averaged over W (``[1, size, 4]``),
    scores from a 1-channel conv averaged the same way (``[1, 1, size]``).

    Examples
    --------
    >>> [n.op_type for n in nms_model().graph.node][-1]
    'NonMaxSuppression'
    """
    g = _Graph(seed=1)
    feats = g.node("Conv", ["input", g.weight("box.w", (4, 3, 3, 3)), g.weight("box.b", (4,))],
                   "box_conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    boxes = g.node("ReduceMean", [feats], "box_mean", axes=[3], keepdims=0)
    boxes = g.node("Reshape", [boxes, g.const("box_shape", np.array([1, size, 4], np.int64))],
                   "boxes")
    logits = g.node("Conv", ["input", g.weight("score.w", (1, 3, 3, 3)),
                             g.weight("score.b", (1,))], "score_conv",
                    kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    scores = g.node("ReduceMean", [logits], "score_mean", axes=[3], keepdims=0)
    g.node("NonMaxSuppression",
           [boxes, scores, g.const("max_out", np.array([5], np.int64)),
            g.const("iou", np.array([0.3], np.float32)),
            g.const("score_thr", np.array([-10.0], np.float32))], "output")
    return g.model(
        "nms",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("output", TensorProto.INT64, ["num_selected", 3])],
        opset=13)


def exported_axes_model(image_size: int = 16, classes: int = 10) -> onnx.ModelProto:
    """Conv -> ReLU -> SE (``ReduceMean`` over ``[-1, -2]``) and a conv branch, ``Concat`` on
    axis ``-3``, ``ReduceMean`` over ``[-1, -2]`` -> ``Reshape`` -> ``Gemm``: negative axes as
    torch's dynamo exporter writes them (in ``NCHW{x}c`` they are other axes).

    Examples
    --------
    >>> [n.op_type for n in exported_axes_model().graph.node if n.op_type in ("ReduceMean", "Concat")]
    ['ReduceMean', 'Concat', 'ReduceMean']
    """
    g = _Graph(seed=2)
    axes = g.const("spatial_axes", np.array([-1, -2], np.int64))
    x = g.node("Conv", ["input", g.weight("stem.w", (32, 3, 3, 3)), g.weight("stem.b", (32,))],
               "stem", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    x = g.node("Relu", [x], "stem.relu")
    squeezed = g.node("ReduceMean", [x, axes], "se.pool", keepdims=1)
    gate = g.node("Conv", [squeezed, g.weight("se.fc.w", (32, 32, 1, 1)), g.weight("se.fc.b", (32,))],
                  "se.fc", kernel_shape=[1, 1])
    gated = g.node("Mul", [x, g.node("Sigmoid", [gate], "se.gate")], "se.scale")
    branch = g.node("Conv", [x, g.weight("branch.w", (16, 32, 1, 1)), g.weight("branch.b", (16,))],
                    "branch", kernel_shape=[1, 1])
    cat = g.node("Concat", [gated, branch], "cat", axis=-3)
    pooled = g.node("ReduceMean", [cat, axes], "pool", keepdims=1)
    flat = g.node("Reshape", [pooled, g.const("flat_shape", np.array([1, 48], np.int64))], "flat")
    g.node("Gemm", [flat, g.weight("fc.w", (classes, 48)), g.weight("fc.b", (classes,))], "output",
           transB=1)
    return g.model(
        "exported_axes",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, image_size, image_size])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, classes])], opset=20)
