"""Tiny hand-built ONNX models for the reliability tests (compile in well under a second)."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ort = None

def _model(nodes, inits, dims, name="tiny"):
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(dims))],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model

def _conv(nodes, inits, rng, name, src, cin, cout, kernel):
    inits.append(numpy_helper.from_array(
        (rng.standard_normal((cout, cin, *kernel)) * 0.2).astype(np.float32), name + ".w"))
    inits.append(numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32),
                                         name + ".b"))
    nodes.append(helper.make_node("Conv", [src, name + ".w", name + ".b"], [name], name=name,
                                  kernel_shape=list(kernel), pads=[k // 2 for k in kernel] * 2))

def residual(dims=(1, 8, 8, 8)) -> onnx.ModelProto:
    """input -> conv a (8->16) -> conv b (16->16) -> join sum = a + b -> relu -> output."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    _conv(nodes, inits, rng, "a", "input", 8, 16, (3, 3))
    _conv(nodes, inits, rng, "b", "a", 16, 16, (3, 3))
    nodes.append(helper.make_node("Add", ["a", "b"], ["sum"], name="sum"))
    nodes.append(helper.make_node("Relu", ["sum"], ["output"], name="act"))
    return _model(nodes, inits, dims, "residual")

def conv_nd(rank: int) -> onnx.ModelProto:
    """One Conv of ``rank`` spatial dimensions (1: Conv1d, 3: Conv3d), then Relu."""
    rng = np.random.default_rng(1)
    nodes, inits = [], []
    _conv(nodes, inits, rng, f"conv{rank}d", "input", 4, 8, (3,) * rank)
    nodes.append(helper.make_node("Relu", [f"conv{rank}d"], ["output"], name="act"))
    return _model(nodes, inits, (1, 4) + (6,) * rank, f"conv{rank}d")

def ort_outputs(model: onnx.ModelProto, inputs: list) -> list:
    """What ONNX Runtime computes for ``inputs`` (one thread)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs)))

def assert_matches_ort(model: onnx.ModelProto, compiled) -> None:
    """``compiled`` computes what ONNX Runtime computes (rtol = atol = 1e-4)."""
    inputs = compiled.random_inputs(seed=1)
    got = compiled(*inputs)
    got = got if isinstance(got, list) else [got]
    expected = ort_outputs(model, inputs)
    assert len(got) == len(expected)
    for ours, theirs in zip(got, expected):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
