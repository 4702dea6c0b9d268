"""The probe index beside a records file: groups per compiled probe, usable only when recorded."""

from __future__ import annotations

from graphtune.measure import Task
from graphtune.opgroups.probe_index import ProbeIndex, index_path_of, probe_key
from graphtune.ops import Op


def _task(sha: str) -> Task:
    return Task(Op.OP_GROUP, {"ops": "add", "args": [[[1, 8], "float32"]], "sha": sha})


def _groups(*shas: str) -> list[dict]:
    return [{"node": "a", "layout": "NCHW8c", "label": f"add{i}", "task": _task(sha), "bare": None}
            for i, sha in enumerate(shas)]


def test_a_probe_is_answered_only_when_every_task_and_twin_is_recorded(tmp_path):
    path = tmp_path / "m.probes.jsonl"
    fused = {**_groups("1" * 16)[0], "bare": _task("2" * 16)}
    ProbeIndex(path, lambda task: True).add("k", [fused])
    assert ProbeIndex(path, lambda task: True).get("k") == [fused]
    assert ProbeIndex(path, lambda task: task.workload["sha"] == "1" * 16).get("k") is None
    assert ProbeIndex(path, lambda task: True).get("other") is None


def test_a_torn_line_is_skipped_and_the_next_one_starts_a_line_of_its_own(tmp_path):
    path = tmp_path / "m.probes.jsonl"
    index = ProbeIndex(path, lambda task: True)
    index.add("a", _groups("1" * 16))
    path.write_bytes(path.read_bytes() + b'{"key": "b", "groups": [{"node"')  # a crash mid-line
    ProbeIndex(path, lambda task: True).add("c", _groups("3" * 16, "4" * 16))
    again = ProbeIndex(path, lambda task: True)
    assert again.get("a") == _groups("1" * 16) and again.get("b") is None
    assert again.get("c") == _groups("3" * 16, "4" * 16)
    path.write_text(path.read_text() + '{"key": "d", "groups": [{"node": "a"}]}\n')  # edited
    assert ProbeIndex(path, lambda task: True).get("d") is None


def test_keys_differ_with_the_model_and_the_probe_and_paths_sit_beside_the_records():
    probe = {"nodes": {"c": ["conv2d", "NCHW8c", "NCHW8c", {"ic_bn": 8}]}, "pairs": [["c", "NCHW8c"]]}
    keys = {probe_key(1, probe, {"kind": "llvm"}), probe_key(2, probe, {"kind": "llvm"}),
            probe_key(1, {**probe, "pairs": []}, {"kind": "llvm"}),
            probe_key(1, probe, {"kind": "llvm", "mcpu": "znver4"})}
    assert len(keys) == 4
    assert index_path_of("out/x.records.jsonl") == "out/x.probes.jsonl"
