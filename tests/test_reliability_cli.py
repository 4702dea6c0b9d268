"""Issue 13: every CLI failure is one line and exit status 2, checked before any work."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest

import graphtune
from graphtune import cli
from graphtune.config import Config
from graphtune.errors import ModelError
from graphtune.graph import LayoutGraph
from graphtune.peers import PeerProcess
from reliability_models import all_failed_records, one_line_error, residual, run_cli

TUNE = ["--max-candidates", "2", "-q"]




@pytest.fixture
def blocked(tmp_path):
    """A path under a regular file: no one, root included, can create it."""
    (tmp_path / "file").write_text("")
    return tmp_path / "file"


@pytest.fixture
def files(tmp_path, monkeypatch):
    """A working folder with a tiny model, a config for it and a saved layout graph."""
    monkeypatch.chdir(tmp_path)
    model = residual()
    onnx.save(model, tmp_path / "tiny.onnx")
    Config.uniform(model).save(tmp_path / "tiny.graphtune.json")
    graph = LayoutGraph()
    graph.add_node("a", costs=[1.0, 2.0])
    (tmp_path / "g.json").write_text(graph.to_json())
    return tmp_path


@pytest.mark.parametrize("argv, fragments", [
    (["tune", "tiny.onnx", "--solver", "bogus"], ["--solver 'bogus' is not one of: auto"]),
    (["solve", "g.json", "--method", "bogus"], ["--method 'bogus' is not one of: auto"]),
    (["bench", "tiny.onnx", "--vs", "bogus"], ["--vs peer 'bogus' is not one of: openvino"]),
    (["bench", "tiny.onnx", "--repeat", "0"], ["--repeat must be a positive integer, got 0"]),
    (["bench", "tiny.onnx", "--json", "/proc/x.json"], ["/proc/x.json cannot be written"]),
    (["show", "."], [".: cannot read the config file (Is a directory)"]),
    (["compile", "tiny.onnx", ".", "-o", "x.so"], [".: cannot read the config file"]),
    (["show", "tiny.onnx"], ["tiny.onnx: not a config file (binary, not UTF-8 JSON)"]),
    (["show", "tiny.onnx/c.json"], ["cannot read the config file (Not a directory)"]),
    (["compile", "tiny.onnx", "tiny.graphtune.json", "-o", "/proc/x.so"],
     ["library (-o) /proc/x.so cannot be written"]),
    (["tune", "tiny.onnx", "-o", "nowhere/x.json"], ["folder", "nowhere does not exist"]),
    (["tune", "tiny.onnx", "--records", "/proc/x.records.jsonl"],
     ["records file /proc/x.records.jsonl cannot be opened for writing"]),
    (["tune", "tiny.onnx", "--rpc-tracker", "localhost:99999", "--rpc-key", "x86"],
     ["port from 1 to 65535"]),
    (["tune", "tiny.onnx", "--shape", "input=1,x"], ["--shape 'input=1,x'"]),
    (["solve", "tiny.onnx"], ["tiny.onnx: not a layout graph"]),
])
def test_bad_arguments_are_one_line_before_any_work(files, capsys, argv, fragments):
    status, _, err = run_cli(capsys, *argv, *(TUNE if argv[0] == "tune" else []))
    one_line_error(status, err, *fragments)
    assert not (files / "tiny.records.jsonl").exists()  # nothing was measured


@pytest.mark.parametrize("command", ["tune", "compile", "bench"])
def test_outputs_under_a_regular_file_fail_first(files, blocked, capsys, command):
    argv = {"tune": ["tune", "tiny.onnx", "-o", blocked / "x.json", *TUNE],
            "compile": ["compile", "tiny.onnx", "tiny.graphtune.json", "-o", blocked / "x.so"],
            "bench": ["bench", "tiny.onnx", "--json", blocked / "x.json"]}[command]
    status, _, err = run_cli(capsys, *argv)
    one_line_error(status, err, f"folder {blocked} does not exist")
    assert not (files / "tiny.records.jsonl").exists()


def test_bench_with_a_mismatched_config_is_one_line(files):
    """The peer process used to print an EOFError traceback after the right line."""
    config = files / "r18.graphtune.json"
    Config.uniform(graphtune.models.get("resnet18", image_size=32)).save(config)
    proc = subprocess.run([sys.executable, "-m", "graphtune.cli", "bench", "resnet18",
                           "--image-size", "64", "--config", str(config), "--repeat", "1"],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONWARNINGS="ignore"))
    one_line_error(proc.returncode, proc.stderr, "nodes.conv1",
                   "re-tune it")
    assert "Traceback" not in proc.stderr


def test_unexpected_errors_are_one_bug_report_line(files, capsys, monkeypatch):
    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "_show", broken)
    status, _, err = run_cli(capsys, "show", "tiny.graphtune.json")
    assert status == 3 and err.count("\n") == 1
    assert err.startswith("graphtune: internal error (RuntimeError: boom); this is a bug")
    monkeypatch.setenv("GRAPHTUNE_TRACEBACK", "1")
    with pytest.raises(RuntimeError, match="boom"):
        cli.main(["show", "tiny.graphtune.json"])


def test_retry_errors_flag(files, capsys):
    model = residual()
    records = files / "tiny.records.jsonl"
    all_failed_records(records, model)
    argv = ["tune", "tiny.onnx", "--records", records, "-o", "t.graphtune.json", *TUNE]
    status, _, err = run_cli(capsys, *argv)
    one_line_error(status, err, "all 2 candidates failed", "--retry-errors",
                   f"delete line(s) 1, 2 of {records}")
    status, out, _ = run_cli(capsys, *argv, "--retry-errors")
    assert status == 0 and "optimal" in out


def test_shape_option_for_dynamic_inputs(files, capsys):
    onnx.save(residual(dims=("N", 8, 8, 8)), files / "dyn.onnx")
    status, _, err = run_cli(capsys, "tune", "dyn.onnx", *TUNE)
    one_line_error(status, err, "--shape input=D0,D1,...")
    status, out, _ = run_cli(capsys, "tune", "dyn.onnx", "--shape", "input=1,8,8,8", *TUNE)
    assert status == 0 and "dyn.graphtune.json" in out
    saved = json.loads((files / "dyn.graphtune.json").read_text())
    assert saved["nodes"]["a"]["workload"]["data"] == [1, 8, 8, 8]
    status, out, err = run_cli(capsys, "compile", "dyn.onnx", "dyn.graphtune.json", "--shape",
                           "input=1,8,8,8", "-o", "dyn.so")
    assert status == 0 and (files / "dyn.so").exists(), err


@pytest.mark.parametrize("started", [0, 1])
def test_peer_process_leaves_quietly_when_the_parent_goes_away(started):
    """A parent that dies (before or after starting the peer) must not leave a traceback."""
    script = textwrap.dedent(f"""
        import os
        import numpy as np
        from reliability_models import residual
        from graphtune.peers import PeerProcess
        from graphtune.procs import Child
        if {started}:
            feeds = {{"input": np.zeros((1, 8, 8, 8), "float32")}}
            assert PeerProcess("ort", residual(), 1, feeds).outputs[0].shape == (1, 16, 8, 8)
        else:
            Child()._start()
        os._exit(3)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stderr


def test_peer_process_loads_no_tvm_and_reports_a_failed_start():
    feeds = {"input": np.zeros((1, 8, 8, 8), "float32")}
    loaded = "[m in __import__('sys').modules for m in ('tvm', 'onnxruntime')]"
    with PeerProcess("ort", residual(), 1, feeds) as process:
        assert process._child.call(eval, (loaded,), timeout=60) == [False, True]
        assert process.timed(settle=1) > 0
    with pytest.raises(ModelError, match="peer 'ort' failed to start: .*input"):
        PeerProcess("ort", residual(), 1, {"wrong": feeds["input"]})
