"""benchmarks/e2e.py: ``--int8`` (quantized models against ORT and OpenVINO on the same QDQ
file) and peers that fail without failing the run."""

import json
import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import e2e  # benchmarks/e2e.py
from graphtune import models, peers
from graphtune.errors import ModelError
from graphtune.report import compare, markdown_table

pytestmark = pytest.mark.unit


def test_calibration_data_is_seeded_and_fits_the_inputs():
    model = models.get("resnet18", image_size=32)
    first, again = e2e.calibration_data(model), e2e.calibration_data(model)
    assert len(first) == e2e.CALIBRATION_INPUTS
    assert all(np.array_equal(a["input"], b["input"]) for a, b in zip(first, again))
    assert not np.array_equal(first[0]["input"], first[1]["input"])
    assert first[0]["input"].shape == (1, 3, 32, 32) and first[0]["input"].dtype == np.float32


def test_calibration_data_refuses_a_dynamic_input_naming_it():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    with pytest.raises(ModelError, match="input 'x' has a dynamic shape"):
        e2e.calibration_data(model)


def test_an_unknown_peer_is_refused_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        e2e.main(["--int8", "--peers", "ort,tensorrt", "--out", str(tmp_path)])
    assert exit_.value.code == 2 and "--peers 'tensorrt' is not one of" in capsys.readouterr().err


class FakePeer:
    """A :class:`graphtune.peers.PeerProcess` stand-in: ``openvino`` fails to start,
    ``openvino-int8`` crashes on its second timed call, the rest time 1 ms."""

    started: list[str] = []

    def __init__(self, name, model, threads, feeds):
        if name == "openvino":
            raise peers.PeerFailure(name, f"peer {name!r} failed to start: boom")
        self.name, self.pid, self.calls = name, None, 0
        self.outputs = [np.ones(3, np.float32)]
        FakePeer.started.append(name)

    def timed(self, settle, settle_ms=0.0):
        self.calls += 1
        if self.name == "openvino-int8" and self.calls == 2:
            raise peers.PeerFailure(self.name, f"peer {self.name!r} failed to run: worker crashed")
        return 1.0

    def close(self):
        pass


def test_a_failing_peer_gets_an_error_cell_and_the_others_their_rounds(monkeypatch):
    monkeypatch.setattr(peers, "PeerProcess", FakePeer)
    monkeypatch.setattr(peers, "available", lambda name: True)
    FakePeer.started = []
    row = compare(models.get("resnet18", image_size=32), {},
                  peers=["openvino", "ort", "openvino-int8"], repeat=4, warmup=0, threads=1,
                  peer_processes=2)
    assert row["peer_errors"].keys() == {"openvino", "openvino-int8"}
    assert "worker crashed" in row["peer_errors"]["openvino-int8"]
    assert row["latency_ms"].keys() == {"ort"} and len(row["samples_ms"]["ort"]) == 4
    assert row["reference"] == "ort" and row["process_ms"].keys() == {"ort"}
    # part 1 started ort and openvino-int8, was timed again with ort alone; part 2 ort alone
    assert FakePeer.started == ["ort", "openvino-int8", "ort", "ort"]
    row["model"] = "m"
    assert markdown_table([row]).splitlines()[::2] == [
        "| model | openvino | ort | openvino-int8 |", "| m | error | 1.00 | error |"]


@pytest.mark.integration
@pytest.mark.skipif(not peers.available("openvino"), reason="needs openvino")
def test_a_peer_that_cannot_load_the_model_is_reported_not_raised():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    node = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml")  # ORT has it, OpenVINO not
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17),
                                             helper.make_opsetid("ai.onnx.ml", 1)])
    row = compare(model, {}, peers=["ort", "openvino"], repeat=2, warmup=0, threads=1)
    assert list(row["peer_errors"]) == ["openvino"]
    assert row["peer_errors"]["openvino"].startswith("peer 'openvino' failed to start:")
    assert list(row["latency_ms"]) == ["ort"]


@pytest.mark.slow  # about 100 s on 2 cores: quantize, tune and time quantized ResNet-18
@pytest.mark.integration
def test_int8_run_times_the_qdq_model_against_ort_on_the_same_file(tmp_path):
    out, report_path = tmp_path / "out", tmp_path / "r.json"
    argv = ["--int8", "--models", "resnet18", "--image-size", "32", "--max-candidates", "2",
            "--repeat", "2", "--peers", "ort", "--peer-processes", "1", "--no-final-check",
            "--out", str(out), "--json", str(report_path)]
    assert e2e.main(argv) == 0
    report = json.loads(report_path.read_text())
    assert report["precision"] == "int8" and report["peers"] == ["ort-int8"]
    (row,) = report["results"]
    assert row["model"] == "resnet18@32-int8" and row["precision"] == "int8"
    assert row["reference"] == "ort-int8" and row["latency_ms"]["ort-int8"] > 0
    assert row["speedup_vs_ort"] == pytest.approx(row["latency_ms"]["ort-int8"]
                                                  / row["latency_ms"]["gt-graph"])
    assert math.isfinite(row["max_abs_diff"]["gt-graph"])
    assert 0 <= row["max_rel_diff"]["gt-graph"] < 0.5  # a few steps of the output scale
    qdq = onnx.load(out / "resnet18@32-int8.onnx")  # the file both sides ran, kept for reruns
    assert any(node.op_type == "QuantizeLinear" for node in qdq.graph.node)


def test_resume_keeps_the_timed_rows_of_the_report(tmp_path, capsys):
    """``--resume`` goes on with the models the report lacks: its timed rows are kept, a failed
    model is timed again, and it needs the report's path."""
    path = tmp_path / "r.json"
    assert e2e.resumed_rows(str(path)) == []
    path.write_text(json.dumps({"benchmark": "e2e", "results": [
        {"model": "resnet18-int8", "latency_ms": {"gt-graph": 3.0}},
        {"model": "resnet50-int8", "error": "ModelError: ..."}]}))
    assert [row["model"] for row in e2e.resumed_rows(str(path))] == ["resnet18-int8"]
    with pytest.raises(SystemExit):
        e2e.main(["--resume", "--out", str(tmp_path)])
    assert "--resume continues the report of --json" in capsys.readouterr().err


def test_resume_times_the_other_models_in_their_int8_form(tmp_path, monkeypatch):
    """A resumed ``--int8`` suite skips the kept model and hands ``tune`` the others' QDQ form
    (the tuning itself is stubbed to fail: the suite records that as the model's error row)."""
    tuned = []

    def tune(model, **_):
        tuned.append(model)
        raise ModelError("stop here")

    monkeypatch.setattr(e2e.graphtune, "tune", tune)
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"benchmark": "e2e", "results": [
        {"model": "resnet18@32-int8", "latency_ms": {"gt-graph": 1.0}}]}))
    argv = ["--int8", "--suite", "--resume", "--models", "resnet18,mobilenet_v2", "--image-size", "32",
            "--out", str(tmp_path / "out"), "--json", str(path)]
    assert e2e.main(argv) == 0
    (model,) = tuned
    assert any(node.op_type == "QuantizeLinear" for node in model.graph.node)
    report = json.loads(path.read_text())
    assert [row["model"] for row in report["results"]] == ["resnet18@32-int8", "mobilenet_v2@32-int8"]
    assert "stop here" in report["results"][1]["error"]
