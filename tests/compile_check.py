"""Checks on compiled models shared by the compile tests.

Agreement with ONNX Runtime, the layout transforms a compiled module runs (and that they are
the solver graph's: the contract of issue 9), configs with chosen blocks, and the zoo models
compiled by default.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import onnx
from onnx import helper, numpy_helper
from tvm import relax
from tvm.ir.expr import Constant

from graphtune import x86
from graphtune.compiler.driver import rewrite_model
from graphtune.compiler.int8 import dequantized
from graphtune.compiler.rewrite import TRANSFORM_ATTR
from graphtune.config import Config
from graphtune.frontend import import_model
from graphtune.frontend.walk import bindings
from graphtune.solve import Solution
from onnx_blocks import onnx_model

# (model, image size) that tests/test_compile.py compiles by default (the rest: tests/test_schedules.py)
SMALL = [("resnet18", 32), ("mobilenet_v2", 32), ("inception_v3", 75), ("densenet121", 32),
         ("ssd_resnet50_512", 64), ("resnext50_32x4d", 32), ("regnet_y_800mf", 32)]


# ------------------------------------------------------------------ ONNX Runtime
def ort_session(model: onnx.ModelProto, optimized: bool = True):
    """An ONNX Runtime session of ``model`` on one thread. ``optimized=False`` runs the graph as
    written, its QDQ reference semantics: optimized, its int8 convs on CPUs without VNNI multiply
    with the saturating ``vpmaddubsw`` and are off by whole output steps."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    if not optimized:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])


def ort_runs(model: onnx.ModelProto, feeds: list[dict], optimized: bool = True) -> list[list]:
    """Every output of ONNX Runtime (:func:`ort_session`) for each feed dict of ``feeds``."""
    session = ort_session(model, optimized)
    return [session.run(None, feed) for feed in feeds]


def ort_outputs(model: onnx.ModelProto, inputs: list, optimized: bool = True) -> list:
    """What ONNX Runtime (:func:`ort_session`) computes for the positional ``inputs``."""
    session = ort_session(model, optimized)
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs, strict=True)))


def assert_matches_ort(model: onnx.ModelProto, compiled) -> None:
    """``compiled`` computes what ONNX Runtime computes (rtol = atol = 1e-4)."""
    inputs = compiled.random_inputs(seed=1)
    got = compiled(*inputs)
    got = got if isinstance(got, list) else [got]
    expected = ort_outputs(model, inputs)
    assert len(got) == len(expected)
    for ours, theirs in zip(got, expected, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------ layout transforms
def transforms_in(mod) -> list:
    """``"src->dst"`` of every layout transform main calls, once per call."""
    found = []

    def visit(expr):
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", "") == "relax.call_tir":
            attrs = mod[expr.args[0]].attrs
            if attrs is not None and TRANSFORM_ATTR in attrs:
                found.append(str(attrs[TRANSFORM_ATTR]))

    relax.analysis.post_order_visit(mod["main"].body, visit)
    return found


def _tensor(name: str) -> str:
    """Relax writes ``layer1.0.conv1`` as ``layer1_0_conv1`` in emitted variables."""
    return re.sub(r"\W", "_", name)


def module_transforms(mod) -> Counter:
    """``(tensor, src, dst)`` of every layout transform ``main`` calls, once per call."""
    found: Counter = Counter()

    def visit(expr):
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", "") == "relax.call_tir":
            attrs = mod[expr.args[0]].attrs
            if attrs is not None and TRANSFORM_ATTR in attrs:
                src, dst = str(attrs[TRANSFORM_ATTR]).split("->")
                found[(_tensor(expr.args[1].fields[0].name), src, dst)] += 1

    relax.analysis.post_order_visit(mod["main"].body, visit)
    return found


def _dequantized_names(mod) -> dict[str, str]:
    """Each stored uint8 tensor of ``main`` -> the tensor dequantizing it (compiler.int8.dequantized):
    the graph's edge names the dequantized tensor, an int8 node reads (and its transform moves)
    ``q`` itself (compiler.int8.stored_uint8)."""
    bound = {b.var: b.value for b in bindings(mod["main"])}

    def constant(expr):
        return expr.value.numpy() if isinstance(expr, Constant) else None

    found = {}
    for var in bound:
        match = dequantized(var, bound.get, constant)
        if match is not None:
            found[_tensor(match[0].name)] = _tensor(var.name)
    return found


def check_contract(model, graph, config, assignment) -> tuple[Counter, Counter]:
    """The module's transforms and the graph's, asserted equal; both returned."""
    assert config.check(graph) == []
    mod = import_model(model)
    new_mod, _, _ = rewrite_model(mod, config, x86.host_target())
    names = _dequantized_names(mod)
    got = Counter({(names.get(t, t), src, dst): n for (t, src, dst), n in module_transforms(new_mod).items()})
    want = Counter((_tensor(t), src, dst) for _, t, src, dst in graph.transforms(assignment))
    assert sum(got.values()) == sum(want.values()), (got - want, want - got)
    assert got == want
    return got, want


# ------------------------------------------------------------------ configs
def random_config(graph, seed: int) -> tuple[Config, dict]:
    """A config from a random candidate of every node (joins too), and that assignment."""
    rng = np.random.default_rng(seed)
    assignment = {n: int(rng.integers(len(graph.candidates(n)))) for n in graph.nodes}
    solution = Solution(assignment, 1.0, 1.0, True, "brute", 0.0)
    return Config.from_solution(graph, solution), assignment


def with_blocks(config: Config, blocks: dict) -> Config:
    """Copy of ``config`` with the given nodes' (ic_bn, oc_bn) changed."""
    nodes = dict(config.nodes)
    for name, (ic, oc) in blocks.items():
        node = nodes[name]
        knobs = dict(node.knobs, ic_bn=ic, oc_bn=oc)
        nodes[name] = type(node)(node.op, node.workload, *x86.layouts_of(node.workload, knobs),
                                 knobs)
    return Config(nodes, config.target, config.model, config.solution)


# ------------------------------------------------------------------ models
def group_conv_model() -> onnx.ModelProto:
    """input [1, 32, 9, 9] -> 3x3 conv, 8 groups of 4 -> ReLU -> 1x1 conv, 2 groups of 16 (24 out)."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)
             for name, shape in (("g1.w", [32, 4, 3, 3]), ("g1.b", [32]), ("g2.w", [24, 16, 1, 1]))]
    nodes = [
        helper.make_node("Conv", ["input", "g1.w", "g1.b"], ["x1"], name="g1", group=8,
                         pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["x1"], ["r1"], name="relu"),
        helper.make_node("Conv", ["r1", "g2.w"], ["output"], name="g2", group=2, kernel_shape=[1, 1]),
    ]
    return onnx_model(nodes, inits, "groups", [1, 32, 9, 9], output_shape=[1, 24, 9, 9])
