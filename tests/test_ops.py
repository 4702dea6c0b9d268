"""graphtune.ops (TVM-free op kinds and workloads), x86 op specs, baselines, and what must not change."""

import json
import pathlib
import subprocess
import sys

import pytest

import graphtune
from graphtune import baselines, models, pipeline, x86
from graphtune.config import Config
from graphtune.errors import ConfigError, ModelError
from graphtune.graph import Candidate
from graphtune.measure.task import Task, record_key
from graphtune.ops import (
    GRAPH_OPS,
    KERNEL_OPS,
    LAYOUT_OPS,
    NODE_OPS,
    TASK_KINDS,
    Op,
    check_workload,
    conv2d_workload,
    flops,
    op_of,
    output_shape,
)

pytestmark = pytest.mark.unit

DATA = pathlib.Path(__file__).parent / "data"
ROOT = pathlib.Path(__file__).parent.parent
TARGET = {"kind": "llvm", "mcpu": "znver5", "num-cores": 2, "threads": 2, "vector_bits": 512}
CONV = {"data": [1, 16, 8, 8], "kernel": [16, 16, 3, 3], "strides": [1, 1], "padding": [1, 1, 1, 1],
        "dilation": [1, 1], "groups": 1, "dtype": "float32"}

# Computed on main (8423733) before ops became an enum; records.jsonl files hold these keys.
MAIN_KEYS = [
    (Task("conv2d", CONV, {"ic_bn": 8, "oc_bn": 16, "reg_n": 8, "unroll_kw": True}),
     '{"kind":"conv2d","knobs":{"ic_bn":8,"oc_bn":16,"reg_n":8,"unroll_kw":true},"target":{"kind":"llvm",'
     '"mcpu":"znver5","num-cores":2,"threads":2,"vector_bits":512},"timing":"flush-v2","tvm":"0.27.0",'
     '"workload":{"data":[1,16,8,8],"dilation":[1,1],"dtype":"float32","groups":1,"kernel":[16,16,3,3],'
     '"padding":[1,1,1,1],"strides":[1,1]}}'),
    (Task(Op.DENSE, {"data": [1, 8], "weight": [4, 8], "dtype": "float32"}, {"oc_bn": 4, "k_bn": 8}),
     '{"kind":"dense","knobs":{"k_bn":8,"oc_bn":4},"target":{"kind":"llvm","mcpu":"znver5","num-cores":2,'
     '"threads":2,"vector_bits":512},"timing":"flush-v2","tvm":"0.27.0","workload":{"data":[1,8],'
     '"dtype":"float32","weight":[4,8]}}'),
]


@pytest.mark.parametrize("module", ["graphtune.ops", "graphtune.config", "graphtune.graph"])
def test_core_modules_import_without_tvm(module):
    code = (f"import sys, {module}; "
            "assert 'tvm' not in sys.modules, sorted(m for m in sys.modules if 'tvm' in m)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("task, key", MAIN_KEYS, ids=["conv2d", "dense"])
def test_record_keys_are_those_main_wrote(task, key):
    assert record_key(task, TARGET, "0.27.0", "flush-v2") == key
    assert isinstance(task.kind, Op) and json.loads(key)["kind"] == task.kind


def test_config_saved_by_main_loads_and_matches_its_model(tmp_path):
    path = DATA / "mobilenet_v2_32.main.graphtune.json"
    config = Config.load(path)
    assert {node.op for node in config.nodes.values()} == {"conv2d", "depthwise_conv2d", "dense", "join"}
    assert config.check(models.get("mobilenet_v2", image_size=32)) == []
    config.save(tmp_path / "again.json")  # the format is unchanged: saving gives back the same document
    assert json.loads((tmp_path / "again.json").read_text()) == json.loads(path.read_text())


def test_op_is_its_string():
    assert Op.CONV2D == "conv2d" and "conv2d" in {Op.CONV2D} and Op("dense") is Op.DENSE
    assert json.dumps({Op.JOIN: [Op.BOUNDARY]}) == '{"join": ["boundary"]}'
    assert f"{Op.TRANSFORM}" == str(Op.TRANSFORM) == repr(Op.TRANSFORM)[1:-1] == "transform"
    assert set(GRAPH_OPS) == set(NODE_OPS) | {Op.BOUNDARY} == set(LAYOUT_OPS) | {Op.JOIN, Op.BOUNDARY}
    # candidates may run them
    bf16_kernels = {Op.CONV2D_BF16, Op.DENSE_BF16, Op.DEPTHWISE_CONV2D_BF16, Op.GROUP_CONV2D_BF16}
    assert set(KERNEL_OPS) == set(LAYOUT_OPS) | bf16_kernels
    assert set(TASK_KINDS) == set(KERNEL_OPS) | {Op.TRANSFORM, Op.OP_GROUP, Op.IN_MODEL}


@pytest.mark.parametrize("workload, op", [
    (conv2d_workload([1, 8, 6, 6], [8, 8, 3, 3]), Op.CONV2D),
    (conv2d_workload([1, 8, 6, 6], [8, 1, 3, 3], groups=8), Op.DEPTHWISE_CONV2D),
    (conv2d_workload([1, 8, 6, 6], [16, 4, 3, 3], groups=2), Op.GROUP_CONV2D),
    (x86.conv2d_transpose_workload([1, 8, 6, 6], [8, 4, 2, 2], [2, 2]), Op.CONV2D_TRANSPOSE),
    (x86.dense_workload([1, 3, 8], [4, 8]), Op.DENSE),
    (x86.conv2d_int8_workload([1, 8, 6, 6], [8, 8, 3, 3]), Op.CONV2D_INT8),
    (x86.dense_int8_workload([1, 8], [4, 8]), Op.DENSE_INT8),
])
def test_op_of_and_explicit_op_agree(workload, op):
    assert op_of(workload) is op
    assert check_workload(workload, op) is workload
    assert output_shape(workload, op) == output_shape(workload)
    assert flops(workload, op) == flops(workload) > 0
    wrong = Op.DENSE if op is not Op.DENSE else Op.CONV2D
    with pytest.raises(ModelError):
        check_workload(workload, wrong)


def test_workload_errors_name_the_field_and_where():
    with pytest.raises(ModelError,
                       match=r"nodes\.c\.workload\.kernel = \[16, 8, 3, 3\] expects 16 input channels"):
        check_workload({**CONV, "kernel": [16, 8, 3, 3], "groups": 2, "data": [1, 8, 8, 8]}, "conv2d",
                       where="nodes.c.workload")
    with pytest.raises(ModelError,
                       match=r"workload: a 'depthwise_conv2d' workload .* does not match op 'conv2d'"):
        check_workload(conv2d_workload([1, 8, 6, 6], [8, 1, 3, 3], groups=8), Op.CONV2D)
    with pytest.raises(ModelError, match="unknown workload op 'pool'; known: conv2d"):
        check_workload(CONV, "pool")


def test_every_layout_op_has_one_x86_spec_and_unknown_ops_are_listed():
    assert set(x86.SPECS) == set(KERNEL_OPS)
    assert all(spec.op is op for op, spec in x86.SPECS.items())
    assert x86.KNOBS[Op.DENSE] == {"required": ("oc_bn", "k_bn"), "optional": ("n_bn", "rows_inner")}
    with pytest.raises(ValueError, match="unknown op 'join' for graphtune.x86; known: conv2d, "
                                         "depthwise_conv2d, group_conv2d, conv2d_transpose, dense"):
        x86.spec_of("join")


def test_x86_functions_take_the_op_and_check_it_fits():
    depthwise = conv2d_workload([1, 8, 6, 6], [8, 1, 3, 3], groups=8, padding=[1, 1, 1, 1])
    knobs = x86.default_knobs(depthwise, block=8, op=Op.DEPTHWISE_CONV2D)
    assert knobs == x86.default_knobs(depthwise, block=8)
    assert x86.layouts_of(depthwise, knobs, op="depthwise_conv2d") == ("NCHW8c", "NCHW8c")
    with pytest.raises(ModelError, match="does not match op 'group_conv2d'"):
        x86.candidates(depthwise, op=Op.GROUP_CONV2D)


def test_extraction_uses_the_candidate_generator_it_is_given():
    seen = []

    def one_block(workload, op):
        seen.append(op)
        return [Candidate({}, "NCHW", "NCHW", 0.5)]

    graph = pipeline.extract(models.get("resnet18", image_size=32), candidates=one_block)
    assert set(seen) == {Op.CONV2D, Op.DENSE} and all(isinstance(op, Op) for op in seen)
    assert len(seen) < sum(graph.op(n) in LAYOUT_OPS for n in graph.nodes)  # shared per workload
    assert all(graph.candidates(n) == (Candidate({}, "NCHW", "NCHW", 0.5),)
               for n in graph.nodes if graph.op(n) in LAYOUT_OPS)
    default = graphtune.extract(models.get("resnet18", image_size=32), max_candidates=2)
    assert len(default.candidates("layer1.0.conv1")) == 2


def test_baselines_are_the_public_names():
    model = models.get("resnet18", image_size=32)
    assert Config.uniform(model, block=8).to_dict() == baselines.uniform(model, block=8).to_dict()
    assert Config.random(model, seed=2).to_dict() == baselines.random(model, seed=2).to_dict()
    assert pipeline.kernel_best_solution is baselines.kernel_best_solution
    with pytest.raises(ConfigError, match="block: expected a positive int"):
        Config.uniform(model, block=0)
