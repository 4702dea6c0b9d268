"""Decoder, dilated-head and token-MLP blocks: every conv / transposed conv / matmul is a tuned
layout node, and compiled models match ONNX Runtime (rtol = atol = 1e-4)."""

import warnings

import pytest

import graphtune
from compile_check import assert_matches_ort
from graphtune.config import Config
from graphtune.frontend import import_model, layout_ops
from graphtune.pipeline import extract
from onnx_blocks import dilated_head, token_mlp, unet_decoder

pytest.importorskip("onnxruntime")

MODELS = {
    "unet_k2_s2": lambda: unet_decoder(2, 0),
    "unet_k4_s2_p1": lambda: unet_decoder(4, 1),
    "unet_k3_s2_p1_op1": lambda: unet_decoder(3, 1, 1),
    "dilated_head": dilated_head,
    "token_mlp_relu": token_mlp,
    "token_mlp_gelu": lambda: token_mlp("Gelu"),
}
OPS = {
    "unet": {"enc": "conv2d", "down": "conv2d", "up": "conv2d_transpose", "head": "conv2d"},
    "dilated_head": {"aspp_d2": "conv2d", "aspp_d3": "conv2d", "asym": "conv2d", "row_1x7": "conv2d",
                     "col_7x1": "conv2d", "dw_d2": "depthwise_conv2d", "proj": "conv2d"},
    "token_mlp": {"stem": "conv2d", "fc1": "dense", "fc2": "dense", "token_mix": "dense", "head": "dense"},
}


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("kind", ["uniform", "random"])
def test_blocks_match_onnxruntime(name, kind):
    model = MODELS[name]()
    config = Config.uniform(model) if kind == "uniform" else Config.random(model, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every node is configured, none left to NCHW defaults
        compiled = graphtune.compile(model, config)
    assert_matches_ort(model, compiled)


@pytest.mark.parametrize("family", list(OPS))
def test_every_conv_and_matmul_is_a_layout_node(family):
    model = MODELS[next(n for n in MODELS if n.startswith(family))]()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left out of the layout choice
        ops = {op.name: op.op for op in layout_ops(import_model(model))}
    assert {name: ops.get(name) for name in OPS[family]} == OPS[family]


def test_decoder_graph_gives_the_transposed_conv_a_layout_choice():
    graph = extract(unet_decoder(4, 1), max_candidates=8)
    assert graph.op("up") == "conv2d_transpose"
    assert len({(c.in_layout, c.out_layout) for c in graph.candidates("up")}) > 2
    assert sorted(graph.nx.predecessors("up")) == ["down"] and sorted(graph.nx.successors("up")) == ["cat"]


def test_token_mlp_dense_nodes_keep_their_own_layout():
    graph = extract(token_mlp(), max_candidates=4)
    assert {c.in_layout for c in graph.candidates("fc1")} == {"NCHW"}  # [1, 7, 7, 16] tokens
    assert graph.workload("fc1")["data"] == [1, 7, 7, 16]
    assert graph.workload("token_mix")["data"] == [1, 16, 49]
    assert {c.in_layout for c in graph.candidates("head")} == {"NC"}


def test_tune_decoder_end_to_end():
    """tune measures the transposed conv's candidates, solves, and the config compiles correctly."""
    model = unet_decoder(4, 1)
    result = graphtune.tune(model, records=None, max_candidates=2, min_repeat_ms=5, repeat=1,
                            progress=False)
    assert result.config.nodes["up"].op == "conv2d_transpose"
    assert result.config.nodes["up"].cost_ms > 0
    assert result.solution.optimal
    assert_matches_ort(model, graphtune.compile(model, result.config))


def test_grouped_transposed_conv_stays_nchw_with_a_warning_and_still_matches():
    from onnx_blocks import Builder

    b = Builder(4)
    x = b.conv("pre", "input", 8, 16)
    up = b.conv("up_g2", x, 16, 8, k=(2, 2), pads=[0] * 4, group=2, op="ConvTranspose", strides=[2, 2])
    model = b.model("grouped_up", [1, 8, 6, 6], b.conv("post", up, 8, 8))
    with pytest.warns(UserWarning, match="conv2d_transpose with groups > 1"):
        ops = {op.name: op.op for op in layout_ops(import_model(model))}
    assert ops == {"pre": "conv2d", "post": "conv2d"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_matches_ort(model, graphtune.compile(model, Config.uniform(model)))
