"""The graphtune command line: tune/show/solve/compile round trip and one-line errors."""

import json
import shutil

import pytest

from graphtune.cli import main

pytestmark = pytest.mark.unit

TINY = ["--image-size", "32", "--max-candidates", "2"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, resnet18_records):
    """A folder whose records already hold resnet18@32's measurements (taken quickly)."""
    folder = tmp_path_factory.mktemp("cli")
    shutil.copyfile(resnet18_records, folder / "r18.records.jsonl")
    return folder


@pytest.fixture(scope="module")
def config(workdir):
    """The config ``graphtune tune --no-final-check`` writes for resnet18@32 from the workdir's
    records: the solver's (the final check could keep uniform's, which has no prediction)."""
    path = workdir / "r18.graphtune.json"
    assert main(["tune", "resnet18", *TINY, "--records", str(workdir / "r18.records.jsonl"),
                 "-o", str(path), "-q", "--no-final-check"]) == 0
    return path


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.integration
def test_tune_show_solve_round_trip(workdir, capsys):
    config, graph = workdir / "r18.graphtune.json", workdir / "r18.graph.json"
    status, out, _ = run(capsys, "tune", "resnet18", *TINY, "--records",
                         workdir / "r18.records.jsonl", "-o", config, "--graph", graph, "-q",
                         "--no-final-check")
    assert status == 0 and "optimal" in out and str(config) in out and "final check" not in out
    saved = json.loads(config.read_text())
    assert saved["format"] == "graphtune.config" and "layer1.0.conv1" in saved["nodes"]

    status, out, _ = run(capsys, "show", config)
    assert status == 0
    assert "layer1.0.conv1" in out and "predicted" in out and "proven optimal" in out

    status, out, _ = run(capsys, "solve", graph, "--method", "dp")
    assert status == 0 and "proven optimal" in out
    # solve prints the objective (each edge its transform); the prediction counts shared ones once
    assert f"energy {saved['solution']['objective_ms']:.4f}" in out


@pytest.mark.integration
def test_tune_prints_the_final_check_and_saves_its_choice(workdir, capsys, monkeypatch):
    monkeypatch.setenv("GRAPHTUNE_FINAL_CHECK", "1")  # the default outside the test suite
    path = workdir / "r18.checked.graphtune.json"
    status, out, _ = run(capsys, "tune", "resnet18", *TINY, "--records",
                         workdir / "r18.records.jsonl", "-o", path, "-q")
    assert status == 0
    [line] = [line for line in out.splitlines() if line.startswith("final check (10 rounds")]
    chosen = json.loads(path.read_text())["solution"]["final_check"]["chosen"]
    assert chosen in ("solver", "uniform", "kernel-best") and f"kept {chosen}: " in line
    assert ("note: the config is" in out) == (chosen != "solver")


def test_solve_says_when_the_energy_rests_on_unmeasured_transforms(tmp_path, capsys):
    from graphtune.graph import LayoutGraph

    g = LayoutGraph()
    g.add_node("a", costs=[1.0, 2.0])
    g.add_node("b", costs=[1.0, 2.0])
    g.add_edge("a", "b")
    g.set_edge_cost("a", "b", [[0.0, 0.0], [0.0, 0.0]], bound=[[True, False], [False, False]])
    path = tmp_path / "g.json"
    path.write_text(g.to_json())
    status, out, _ = run(capsys, "solve", path, "--method", "brute")
    assert status == 0 and "energy 2.0000" in out
    assert "1 edge(s)" in out and "a -> b" in out and "--transforms all" in out


def test_tune_rejects_an_unknown_transforms_mode_before_any_work(capsys):
    status, _, err = run(capsys, "tune", "resnet18", "--transforms", "some", "-q")
    assert status == 2 and err.count("\n") == 1 and "lazy" in err and "all" in err


@pytest.mark.integration
def test_compile_writes_a_loadable_library(workdir, config, capsys):
    import tvm

    lib = workdir / "r18.so"
    status, out, _ = run(capsys, "compile", "resnet18", config, "--image-size", "32", "-o", lib)
    assert status == 0 and lib.exists()
    assert tvm.runtime.load_module(str(lib)) is not None
    assert "schedules: " in out and " kernel" in out and "generic" not in out


@pytest.mark.integration
def test_errors_are_one_line_and_say_what_to_do(workdir, capsys):
    status, _, err = run(capsys, "tune", "resnet-18", "-q")
    assert status == 2 and err.count("\n") == 1
    assert "valid names:" in err and "resnet18" in err

    status, _, err = run(capsys, "show", workdir / "missing.json")
    assert status == 2 and err.count("\n") == 1 and "missing.json" in err

    bad = workdir / "bad.json"
    bad.write_text('{"format": "graphtune.config", "version": 1, "nodes": {"a": {"op": 3}}}')
    status, _, err = run(capsys, "show", bad)
    assert status == 2 and "nodes.a" in err


@pytest.mark.integration
def test_config_for_another_model_names_the_node(workdir, config, capsys):
    status, _, err = run(capsys, "compile", "resnet50", config, "--image-size", "32",
                         "-o", workdir / "x.so")
    assert status == 2 and err.startswith("graphtune: error: nodes.")


def test_rpc_flags_go_together(capsys):
    status, _, err = run(capsys, "tune", "resnet18", "--rpc-tracker", "127.0.0.1:9190", "-q")
    assert status == 2 and "--rpc-key" in err and err.count("\n") == 1


def test_unreachable_tracker_is_one_clear_line(tmp_path, capsys):
    status, _, err = run(capsys, "tune", "resnet18", *TINY, "--rpc-tracker", "127.0.0.1:1",
                         "--rpc-key", "x86", "--records", tmp_path / "r.jsonl", "-q")
    assert status == 2 and err.count("\n") == 1
    assert "127.0.0.1:1" in err and "x86" in err


@pytest.mark.integration
def test_bench_times_uniform_and_config_against_ort(workdir, config, capsys):
    out_json = workdir / "bench.json"
    status, out, _ = run(capsys, "bench", "resnet18", "--image-size", "32", "--config", config,
                         "--vs", "ort", "--repeat", "3", "--json", out_json)
    assert status == 0 and "| resnet18 |" in out
    row = json.loads(out_json.read_text())
    assert set(row["latency_ms"]) == {"ort", "gt-uniform", "gt-config"}
    assert all(v > 0 for v in row["latency_ms"].values())
    assert max(d for k, d in row["max_abs_diff"].items()) < 1e-4
    assert row["reference"] == "ort"
