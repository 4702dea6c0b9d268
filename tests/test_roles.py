"""One op classification (issue 9): ops the walk calls layout-agnostic run in the blocked
layout they receive, compiled models match ONNX Runtime (or stock TVM for Relax-only ops),
and configured joins are found by their own names."""

import warnings
from collections import Counter

import numpy as np
import pytest
import tvm
from onnx import numpy_helper
from tvm import relax

from compile_check import (
    assert_matches_ort,
    check_contract,
    module_transforms,
    random_config,
    transforms_in,
    with_blocks,
)
from graphtune import extract, x86
from graphtune.compiler import compile
from graphtune.compiler.driver import rewrite_model
from graphtune.config import Config, NodeConfig
from graphtune.errors import ConfigMismatchError
from graphtune.frontend import Form, Role, import_model, walk
from graphtune.frontend.roles import BINARY, KNOWN_FIXED, POOLS, UNARY
from onnx_blocks import CHAINS, Builder, elementwise_chain, shared_producer_joins, squeeze_excite

pytest.importorskip("onnxruntime")

BOUNDARIES = ["NCHW->NCHW8c", "NCHW16c->NCHW"]  # into conv a, out of conv b: nothing between


def _rewritten(mod_or_model, config):
    return rewrite_model(import_model(mod_or_model), config, x86.host_target())[0]


def _quiet_graph(model, max_candidates=4):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return extract(model, max_candidates=max_candidates)


def test_roles_are_str_valued_and_the_tables_are_disjoint():
    assert Role.PASS == "pass" and f"{Role.JOIN}" == "join"
    assert not (UNARY & BINARY) and not (UNARY & POOLS) and not (UNARY & KNOWN_FIXED)
    for op in sorted(UNARY | BINARY | POOLS | KNOWN_FIXED):  # every entry is a real Relax op
        tvm.ir.Op.get(op)


@pytest.mark.parametrize("kind", list(CHAINS))
def test_elementwise_chain_runs_blocked_and_matches_onnxruntime(kind):
    model = elementwise_chain(kind)
    config = Config.uniform(model, block=16)
    assert sorted(transforms_in(_rewritten(model, config))) == BOUNDARIES
    assert_matches_ort(model, compile(model, config))
    graph = _quiet_graph(model)
    check_contract(model, graph, *random_config(graph, 2))


def test_squeeze_excite_join_is_configured_by_name_and_matches_onnxruntime():
    """The SE gating mul's gate comes through a global average pool: its configured
    layout is the one compiled (it once fell back to the stem's block)."""
    model = squeeze_excite()
    graph = _quiet_graph(model)
    assert graph.op("se.mul") == "join"
    for seed in range(4):
        config, assignment = random_config(graph, seed)
        check_contract(model, graph, config, assignment)
    assert_matches_ort(model, compile(model, config))


def _assign(graph, layouts: dict) -> dict:
    """First candidate of each node whose out layout is the one asked, else the first."""
    return {n: next((i for i, c in enumerate(graph.candidates(n)) if c.out_layout == layouts.get(n)), 0)
            for n in graph.nodes}


def test_joins_sharing_producers_keep_their_own_layouts(tmp_path):
    from graphtune.solve import Solution

    model = shared_producer_joins()
    graph = _quiet_graph(model, max_candidates=None)
    assert sorted(graph.nx.predecessors("sum")) == sorted(graph.nx.predecessors("prod")) == ["a", "c"]
    layouts = {"a": "NCHW16c", "c": "NCHW16c", "sum": "NCHW8c", "prod": "NCHW4c", "both": "NCHW8c"}
    assignment = _assign(graph, layouts)
    assert {n: graph.candidates(n)[assignment[n]].out_layout for n in layouts} == layouts
    config = Config.from_solution(graph, Solution(assignment, 1.0, 1.0, True, "brute", 0.0))
    # written the old way too: join entries list their inputs; they still load and compile
    assert config.nodes["sum"].workload == {"inputs": ["a", "c"]}
    path = tmp_path / "shared.graphtune.json"
    config.save(path)
    loaded = Config.load(path)
    moved = module_transforms(_rewritten(model, loaded)).elements()
    pairs = Counter(f"{src}->{dst}" for _, src, dst in moved)
    # a and c (16c) go to sum in 8c and to prod in 4c; prod goes to both in 8c
    assert pairs["NCHW16c->NCHW8c"] == 2 and pairs["NCHW16c->NCHW4c"] == 2
    assert pairs["NCHW4c->NCHW8c"] == 1
    check_contract(model, graph, loaded, assignment)
    assert_matches_ort(model, compile(model, str(path)))


def test_config_naming_a_join_the_model_lacks_is_refused():
    model = shared_producer_joins()
    config = Config.uniform(model)
    config.nodes["add_99"] = NodeConfig("join", None, "NCHW8c", "NCHW8c", {})
    with pytest.raises(ConfigMismatchError, match=r"nodes\.add_99: the model has no join"):
        compile(model, config)


def test_relax_only_unary_ops_and_adaptive_pool_run_blocked_and_match_stock_tvm():
    """relu6, rsqrt, square (no ONNX spelling) and a 2x2 adaptive average pool."""
    rng = np.random.default_rng(7)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 8, 8, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            w1 = relax.const(rng.standard_normal((16, 8, 3, 3)).astype("float32"))
            w2 = relax.const(rng.standard_normal((16, 16, 1, 1)).astype("float32"))
            y = bb.emit(relax.op.nn.conv2d(x, w1, padding=[1, 1, 1, 1]))
            y = bb.emit(relax.op.nn.relu6(y))
            y = bb.emit(relax.op.rsqrt(relax.op.add(y, relax.const(1.0, "float32"))))
            y = bb.emit(relax.op.square(y))
            y = bb.emit(relax.op.nn.adaptive_avg_pool2d(y, [2, 2]))
            y = bb.emit(relax.op.nn.conv2d(y, w2))
            out = bb.emit_output(relax.op.reshape(y, [1, 64]))
        bb.emit_func_output(out)
    mod = bb.get()
    roles = {s.op_name: (s.role, s.form) for s in walk(mod)}
    assert roles["relax.nn.adaptive_avg_pool2d"] == (Role.PASS, Form.ADAPTIVE_POOL)
    assert all(roles[op] == (Role.PASS, Form.UNARY) for op in
               ("relax.clip", "relax.rsqrt", "relax.square"))  # relu6 is a clip in Relax
    data = rng.standard_normal((1, 8, 8, 8)).astype("float32")
    stock = relax.VirtualMachine(tvm.compile(mod, target=x86.host_target()), tvm.cpu(0))
    expected = stock["main"](tvm.runtime.tensor(data, tvm.cpu(0))).numpy()
    config = with_blocks(Config.uniform(mod), {"conv2d_0": (8, 16), "conv2d_1": (16, 16)})
    assert sorted(transforms_in(_rewritten(mod, config))) == BOUNDARIES
    np.testing.assert_allclose(compile(mod, config)(data), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["mobilenet_v3_large", "shufflenet_v2", "inception_v3"])
def test_every_pass_and_join_step_says_how_it_is_re_emitted(name):
    from graphtune import models

    size = models.info(name).min_image_size
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        steps = walk(import_model(models.get(name, image_size=size)))
    joins = {Form.BINARY_JOIN, Form.CONCAT_JOIN}
    for s in steps:
        assert (s.form is not None) == (s.role in (Role.PASS, Role.JOIN)), (s.var.name, s.role)
        assert (s.form in joins) == (s.role is Role.JOIN), (s.var.name, s.form)
        assert (s.name is not None) == (s.role in (Role.LAYOUT, Role.JOIN))


def _spatial_model():
    """conv a -> Slice of H and W -> conv b; conv b and conv c -> Concat along H -> conv d;
    a channel Slice stays a boundary."""
    b = Builder(seed=12)
    a = b.conv("a", "input", 8, 16)
    for name, values in (("starts", [1, 2]), ("ends", [9, 10]), ("axes", [2, -1])):
        b.inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
    starts, ends, axes = "starts", "ends", "axes"
    window = b.node("Slice", [a, starts, ends, axes], "window")
    conv_b = b.conv("b", window, 16, 16)
    conv_c = b.conv("c", window, 16, 16)
    stacked = b.node("Concat", [conv_b, conv_c], "stacked", axis=2)
    return b.model("spatial", [1, 8, 12, 12], b.conv("d", stacked, 16, 8))


def test_spatial_slices_and_concats_run_blocked_and_match_onnxruntime():
    model = _spatial_model()
    steps = {s.op_name: (s.role, s.form) for s in walk(import_model(model)) if s.op_name}
    assert steps["relax.strided_slice"] == (Role.PASS, Form.SPATIAL_SLICE)
    assert steps["relax.concat"] == (Role.JOIN, Form.CONCAT_JOIN)
    config = Config.uniform(model, block=8)
    assert sorted(transforms_in(_rewritten(model, config))) == ["NCHW->NCHW8c", "NCHW8c->NCHW"]
    assert_matches_ort(model, compile(model, config))
    graph = _quiet_graph(model)
    assert graph.op("stacked") == "join"
    for seed in range(3):
        config, assignment = random_config(graph, seed)
        check_contract(model, graph, config, assignment)
    assert_matches_ort(model, compile(model, config))
