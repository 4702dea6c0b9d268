"""graphtune.frontend: import, walk, layout ops and LayoutGraph extraction."""

import math
import warnings

import numpy as np
import onnx
import pytest
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax

from graphtune import models, x86
from graphtune.errors import ModelError
from graphtune.frontend import import_model, layout_ops, walk
from graphtune.layouts import block_of
from graphtune.pipeline import extract

pytestmark = pytest.mark.unit

RNG = np.random.default_rng(0)


# ---------------------------------------------------------------- small ONNX graphs
def _init(name, shape):
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _model(nodes, inits, in_shape=(1, 3, 16, 16), outputs=(("output", None),), input_dims=None):
    dims = input_dims if input_dims is not None else list(in_shape)
    graph = helper.make_graph(
        nodes,
        "test",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in outputs],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _conv(name, x, out, c_in, c_out, k=3, stride=1, groups=1):
    pad = k // 2
    node = helper.make_node(
        "Conv", [x, f"{name}.w", f"{name}.b"], [out], name=name,
        pads=[pad] * 4, strides=[stride] * 2, group=groups,
    )
    return node, [_init(f"{name}.w", [c_out, c_in // groups, k, k]), _init(f"{name}.b", [c_out])]


def _tiny_resnet():
    """stem conv -> relu -> conv -> residual add -> relu -> global pool -> flatten -> fc."""
    stem, i1 = _conv("stem.conv", "input", "c1", 3, 8, stride=2)
    body, i2 = _conv("layer1.conv", "r1", "c2", 8, 8)
    nodes = [
        stem,
        helper.make_node("Relu", ["c1"], ["r1"], name="stem.relu"),
        body,
        helper.make_node("Add", ["c2", "r1"], ["a1"], name="layer1.add"),
        helper.make_node("Relu", ["a1"], ["r2"], name="layer1.relu"),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["output"], name="fc", transB=1),
    ]
    return _model(nodes, i1 + i2 + [_init("fc.w", [10, 8]), _init("fc.b", [10])],
                  outputs=[("output", [1, 10])])


def _record(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        result = fn(*args, **kwargs)
    return result, [str(r.message) for r in rec]


# ---------------------------------------------------------------- import + walk
def test_layout_ops_take_onnx_names_and_workloads():
    ops = layout_ops(import_model(_tiny_resnet()))
    assert [(op.name, op.op) for op in ops] == [
        ("stem.conv", "conv2d"), ("layer1.conv", "conv2d"), ("fc", "dense")
    ]
    assert ops[0].workload == {
        "data": [1, 3, 16, 16], "kernel": [8, 3, 3, 3], "strides": [2, 2], "padding": [1, 1, 1, 1],
        "dilation": [1, 1], "groups": 1, "dtype": "float32",
    }
    assert ops[2].workload == {"data": [1, 8], "weight": [10, 8], "dtype": "float32"}
    assert [op.var.name for op in ops] == ["stem.conv", "layer1.conv", "fc"]


def test_a_conv_read_late_keeps_its_own_name():
    # a projection shortcut first in graph order but read only by the residual add after the
    # other branch (torch's dynamo exports, convs without bias): the importer binds such a call
    # when it is read, so names handed out by position went to the wrong convs
    def conv(name, x, out, c_in, k=1, stride=1):
        node, inits = _conv(name, x, out, c_in, 8, k=k, stride=stride)
        del node.input[2]
        return node, inits[:1]

    proj, i1 = conv("proj", "input", "p", 3, stride=2)
    a, i2 = conv("a", "input", "ca", 3)
    b, i3 = conv("b", "ra", "cb", 8, k=3, stride=2)
    nodes = [proj, a, helper.make_node("Relu", ["ca"], ["ra"], name="a.relu"), b,
             helper.make_node("Relu", ["cb"], ["rb"], name="b.relu"),
             helper.make_node("Add", ["p", "rb"], ["output"], name="join")]
    mod = import_model(_model(nodes, i1 + i2 + i3))
    assert {op.name: (op.workload["kernel"][2], op.workload["strides"][0]) for op in layout_ops(mod)} \
        == {"proj": (1, 2), "a": (1, 1), "b": (3, 2)}
    assert "join" in {s.name for s in walk(mod)}


def test_conv_weights_are_constants():
    for op in layout_ops(import_model(_tiny_resnet())):
        if op.op == "conv2d":
            binding = next(b for b in import_model(_tiny_resnet())["main"].body.blocks[0].bindings
                           if b.var.name == op.name)
            assert isinstance(binding.value.args[1], tvm.ir.expr.Constant)


def test_roles_of_tiny_resnet():
    steps = walk(import_model(_tiny_resnet()))
    roles = [(s.op_name.removeprefix("relax."), s.role) for s in steps]
    assert roles == [
        ("nn.conv2d", "layout"), ("reshape", "const"), ("add", "pass"), ("nn.relu", "pass"),
        ("nn.conv2d", "layout"), ("reshape", "const"), ("add", "pass"), ("add", "join"),
        ("nn.relu", "pass"), ("mean", "pass"), ("reshape", "fixed"), ("permute_dims", "const"),
        ("matmul", "layout"), ("add", "pass"),
    ]


def test_derived_names_are_stable_without_onnx_names():
    model = _tiny_resnet()
    for node in model.graph.node:
        node.name = ""
    first = [op.name for op in layout_ops(import_model(model))]
    second = [op.name for op in layout_ops(import_model(model))]
    assert first == second == ["conv2d_0", "conv2d_1", "dense_0"]


def test_clip_becomes_layout_agnostic_relax_ops_with_the_same_numbers():
    ort = pytest.importorskip("onnxruntime")
    conv, inits = _conv("conv", "input", "c", 3, 8)
    nodes = [conv, helper.make_node("Clip", ["c", "lo", "hi"], ["output"], name="relu6")]
    inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
              numpy_helper.from_array(np.array(0.5, np.float32), "hi")]
    model = _model(nodes, inits, outputs=[("output", [1, 8, 16, 16])])
    mod = import_model(model)
    clip = [s for s in walk(mod) if s.op_name in ("relax.maximum", "relax.minimum")]
    assert [s.role for s in clip] == ["pass", "pass"]
    assert [float(s.value.args[1].value.numpy()) for s in clip] == [0.0, 0.5]  # plain scalars
    assert [gv.name_hint for gv in mod.get_global_vars()] == ["main"]  # TIR clip halves gone
    x = RNG.standard_normal((1, 3, 16, 16)).astype(np.float32)
    vm = relax.VirtualMachine(tvm.compile(mod, target=tvm.target.Target({"kind": "llvm"})), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"input": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_path_and_irmodule_inputs(tmp_path):
    model = _tiny_resnet()
    path = tmp_path / "tiny.onnx"
    onnx.save(model, str(path))
    mod = import_model(path)
    assert [op.name for op in layout_ops(mod)] == ["stem.conv", "layer1.conv", "fc"]
    assert import_model(mod) is mod


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda tmp: tmp / "missing.onnx", "does not exist"),
        (lambda tmp: (tmp / "bad.onnx").write_bytes(b"\x00garbage") and tmp / "bad.onnx",
         "not a readable ONNX"),
        (lambda tmp: 42, "cannot import a int"),
    ],
)
def test_unreadable_models_raise_model_error(tmp_path, make, match):
    with pytest.raises(ModelError, match=match):
        import_model(make(tmp_path))


def test_dynamic_input_needs_shape_dict():
    conv, inits = _conv("conv", "input", "output", 3, 8)
    model = _model([conv], inits, input_dims=["batch", 3, 16, 16])
    with pytest.raises(ModelError, match=r"'input' has a dynamic shape \['batch', 3, 16, 16\].*shape_dict"):
        import_model(model)
    mod = import_model(model, shape_dict={"input": [2, 3, 16, 16]})
    assert layout_ops(mod)[0].workload["data"] == [2, 3, 16, 16]
    with pytest.raises(ModelError, match="not graph inputs"):
        import_model(model, shape_dict={"image": [1, 3, 16, 16]})


def test_op_unknown_to_tvm_raises_model_error():
    node = helper.make_node("NoSuchOp", ["input"], ["output"], name="weird")
    with pytest.raises(ModelError, match="NoSuchOp"):
        import_model(_model([node], []))


# ---------------------------------------------------------------- extraction on small graphs
def test_extract_tiny_resnet_structure():
    g = extract(_tiny_resnet(), max_candidates=3)
    assert {n: g.op(n) for n in g.nodes} == {
        "input": "boundary", "stem.conv": "conv2d", "layer1.conv": "conv2d", "layer1.add": "join",
        "reshape_0": "boundary", "fc": "dense", "output": "boundary",
    }
    assert {(u, v): g.edge_shape(u, v) for u, v in g.edges} == {
        ("input", "stem.conv"): [1, 3, 16, 16],
        ("stem.conv", "layer1.conv"): [1, 8, 8, 8],  # through bias add + relu
        ("stem.conv", "layer1.add"): [1, 8, 8, 8],
        ("layer1.conv", "layer1.add"): [1, 8, 8, 8],
        ("layer1.add", "reshape_0"): [1, 8, 1, 1],  # global pool runs blocked; flatten needs NCHW
        ("reshape_0", "fc"): [1, 8],
        ("fc", "output"): [1, 10],
    }
    assert g.candidates("reshape_0")[0].in_layout == "NCHW"
    assert g.candidates("reshape_0")[0].out_layout == g.candidates("fc")[0].in_layout == "NC"
    assert all(math.isnan(c.cost) for n in ("stem.conv", "fc") for c in g.candidates(n))
    assert len(g.candidates("stem.conv")) <= 3


def test_pass_through_ops_carry_the_producer_layout():
    c1, i1 = _conv("a", "input", "c1", 3, 16)
    c2, i2 = _conv("b", "m", "output", 16, 16)
    nodes = [
        c1,
        helper.make_node("Relu", ["c1"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Mul", ["p", "scale"], ["s"], name="bn.scale"),
        helper.make_node("Add", ["s", "shift"], ["t"], name="bn.shift"),
        helper.make_node("Clip", ["t", "lo", "hi"], ["m"], name="relu6"),
        c2,
    ]
    consts = [_init("scale", [1, 16, 1, 1]), _init("shift", [16, 1, 1]),
              numpy_helper.from_array(np.array(0, np.float32), "lo"),
              numpy_helper.from_array(np.array(6, np.float32), "hi")]
    g = extract(_model(nodes, i1 + i2 + consts), max_candidates=2)
    assert sorted(g.nodes) == ["a", "b", "input", "output"]
    assert g.edge_shape("a", "b") == [1, 16, 8, 8]  # the pooled tensor the transform would convert
    assert sorted(g.edges) == [("a", "b"), ("b", "output"), ("input", "a")]


def test_concat_join_keeps_only_blocks_dividing_every_input():
    ca, ia = _conv("a", "input", "xa", 3, 24, k=1)
    cb, ib = _conv("b", "input", "xb", 3, 16, k=1)
    cc, ic = _conv("c", "cat", "output", 40, 8, k=1)
    cat = helper.make_node("Concat", ["xa", "xb"], ["cat"], name="cat", axis=1)
    g = extract(_model([ca, cb, cat, cc], ia + ib + ic))
    assert sorted(g.nx.predecessors("cat")) == ["a", "b"]
    offered = {c.out_layout for n in ("a", "b") for c in g.candidates(n)} | {"NCHW"}
    kept = {c.in_layout for c in g.candidates("cat")}
    assert kept == {lay for lay in offered
                    if 24 % max(block_of(lay), 1) == 0 and 16 % max(block_of(lay), 1) == 0}
    assert "NCHW16c" in offered and "NCHW16c" not in kept and "NCHW8c" in kept
    assert all(c.cost == 0.0 and c.in_layout == c.out_layout for c in g.candidates("cat"))
    assert (g.edge_shape("a", "cat"), g.edge_shape("b", "cat")) == ([1, 24, 16, 16], [1, 16, 16, 16])


def test_joins_with_inputs_of_mismatched_origin_and_shape():
    """Residual add with the graph input; SE-style product with a pooled fixed tensor."""
    conv, inits = _conv("conv", "input", "c", 3, 3)
    nodes = [
        conv,
        helper.make_node("Add", ["c", "input"], ["res"], name="res"),
        helper.make_node("GlobalAveragePool", ["input"], ["gap"], name="gap"),
        helper.make_node("Mul", ["res", "gap"], ["output"], name="se"),
    ]
    g = extract(_model(nodes, inits))
    assert g.op("res") == g.op("se") == "join"
    assert sorted(g.nx.predecessors("res")) == ["conv", "input"]
    assert sorted(g.nx.predecessors("se")) == ["input", "res"]
    assert g.edge_shape("input", "se") == [1, 3, 1, 1]
    assert g.edge_shape("res", "se") == [1, 3, 16, 16]
    assert {c.in_layout for c in g.candidates("se")} >= {"NCHW", "NCHW3c"}
    assert sorted(g.nx.predecessors("output")) == ["se"]


def test_unknown_ops_are_boundaries_with_one_warning_per_kind_and_group_convs_are_nodes():
    g1, i1 = _conv("g1", "input", "x1", 4, 8, groups=2)
    g2, i2 = _conv("g2", "s1", "x2", 8, 8, groups=4)
    ok, i3 = _conv("ok", "s2", "output", 8, 8)
    nodes = [
        g1, helper.make_node("Sin", ["x1"], ["s1"], name="sin1"),
        g2, helper.make_node("Sin", ["x2"], ["s2"], name="sin2"),
        ok,
    ]
    g, messages = _record(extract, _model(nodes, i1 + i2 + i3, in_shape=(1, 4, 8, 8)), max_candidates=2)
    assert len(messages) == 1 and "relax.sin (2x) is unknown" in messages[0], messages
    assert g.op("g1") == g.op("g2") == "group_conv2d"
    assert g.workload("g2")["groups"] == 4 and len(g.candidates("g2")) == 2
    assert g.op("ok") == "conv2d" and math.isnan(g.candidates("ok")[0].cost)
    # an unknown op after a layout node is a boundary (NCHW) between it and the next one
    assert list(g.nx.predecessors("ok")) == ["sin_1"] and list(g.nx.predecessors("sin_1")) == ["g2"]
    assert g.op("sin_1") == "boundary"


def test_dynamic_shape_conv_in_relax_module_is_skipped():
    n = tvm.tirx.Var("n", "int64")
    x = relax.Var("x", relax.TensorType([n, 8, 8, 8], "float32"))
    y = relax.Var("y", relax.TensorType([1, 8, 8, 8], "float32"))
    w = relax.const(RNG.standard_normal((8, 8, 3, 3)).astype("float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, y]):
        with bb.dataflow():
            a = bb.emit(relax.op.nn.conv2d(x, w, padding=[1, 1, 1, 1]))
            b = bb.emit(relax.op.nn.relu(bb.emit(relax.op.nn.conv2d(y, w, padding=[1, 1, 1, 1]))))
            out = bb.emit_output(relax.Tuple([a, b]))
        bb.emit_func_output(out)
    g, messages = _record(extract, bb.get(), max_candidates=2)
    assert len(messages) == 1 and "conv2d with a dynamic shape" in messages[0]
    assert sorted(g.nodes) == ["conv2d_0", "output_0", "output_1", "x", "y"]
    assert sorted(g.edges) == [("conv2d_0", "output_1"), ("y", "conv2d_0")]


# ---------------------------------------------------------------- the zoo
ZOO = {  # model: (conv2d, depthwise_conv2d, dense, joins); group convs in GROUP_CONVS
    "resnet18": (20, 0, 1, 8),
    "resnet50": (53, 0, 1, 16),
    "vgg16": (13, 0, 3, 0),
    "vgg19": (16, 0, 3, 0),
    "inception_v3": (94, 0, 1, 15),
    "densenet121": (120, 0, 1, 58),
    "densenet201": (200, 0, 1, 98),
    "mobilenet_v2": (35, 17, 1, 10),
    "ssd_resnet50_512": (73, 0, 0, 16),
    "efficientnet_b0": (65, 16, 1, 74),
    "mobilenet_v3_large": (47, 15, 2, 38),
    "shufflenet_v2": (37, 19, 1, 16),
    "googlenet": (57, 0, 1, 9),
    "unet": (15, 0, 0, 3),
    "resnext50_32x4d": (37, 0, 1, 16),
    "regnet_y_800mf": (61, 0, 1, 28),
}
GATED = {"efficientnet_b0", "mobilenet_v3_large"}  # SiLU / hardswish: x * gate(x) joins
GROUP_CONVS = {"resnext50_32x4d": 16, "regnet_y_800mf": 14}
_CACHE = {}


def _zoo(name):
    if name not in _CACHE:
        model = models.get(name, image_size=models.info(name).min_image_size)
        _CACHE[name] = (model, extract(model, max_candidates=3))
    return _CACHE[name]


@pytest.mark.parametrize("name", sorted(ZOO))
@pytest.mark.integration
def test_zoo_extraction_invariants(name):
    model, g = _zoo(name)
    ops = [g.op(n) for n in g.nodes]
    assert tuple(ops.count(k) for k in ("conv2d", "depthwise_conv2d", "dense", "join")) == ZOO[name]
    assert ops.count("group_conv2d") == GROUP_CONVS.get(name, 0)
    outputs = [o.name for o in model.graph.output]
    assert all(g.op(b) == "boundary" for b in ["input", *outputs])
    assert list(g.nx.successors("input")) == [next(n.name for n in model.graph.node if n.op_type == "Conv")]
    # layout nodes are named like the ONNX nodes and like layout_ops (what compile uses)
    onnx_names = [n.name for n in model.graph.node if n.op_type in ("Conv", "Gemm")]
    layout_nodes = [n for n in g.nodes if g.op(n) in x86.KNOBS]
    assert layout_nodes == onnx_names == [op.name for op in layout_ops(import_model(model))]
    for n in layout_nodes:  # one data input, read in the shape of its workload
        (pred,) = g.nx.predecessors(n)
        assert g.edge_shape(pred, n) == g.workload(n)["data"]
        assert g.candidates(n) and all(math.isnan(c.cost) for c in g.candidates(n))
    # joins are named like their ONNX Add / Concat nodes
    assert all(n in {node.name for node in model.graph.node} for n in g.nodes if g.op(n) == "join")
    # every join input is an edge: as many producers as the add / concat has inputs
    join_steps = [s for s in walk(import_model(model)) if s.role == "join"]
    joins = [n for n in g.nodes if g.op(n) == "join"]
    degrees = [g.nx.in_degree(n) for n in joins]
    inputs = [len(s.inputs) for s in join_steps]
    if name in GATED:  # x * sigmoid(x): both inputs from one producer, one edge
        assert all(1 <= d <= i for d, i in zip(degrees, inputs)) and len(degrees) == len(inputs)
    else:
        assert degrees == inputs and all(d >= 2 for d in degrees)
    assert all(g.nx.out_degree(n) >= 1 for n in joins)
    for n in joins:
        channels = [g.edge_shape(p, n)[1] for p in g.nx.predecessors(n)]
        assert all(ch % max(block_of(c.in_layout), 1) == 0 for c in g.candidates(n) for ch in channels)
    for n in g.nodes:
        if g.op(n) == "boundary":
            assert len(g.candidates(n)) == 1 and g.candidates(n)[0].in_layout in ("NCHW", "NC")
    # costs filled with dummy numbers make a valid problem
    for n in layout_nodes:
        g.set_candidates(n, [c.__class__(c.knobs, c.in_layout, c.out_layout, 1.0 + i)
                             for i, c in enumerate(g.candidates(n))])
    g.fill_edge_costs(lambda shape, src, dst: 0.01 * math.prod(shape) / 1e3)
    g.validate()


@pytest.mark.integration
def test_zoo_names_are_stable_across_extractions():
    model, g = _zoo("resnet50")
    again = extract(models.get("resnet50", image_size=32), max_candidates=3)
    assert again.nodes == g.nodes and again.edges == g.edges
    assert again.fingerprint() == g.fingerprint()


@pytest.mark.integration
def test_resnet_graph_has_low_treewidth():
    from networkx.algorithms.approximation import treewidth_min_fill_in

    _, g = _zoo("resnet50")
    width, _ = treewidth_min_fill_in(g.nx.to_undirected())
    assert width <= 2


def test_a_tensor_returned_twice_feeds_two_output_boundaries():
    conv, inits = _conv("conv", "input", "c", 3, 8)
    nodes = [conv, helper.make_node("Relu", ["c"], ["a"], name="relu"),
             helper.make_node("Identity", ["a"], ["b"], name="copy")]
    g = extract(_model(nodes, inits, outputs=[("a", None), ("b", None)]), max_candidates=2)
    assert sorted(g.nx.successors("conv")) == ["a", "b"]
    assert g.op("a") == g.op("b") == "boundary"


# ------------------------------------------------------------------ exported-model patterns
def test_shape_subgraphs_are_folded_with_int64_kept():
    from graphtune.frontend.fold import fold_constants

    model = models.get("shufflenet_v2", image_size=32)
    folded = fold_constants(model)
    ops = {n.op_type for n in folded.graph.node}
    assert not ops & {"Shape", "Gather", "Div", "Unsqueeze", "Where", "Constant"}
    inits = {t.name: t for t in folded.graph.initializer}
    targets = [inits[n.input[1]] for n in folded.graph.node if n.op_type == "Reshape"]
    assert len(targets) == 32 and all(t.data_type == TensorProto.INT64 for t in targets)
    assert [list(numpy_helper.to_array(t)) for t in targets[:2]] == [[1, 2, 58, 4, 4], [1, -1, 4, 4]]
    # the same numbers as the model as exported
    import onnxruntime as ort

    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32), dtype=np.float32)
    run = lambda m: ort.InferenceSession(m.SerializeToString()).run(None, {"input": x})[0]  # noqa: E731
    np.testing.assert_array_equal(run(folded), run(model))
    # nothing to fold: the model itself comes back
    plain = models.get("resnet18", image_size=32)
    assert fold_constants(plain) is plain


@pytest.mark.integration
def test_shufflenet_extracts_every_conv():
    # unfolded, the Relax importer stops at the first channel shuffle (floor_divide's Where)
    for fold_bn in (True, False):
        ops = layout_ops(import_model(models.get("shufflenet_v2", image_size=32, fold_bn=fold_bn)))
        assert sum(op.op in ("conv2d", "depthwise_conv2d") for op in ops) == 56


def test_fold_names_an_unevaluable_node():
    from graphtune.frontend.fold import fold_constants

    bad = helper.make_node("Reshape", ["c", "s"], ["r"], name="bad_reshape")
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones(6, np.float32))),
             helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(np.array([4], np.int64))),
             bad, helper.make_node("Add", ["x", "r"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ModelError, match="ONNX node 'bad_reshape' \\(Reshape\\) computes from constants"):
        fold_constants(model)


@pytest.mark.integration
def test_batch_norm_imports_as_per_channel_scale_and_shift():
    model = models.get("densenet121", image_size=32, fold_bn=False)
    steps = walk(import_model(model))
    assert not [s for s in steps if s.op_name == "relax.nn.batch_norm"]
    fixed = [s.op_name for s in steps if s.role == "fixed"]
    assert fixed == ["relax.reshape"]  # the flatten before the classifier, nothing else
    g = extract(model, max_candidates=2)
    assert sum(g.op(n) == "boundary" for n in g.nodes) == 3  # input, flatten, output


def test_conv_graphtune_x86_cannot_run_is_a_boundary_with_a_warning():
    """A float16 conv (x86 kernels are float32 only) stays NCHW, named in one warning."""
    w = numpy_helper.from_array(RNG.standard_normal((8, 4, 3, 3)).astype(np.float16), "half.w")
    nodes = [
        helper.make_node("Cast", ["input"], ["x16"], name="to_half", to=TensorProto.FLOAT16),
        helper.make_node("Conv", ["x16", "half.w"], ["y16"], name="half", pads=[1, 1, 1, 1]),
        helper.make_node("Cast", ["y16"], ["output"], name="to_float", to=TensorProto.FLOAT),
    ]
    g, messages = _record(extract, _model(nodes, [w], in_shape=(1, 4, 8, 8)), max_candidates=2)
    assert any("1 conv2d op(s) graphtune.x86 cannot run (half; first: workload dtype 'float16'" in m
               for m in messages), messages
    assert g.op("half") == "boundary"
