"""Config file: round trip, validation of malformed files, checks against models."""

import copy
import json
import math

import pytest

import graphtune  # noqa: F401  (sets TVM_NUM_THREADS before TVM starts)
from graphtune import models, x86
from graphtune.config import Config, NodeConfig
from graphtune.errors import ConfigError, ConfigMismatchError, KnobError, LayoutError
from graphtune.pipeline import extract
from graphtune.solve import Solution

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def resnet18():
    return models.get("resnet18", image_size=32)


@pytest.fixture(scope="module")
def uniform(resnet18):
    return Config.uniform(resnet18, block=16)


def test_uniform_blocks_and_defaults(uniform):
    conv1 = uniform.nodes["conv1"]
    assert (conv1.in_layout, conv1.out_layout) == ("NCHW3c", "NCHW16c")  # 3 channels: block 3
    convs = [n for n in uniform.nodes.values() if n.op == "conv2d"]
    assert len(convs) == 20
    assert all(n.out_layout == "NCHW16c" for n in convs)
    assert all(n.in_layout == "NCHW16c" for n in convs[1:])
    assert uniform.nodes["fc"].op == "dense"
    for node in uniform.nodes.values():
        assert x86.layouts_of(node.workload, node.knobs) == (node.in_layout, node.out_layout)


def test_uniform_block_falls_back_to_a_divisor(resnet18):
    cfg = Config.uniform(resnet18, block=48)  # 64 channels: 48 does not divide them
    for node in cfg.nodes.values():
        if node.op == "conv2d":
            assert node.workload["kernel"][0] % node.knobs["oc_bn"] == 0
            assert node.workload["data"][1] % node.knobs["ic_bn"] == 0


def test_round_trip_through_a_file(uniform, tmp_path):
    path = tmp_path / "resnet18.graphtune.json"
    uniform.save(path)
    loaded = Config.load(path)
    assert loaded.to_dict() == uniform.to_dict()
    assert json.loads(path.read_text())["format"] == "graphtune.config"


def test_check_accepts_its_own_model_and_lists_unmentioned(uniform, resnet18):
    assert uniform.check(resnet18) == []
    partial = Config({k: v for k, v in uniform.nodes.items() if k != "layer1.0.conv2"})
    assert partial.check(resnet18) == ["layer1.0.conv2"]


def test_config_for_other_image_size_names_node_and_field(uniform):
    with pytest.raises(ConfigMismatchError, match=r"nodes\.conv1\.workload\.data.*\[1, 3, 32, 32\]"):
        uniform.check(models.get("resnet18", image_size=64))


def test_config_for_other_model_names_node(uniform):
    with pytest.raises(ConfigMismatchError, match=r"nodes\.\S+: the model has no layout node"):
        uniform.check(models.get("mobilenet_v2", image_size=32))


def test_edited_workload_names_field(uniform, resnet18):
    edited = copy.deepcopy(uniform)
    edited.nodes["layer2.0.conv1"].workload["strides"] = [1, 1]
    with pytest.raises(ConfigMismatchError, match=r"nodes\.layer2\.0\.conv1\.workload\.strides"):
        edited.check(resnet18)


def test_invalid_knobs_raise_knob_error(uniform, resnet18):
    bad = copy.deepcopy(uniform)
    bad.nodes["layer1.0.conv1"].knobs["oc_bn"] = 7
    with pytest.raises(KnobError, match=r"nodes\.layer1\.0\.conv1\.knobs.*oc_bn"):
        bad.check(resnet18)


def test_layouts_disagreeing_with_knobs(uniform, resnet18):
    bad = copy.deepcopy(uniform)
    bad.nodes["layer1.0.conv1"].out_layout = "NCHW8c"
    with pytest.raises(ConfigError, match=r"nodes\.layer1\.0\.conv1: layouts"):
        bad.check(resnet18)


def _doc(uniform):
    return json.loads(json.dumps(uniform.to_dict()))


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d.pop("nodes"), "nodes"),
        (lambda d: d.update(format="other"), "format"),
        (lambda d: d.update(version=99), "version"),
        (lambda d: d["nodes"]["conv1"].pop("knobs") and d["nodes"]["conv1"].update(knobs=[1]),
         r"nodes\.conv1\.knobs"),
        (lambda d: d["nodes"]["conv1"].update(op="pool"), r"nodes\.conv1\.op"),
        (lambda d: d["nodes"]["conv1"]["workload"].pop("strides"), r"nodes\.conv1\.workload\.strides"),
        (lambda d: d["nodes"]["conv1"]["workload"].update(groups="1"), r"nodes\.conv1\.workload\.groups"),
        (lambda d: d["nodes"]["conv1"].update(in_layout=16), r"nodes\.conv1\.in_layout"),
        (lambda d: d["nodes"]["conv1"].update(cost_ms="fast"), r"nodes\.conv1\.cost_ms"),
        (lambda d: d["nodes"]["fc"].update(in_layout="NCHW"), r"nodes\.fc: a dense node"),
    ],
)
def test_malformed_documents_name_the_field(uniform, edit, field):
    doc = _doc(uniform)
    edit(doc)
    with pytest.raises(ConfigError, match=field):
        Config.from_dict(doc)


def test_unknown_layout_raises_layout_error(uniform):
    doc = _doc(uniform)
    doc["nodes"]["conv1"]["out_layout"] = "NHWC"
    with pytest.raises(LayoutError, match=r"nodes\.conv1\.out_layout.*NHWC"):
        Config.from_dict(doc)


def test_load_reports_json_syntax_position_and_missing_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"format": "graphtune.config",\n "version": 1,\n "nodes": {,}}')
    with pytest.raises(ConfigError, match=r"broken\.json: not valid JSON at line 3"):
        Config.load(path)
    with pytest.raises(ConfigError, match="no such config file"):
        Config.load(tmp_path / "absent.json")


@pytest.mark.integration
def test_random_config_is_valid_and_varied(resnet18):
    cfg = Config.random(resnet18, seed=3)
    assert cfg.check(resnet18) == []
    assert len({n.out_layout for n in cfg.nodes.values() if n.op == "conv2d"}) > 1
    assert Config.random(resnet18, seed=3).to_dict() == cfg.to_dict()


@pytest.mark.integration
def test_from_solution_records_choices_and_fingerprint(resnet18):
    graph = extract(resnet18, max_candidates=3)
    assignment = {name: len(graph.candidates(name)) - 1 for name in graph.nodes}
    solution = Solution(assignment, energy=2.0, lower_bound=1.5, optimal=False, method="cpsat",
                        seconds=0.25)
    cfg = Config.from_solution(graph, solution, model_name="resnet18")
    assert cfg.model == {"name": "resnet18", "fingerprint": graph.fingerprint()}
    assert cfg.solution["method"] == "cpsat" and math.isclose(cfg.solution["gap"], 0.25)
    conv = cfg.nodes["layer1.0.conv1"]
    assert conv.knobs == dict(graph.candidates("layer1.0.conv1")[-1].knobs)
    assert {n.op for n in cfg.nodes.values()} == {"conv2d", "dense", "join"}
    assert cfg.check(graph) == []
    assert cfg.check(resnet18) == []  # joins are skipped when only layout ops are known
    other = extract(models.get("resnet18", image_size=64), max_candidates=1)
    with pytest.raises(ConfigMismatchError, match="workload"):
        cfg.check(other)


def test_node_config_dict_round_trip():
    node = NodeConfig("join", None, "NCHW8c", "NCHW8c", {}, None)
    assert NodeConfig.from_dict("j", node.to_dict()) == node
