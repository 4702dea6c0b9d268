"""measure() on graphtune.x86's real kernels and layout transforms, small shapes."""

import json
import subprocess
import sys
import textwrap

import pytest

import graphtune.x86 as x86
from graphtune.measure import Records, Task, measure

CONV = x86.conv2d_workload([1, 16, 10, 10], [32, 16, 3, 3], padding=[1, 1, 1, 1])
STRIDED_1X1 = x86.conv2d_workload([1, 24, 8, 8], [16, 24, 1, 1], strides=[2, 2])
DEPTHWISE = x86.conv2d_workload([1, 32, 8, 8], [32, 1, 3, 3], padding=[1, 1, 1, 1], groups=32)
DENSE = x86.dense_workload([1, 64], [40, 64])
FAST = {"min_repeat_ms": 10, "repeat": 2, "progress": False}


def real_tasks():
    tasks = []
    for workload, n in ((CONV, 4), (STRIDED_1X1, 2), (DEPTHWISE, 2), (DENSE, 2)):
        tasks += [Task(x86.op_of(workload), workload, k)
                  for k in x86.candidates(workload, max_candidates=n)]
    for src, dst in (("NCHW", "NCHW16c"), ("NCHW16c", "NCHW8c"), ("NCHW8c", "NCHW")):
        tasks.append(Task("transform", {"shape": [1, 32, 10, 10], "src": src, "dst": dst,
                                        "dtype": "float32"}))
    return tasks


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """Real tasks measured by a separate Python process into a fresh records file."""
    path = tmp_path_factory.mktemp("records") / "x86.records.jsonl"
    script = textwrap.dedent(f"""
        from test_measure_x86 import FAST, real_tasks
        from graphtune.measure import measure
        measure(real_tasks(), records={str(path)!r}, **FAST)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    return path


def test_real_kernels_and_transforms_have_sane_times(measured):
    lines = [json.loads(line) for line in measured.read_text().splitlines()]
    tasks = real_tasks()
    assert len(lines) == len(tasks)
    assert {line["kind"] for line in lines} == {"conv2d", "depthwise_conv2d", "dense", "transform"}
    for line in lines:
        assert line["error"] is None, line
        assert len(line["ms"]) >= 2 and all(0 < ms < 1000 for ms in line["ms"])
        assert min(line["ms"]) <= line["median_ms"] <= max(line["ms"])
        assert line["threads"] == x86.num_threads()
        assert line["target"] == x86.target_key(x86.host_target())


def test_rerun_in_another_process_measures_nothing(measured):
    before = measured.read_text()
    out = measure(real_tasks(), records=measured, **FAST)  # keys agree across processes
    assert measured.read_text() == before
    assert all(r.ok for r in out)
    assert [r.task for r in out] == real_tasks()


def test_records_are_found_by_task_on_the_host(measured):
    recs = Records.load(measured)
    target = x86.host_target()
    for task in real_tasks():
        record = recs.get(task, target)
        assert record is not None and record.ok and record.task == task
        assert recs.line_of(task, target) is not None


def test_invalid_knobs_and_wrong_kind_become_error_records(tmp_path):
    path = tmp_path / "bad.records.jsonl"
    good = x86.candidates(CONV, max_candidates=1)[0]
    tasks = [Task("conv2d", CONV, dict(good, ic_bn=5)),
             Task("depthwise_conv2d", CONV, good),
             Task("transform", {"shape": [1, 24, 4, 4], "src": "NCHW", "dst": "NCHW16c",
                                "dtype": "float32"})]
    out = measure(tasks, records=path, **FAST)
    assert not any(r.ok for r in out)
    assert out[0].error.startswith("build: KnobError: conv2d knob 'ic_bn' = 5 must divide")
    assert "does not match" in out[1].error and "'conv2d'" in out[1].error
    assert out[2].error.startswith("build: LayoutError")
    assert len(Records.load(path)) == 3
