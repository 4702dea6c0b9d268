"""Records file and task keys of graphtune.measure (no kernels are built here)."""

import json
import os
import subprocess
import sys

import pytest

from graphtune.errors import MeasureError
from graphtune.measure import Record, Records, Task, target_key_of
from graphtune.measure.task import record_key, tvm_version

pytestmark = pytest.mark.unit

TARGET = {"kind": "llvm", "mcpu": "znver5", "num-cores": 2, "vector_bits": 512, "threads": 2}
OTHER = dict(TARGET, mcpu="haswell", vector_bits=256)
CONV = {"data": [1, 32, 14, 14], "kernel": [64, 32, 3, 3], "strides": [1, 1],
        "padding": [1, 1, 1, 1], "dilation": [1, 1], "groups": 1, "dtype": "float32"}


def conv_task(ic_bn, oc_bn, reg_n=7):
    return Task("conv2d", CONV, {"ic_bn": ic_bn, "oc_bn": oc_bn, "reg_n": reg_n,
                                 "unroll_kw": True})


def transform_task(c=16):
    return Task("transform", {"shape": [1, c, 4, 4], "src": "NCHW", "dst": "NCHW8c",
                              "dtype": "float32"})


def write(path, records):
    recs = Records(path)
    for record in records:
        recs.append(record)
    return recs


def test_task_key_ignores_order_and_tuples():
    a = Task("conv2d", dict(reversed(list(CONV.items()))), {"oc_bn": 16, "ic_bn": 8})
    b = Task("conv2d", {**CONV, "data": (1, 32, 14, 14)}, {"ic_bn": 8, "oc_bn": 16})
    assert a == b and hash(a) == hash(b) and a.key == b.key
    assert a != Task("conv2d", CONV, {"ic_bn": 8, "oc_bn": 32})
    assert len({a, b}) == 1


def test_task_rejects_bad_input():
    with pytest.raises(MeasureError, match="unknown task kind 'conv3d'.*conv2d"):
        Task("conv3d", CONV)
    with pytest.raises(MeasureError, match="lacks field.*weight"):
        Task("dense", {"data": [1, 4], "dtype": "float32"})
    with pytest.raises(MeasureError, match="not JSON-serialisable"):
        Task("transform", {"shape": [1], "src": "NCHW", "dst": "NCHW", "dtype": object()})


@pytest.mark.integration
def test_key_is_stable_across_processes():
    task = conv_task(8, 16)
    code = (
        "from graphtune.measure import Task\n"
        "from graphtune.measure.task import record_key\n"
        f"t = Task('conv2d', {dict(reversed(list(CONV.items())))!r}, "
        "{'unroll_kw': True, 'reg_n': 7, 'oc_bn': 16, 'ic_bn': 8})\n"
        f"print(record_key(t, {TARGET!r}, '0.27.0'))\n"
    )
    env = dict(os.environ, PYTHONHASHSEED="123")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.strip()
    assert out == record_key(task, TARGET, "0.27.0")
    assert json.loads(out)["target"] == TARGET


def test_append_get_and_reload(tmp_path):
    path = tmp_path / "a.records.jsonl"
    ok = Record.success(conv_task(8, 16), TARGET, [1.0, 3.0, 2.0], threads=2, number=10)
    bad = Record.failure(conv_task(8, 32), TARGET, "build: KnobError: reg_n too large")
    write(path, [ok, bad])
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert {"target", "kind", "workload", "knobs", "ms", "median_ms", "error", "tvm",
            "threads", "time"} <= set(first)
    assert first["median_ms"] == 2.0 and first["tvm"] == tvm_version()

    recs = Records.load(path)
    assert len(recs) == 2
    assert recs.get(conv_task(8, 16), TARGET) == ok
    got = recs.get(conv_task(8, 32), TARGET)
    assert not got.ok and "reg_n" in got.error and got.median_ms is None
    assert recs.get(conv_task(8, 16), OTHER) is None  # other target never mixes
    assert recs.get(conv_task(16, 16), TARGET) is None


def test_last_record_of_a_task_wins(tmp_path):
    path = tmp_path / "a.records.jsonl"
    write(path, [Record.failure(transform_task(), TARGET, "run: timed out"),
                 Record.success(transform_task(), TARGET, [0.5], threads=2)])
    assert Records.load(path).get(transform_task(), TARGET).ok


def test_torn_last_line_is_skipped_then_cut(tmp_path):
    path = tmp_path / "a.records.jsonl"
    write(path, [Record.success(transform_task(16), TARGET, [0.5], threads=2),
                 Record.success(transform_task(32), TARGET, [0.7], threads=2)])
    data = path.read_bytes()
    path.write_bytes(data[:-25])  # crash in the middle of writing the second line
    with pytest.warns(UserWarning, match="torn last line 2"):
        recs = Records(path)
    assert len(recs) == 1 and recs.get(transform_task(32), TARGET) is None
    recs.append(Record.success(transform_task(32), TARGET, [0.6], threads=2))
    reread = Records.load(path)  # no warning: the torn bytes were cut off
    assert [r.median_ms for r in reread] == [0.5, 0.6]
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_missing_final_newline_is_repaired(tmp_path):
    path = tmp_path / "a.records.jsonl"
    path.write_text(Record.success(transform_task(16), TARGET, [0.5], threads=2).to_json())
    recs = Records(path)
    assert len(recs) == 1
    recs.append(Record.success(transform_task(32), TARGET, [0.7], threads=2))
    assert len(Records.load(path)) == 2


def test_unreadable_middle_line_warns(tmp_path):
    path = tmp_path / "a.records.jsonl"
    good = Record.success(transform_task(16), TARGET, [0.5], threads=2).to_json()
    path.write_text(good + "\n{garbage\n" + good.replace("0.5", "0.4") + "\n")
    with pytest.warns(UserWarning, match="unreadable line 2"):
        recs = Records(path)
    assert recs.get(transform_task(16), TARGET).median_ms == 0.4


def test_load_missing_file_names_it(tmp_path):
    with pytest.raises(MeasureError, match="nope.records.jsonl does not exist"):
        Records.load(tmp_path / "nope.records.jsonl")


def test_success_rejects_nonpositive_times():
    with pytest.raises(MeasureError, match="positive"):
        Record.success(transform_task(), TARGET, [0.0], threads=1)
    with pytest.raises(MeasureError, match="positive"):
        Record.success(transform_task(), TARGET, [], threads=1)


def test_get_finds_each_record_by_task_and_target(tmp_path):
    times = {(8, 16): 3.0, (8, 32): 1.0, (16, 16): 2.0, (16, 32): 4.0}
    records = [Record.success(conv_task(i, o), TARGET, [ms], threads=2)
               for (i, o), ms in times.items()]
    records.append(Record.failure(conv_task(32, 32), TARGET, "run: crashed"))
    records.append(Record.success(conv_task(32, 32), OTHER, [0.1], threads=2))
    write(tmp_path / "a.records.jsonl", records)

    recs = Records.load(tmp_path / "a.records.jsonl")
    for (i, o), ms in times.items():
        assert recs.get(conv_task(i, o), TARGET).median_ms == ms
        assert recs.get(conv_task(i, o), OTHER) is None
    assert recs.get(conv_task(32, 32), TARGET).error == "run: crashed"
    assert recs.get(conv_task(32, 32), OTHER).median_ms == 0.1
    assert recs.get(conv_task(4, 4), TARGET) is None
    assert sorted(r.median_ms for r in recs if r.ok) == [0.1, 1.0, 2.0, 3.0, 4.0]


def test_target_key_of_record_form_is_identity():
    assert target_key_of(TARGET) == TARGET


def test_records_in_missing_folder_fail_before_measuring(tmp_path):
    with pytest.raises(MeasureError, match="folder .*nowhere does not exist"):
        Records(tmp_path / "nowhere" / "a.records.jsonl")


def test_records_of_another_timing_protocol_are_never_reused(tmp_path):
    import dataclasses

    from graphtune.measure.timing import task_protocol

    task = Task("transform", {"shape": [1, 8, 2, 2], "src": "NCHW", "dst": "NCHW8c",
                              "dtype": "float32"})
    path = tmp_path / "old.records.jsonl"
    current = Record.success(task, {"kind": "llvm"}, [1.0], threads=1)
    old = dataclasses.replace(current, timing=None, median_ms=0.5, ms=[0.5])
    line = json.loads(old.to_json())
    del line["timing"]  # a line written before the protocol tag existed
    path.write_text(json.dumps(line) + "\n")
    records = Records.load(path)
    assert len(records) == 1 and records.get(task, {"kind": "llvm"}) is None
    records.append(current)
    assert current.timing == task_protocol(task) == "filled-cache"
    assert records.get(task, {"kind": "llvm"}).median_ms == 1.0
