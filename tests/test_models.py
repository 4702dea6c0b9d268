"""Tests of the model zoo (graphtune.models): structure, parameter counts, ONNX Runtime runs."""

import importlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from graphtune import models
from graphtune.errors import ModelError
from graphtune.models import param_count

pytestmark = pytest.mark.unit

NAMES = ["densenet121", "densenet201", "efficientnet_b0", "googlenet", "inception_v3",
         "mobilenet_v2", "mobilenet_v3_large", "regnet_y_800mf", "resnet18", "resnet50",
         "resnext50_32x4d", "shufflenet_v2", "ssd_resnet50_512", "unet", "vgg16", "vgg19"]
# models that also build with unfused BatchNormalization (models.get(name, fold_bn=False))
UNFUSED = ["densenet121", "densenet201", "efficientnet_b0", "googlenet", "mobilenet_v3_large",
           "shufflenet_v2", "unet"]

# (convs, Gemm) per model: the architectures' published layer counts.
LAYERS = {
    "resnet18": (20, 1), "resnet50": (53, 1), "vgg16": (13, 3), "vgg19": (16, 3),
    "inception_v3": (94, 1), "densenet121": (120, 1), "densenet201": (200, 1),
    "mobilenet_v2": (52, 1), "ssd_resnet50_512": (73, 0),
    "efficientnet_b0": (81, 1), "mobilenet_v3_large": (62, 2), "shufflenet_v2": (56, 1),
    "googlenet": (57, 1), "unet": (15, 0),
    "resnext50_32x4d": (53, 1), "regnet_y_800mf": (75, 1),
}

# Small inputs for the default run; architectures with 5 stride-2 stages need 32,
# inception_v3 75.
SMALL = {name: models.info(name).min_image_size for name in NAMES}
SMALL["ssd_resnet50_512"] = 64


def _run(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"input": x})))


def _dims(value: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in value.type.tensor_type.shape.dim]


def _expected_outputs(name: str, batch: int, size: int) -> dict[str, list[int]]:
    if name == "unet":
        return {"output": [batch, importlib.import_module("graphtune.models.unet").CLASSES, size, size]}
    if name != "ssd_resnet50_512":
        return {"output": [batch, 1000]}
    anchors = 0
    side = -(-size // 16)  # layer3 (stride 16); every later scale halves, rounding up
    for per_position in models.ssd.ANCHORS_PER_POSITION:
        anchors += side * side * per_position
        side = -(-side // 2)
    return {"loc": [batch, anchors, 4], "conf": [batch, anchors, models.ssd.NUM_CLASSES]}


def _assert_healthy(outputs: dict[str, np.ndarray]) -> None:
    for name, value in outputs.items():
        assert np.isfinite(value).all(), f"{name} has inf/nan"
        assert 0.05 < value.std() < 20, f"{name}: std {value.std()} is degenerate or exploding"


def test_names():
    assert models.names() == NAMES


def test_unknown_name_lists_valid_names():
    with pytest.raises(ModelError, match="unknown model 'resnet51'.*resnet50.*vgg19"):
        models.get("resnet51")


@pytest.mark.parametrize("name, size, minimum", [("resnet50", 31, 32), ("inception_v3", 64, 75),
                                                 ("vgg16", 16, 32)])
def test_too_small_image_is_rejected(name, size, minimum):
    message = f"{name}: image_size {size} is too small.*at least {minimum}"
    with pytest.raises(ModelError, match=message):
        models.get(name, image_size=size)


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"batch_size": 1.0}, {"image_size": 64.0}])
def test_bad_arguments_are_rejected(kwargs):
    with pytest.raises(ModelError, match="resnet18: (batch_size|image_size) must be an int"):
        models.get("resnet18", **kwargs)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.integration
def test_small_model_is_valid_and_runs(name):
    size = SMALL[name]
    model = models.get(name, batch_size=2, image_size=size)
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version <= 13
    assert [i.name for i in model.graph.input] == ["input"]
    assert _dims(model.graph.input[0]) == [2, 3, size, size]
    expected = _expected_outputs(name, 2, size)
    assert {o.name: _dims(o) for o in model.graph.output} == expected
    outputs = _run(model)
    assert {k: list(v.shape) for k, v in outputs.items()} == expected
    _assert_healthy(outputs)
    # the two images of the batch differ, so must their outputs
    for value in outputs.values():
        assert not np.allclose(value[0], value[1])


@pytest.mark.parametrize("name", NAMES)
def test_layer_counts_and_folded_batch_norm(name):
    model = models.get(name, image_size=SMALL[name])
    ops = [n.op_type for n in model.graph.node]
    assert (ops.count("Conv"), ops.count("Gemm")) == LAYERS[name]
    assert "BatchNormalization" not in ops
    assert "MatMul" not in ops
    names = [n.name for n in model.graph.node]
    assert all(names) and len(set(names)) == len(names)
    by_output = {n.output[0]: n for n in model.graph.node}
    gemms = [n for n in model.graph.node if n.op_type == "Gemm"]
    if gemms:  # the classifier: Flatten [-> Identity] -> Gemm(transB=1) [-> act -> Gemm ...]
        head = by_output[gemms[0].input[0]]
        head = by_output[head.input[0]] if head.op_type == "Identity" else head
        assert head.op_type == ("ReduceMean" if name == "shufflenet_v2" else "Flatten")
        assert all(a.name == "transB" and a.i == 1 for g in gemms for a in g.attribute)


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("vgg")])
def test_param_count_matches_published(name):
    count = param_count(models.get(name, image_size=SMALL[name]))
    assert abs(count - models.info(name).params) <= 0.01 * models.info(name).params


@pytest.mark.parametrize("name", ["vgg16", "vgg19"])
@pytest.mark.integration
def test_vgg_param_count_at_224(name):
    model = models.get(name)
    assert param_count(model) == models.info(name).params
    gemm = next(n for n in model.graph.node if n.name == "classifier.0")
    weight = next(t for t in model.graph.initializer if t.name == gemm.input[1])
    assert list(weight.dims) == [4096, 512 * 7 * 7]


@pytest.mark.parametrize("name", UNFUSED)
@pytest.mark.integration
def test_unfused_batch_norm_option(name):
    size = SMALL[name]
    model = models.get(name, image_size=size, fold_bn=False)
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Conv") == LAYERS[name][0]
    folded = models.get(name, image_size=size)
    batch_norms = ops.count("BatchNormalization")
    if name.startswith("densenet"):  # the pre-activation norms a PyTorch export keeps
        mul_adds = [n.op_type for n in folded.graph.node].count("Mul")
        assert batch_norms == mul_adds and "Mul" not in ops
    else:  # one per conv, except the squeeze-excitation fcs and unet's output conv
        se = sum(".fc" in n.name for n in model.graph.node if n.op_type == "Conv")
        assert batch_norms == ops.count("Conv") - se - (name == "unet")
    count = param_count(model)
    if name.startswith("densenet"):  # a Mul + Add has the parameters of the norm it replaces
        assert count == param_count(folded)
    else:  # torchvision's count exactly; folding drops one parameter per channel
        assert count == models.info(name).params
        assert 0 < count - param_count(folded) < 0.01 * count
    _assert_healthy(_run(model))


def test_unfused_batch_norm_option_is_refused_where_missing():
    with pytest.raises(ModelError, match="resnet18: fold_bn=False is not available.*densenet121"):
        models.get("resnet18", fold_bn=False)


def test_unet_needs_a_multiple_of_8():
    with pytest.raises(ModelError, match="unet: image_size 20 must be a multiple of 8"):
        models.get("unet", image_size=20)


def test_shufflenet_channel_shuffle_as_torch_exports_it():
    model = models.get("shufflenet_v2", image_size=32)
    by_output = {n.output[0]: n for n in model.graph.node}
    reshapes = [n for n in model.graph.node if n.op_type == "Reshape"]
    assert len(reshapes) == 2 * 16
    for node in reshapes:  # every target shape is computed, never a constant
        target = by_output[node.input[1]]
        assert target.op_type == "Concat"
        sources = {by_output[by_output[i].input[0]].op_type for i in target.input
                   if by_output[i].op_type == "Unsqueeze"}
        assert sources <= {"Gather", "Where"} and "Gather" in sources
    assert sum(n.op_type == "Split" for n in model.graph.node) == 16 - 3
    groups = [a.i for n in model.graph.node for a in n.attribute if a.name == "group"]
    assert sum(g > 1 for g in groups) == 19


def test_builder_rejects_empty_tensor():
    b = models.builder.GraphBuilder("tiny", seed=0, batch_size=1, image_size=2)
    with pytest.raises(ModelError, match="tiny: node 'pool' would produce an empty tensor.*2x2"):
        b.max_pool(b.input, "pool", 3, 1)


def test_vgg_classifier_follows_feature_map():
    model = models.get("vgg16", image_size=64)
    weight = next(t for t in model.graph.initializer if t.name == "classifier.0.weight")
    assert list(weight.dims) == [4096, 512 * 2 * 2]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.integration
def test_deterministic(name):
    first = models.get(name, image_size=SMALL[name]).SerializeToString()
    assert models.get(name, image_size=SMALL[name]).SerializeToString() == first


def test_weights_do_not_depend_on_batch_or_image_size():
    def weights(**kwargs):
        model = models.get("mobilenet_v2", **kwargs)
        return {t.name: t.raw_data for t in model.graph.initializer}

    assert weights(image_size=32) == weights(batch_size=3, image_size=96)


@pytest.mark.integration
def test_models_differ_from_each_other():
    # per-model seeds: resnet50's backbone weights are not ssd's
    def stem(name):
        model = models.get(name, image_size=32)
        return next(t.raw_data for t in model.graph.initializer if t.name == "conv1.weight")

    assert stem("resnet50") != stem("ssd_resnet50_512")


def test_resnet50_names_follow_torchvision():
    model = models.get("resnet50", image_size=32)
    convs = [n.name for n in model.graph.node if n.op_type == "Conv"]
    assert convs[:5] == ["conv1", "layer1.0.conv1", "layer1.0.conv2", "layer1.0.conv3",
                         "layer1.0.downsample.0"]
    assert convs[-1] == "layer4.2.conv3"
    assert sum(c.endswith("downsample.0") for c in convs) == 4
    weights = {t.name for t in model.graph.initializer}
    assert {"layer3.5.conv2.weight", "layer3.5.conv2.bias", "fc.weight", "fc.bias"} <= weights


def test_resnet_strides():
    model = models.get("resnet18", image_size=64)
    strided = [n.name for n in model.graph.node if n.op_type == "Conv"
               and list(next(a.ints for a in n.attribute if a.name == "strides")) == [2, 2]]
    assert strided == ["conv1", "layer2.0.conv1", "layer2.0.downsample.0", "layer3.0.conv1",
                       "layer3.0.downsample.0", "layer4.0.conv1", "layer4.0.downsample.0"]


def test_mobilenet_depthwise_and_relu6():
    model = models.get("mobilenet_v2", image_size=32)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    depthwise = 0
    for node in model.graph.node:
        if node.op_type == "Conv":
            group = next(a.i for a in node.attribute if a.name == "group")
            out, per_group = inits[node.input[1]].shape[:2]
            if group > 1:
                depthwise += 1
                assert group == out and per_group == 1, node.name
        if node.op_type == "Clip":
            assert (float(inits[node.input[1]]), float(inits[node.input[2]])) == (0.0, 6.0)
    assert depthwise == 17
    assert sum(n.op_type == "Add" for n in model.graph.node) == 10


def _groups(model: onnx.ModelProto) -> dict[str, tuple[int, list[int]]]:
    """Grouped convs: name -> (groups, weight shape)."""
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    return {n.name: (a.i, weights[n.input[1]]) for n in model.graph.node if n.op_type == "Conv"
            for a in n.attribute if a.name == "group" and a.i > 1}


def test_resnext_group_convs_follow_torchvision():
    groups = _groups(models.get("resnext50_32x4d", image_size=32))
    assert sorted(groups) == sorted(f"layer{s}.{i}.conv2" for s, n in enumerate((3, 4, 6, 3), 1)
                                    for i in range(n))
    widths = {name.split(".")[0]: shape for name, (g, shape) in groups.items() if g == 32}
    assert widths == {"layer1": [128, 4, 3, 3], "layer2": [256, 8, 3, 3], "layer3": [512, 16, 3, 3],
                      "layer4": [1024, 32, 3, 3]}


def test_regnet_group_width_and_squeeze_excitation():
    model = models.get("regnet_y_800mf", image_size=32)
    groups = _groups(model)
    assert len(groups) == 14 and all(shape[1] == 16 and g * 16 == shape[0] for g, shape in groups.values())
    assert sorted({shape[0] for _, shape in groups.values()}) == [64, 144, 320, 784]
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("Sigmoid") == 14 and ops.count("GlobalAveragePool") == 15
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    fc1 = {n.name: weights[n.input[1]] for n in model.graph.node if n.name.endswith("se.fc1")}
    # torchvision squeezes to a quarter of the block's input channels, not of its width
    assert fc1["trunk_output.block2.block2-0.f.se.fc1"] == [16, 144, 1, 1]
    assert fc1["trunk_output.block2.block2-1.f.se.fc1"] == [36, 144, 1, 1]


def test_densenet_prenorm_is_mul_add():
    model = models.get("densenet121", image_size=32)
    ops = [n.op_type for n in model.graph.node]
    # norm1 of 58 dense layers, 3 transitions, norm5
    assert ops.count("Mul") == ops.count("Add") == 58 + 3 + 1
    assert ops.count("Concat") == 58


def test_ssd_heads_transpose_reshape_concat():
    model = models.get("ssd_resnet50_512", image_size=64)
    by_output = {n.output[0]: n for n in model.graph.node}
    for head in ("loc", "conf"):
        concat = by_output[head]
        assert concat.op_type == "Concat" and len(concat.input) == 6
        for part in concat.input:
            reshape = by_output[part]
            transpose = by_output[reshape.input[0]]
            assert reshape.op_type == "Reshape" and transpose.op_type == "Transpose"
            assert list(transpose.attribute[0].ints) == [0, 2, 3, 1]
            assert by_output[transpose.input[0]].op_type == "Conv"


def test_ssd_full_size_anchor_count():
    model = models.get("ssd_resnet50_512")
    assert {o.name: _dims(o) for o in model.graph.output} == {
        "loc": [1, 6132, 4], "conf": [1, 6132, 81]}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_full_size_model_runs(name):
    model = models.get(name)
    outputs = _run(model)
    size = models.info(name).image_size
    assert {k: list(v.shape) for k, v in outputs.items()} == _expected_outputs(name, 1, size)
    _assert_healthy(outputs)
