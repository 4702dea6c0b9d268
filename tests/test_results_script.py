"""benchmarks/results.py: e2e JSON reports -> RESULTS.md, the newest run per CPU and precision, marked
generated."""

import json
import subprocess
import sys

import pytest

import results

pytestmark = pytest.mark.unit

ROW = {"model": "resnet18", "latency_ms": {"ort": 17.3, "gt-uniform": 18.1, "gt-graph": 10.15},
       "predicted_ms": 9.48, "speedup_vs_ort": 17.3 / 10.15, "prediction_error": 0.066,
       "tune_s": 114.2, "reference": "ort", "max_abs_diff": {"ort": 0.0, "gt-graph": 4.8e-6},
       "rounds_shared": 26, "speedup_vs_ort_shared": 1.7}


def report(cpu, time, rows, command=None, mcpu="znver4"):
    return {"benchmark": "e2e", "target": {"kind": "llvm", "mcpu": mcpu, "threads": 2}, "cpu": cpu,
            "threads": "2", "tvm": "0.27.0", "time": time, "repeat": 30, "max_candidates": 32,
            "loadavg": [1.2, 1.0, 0.9], "results": rows, "suite": False, "command": command,
            "summary": {"models": len(rows)}}


def test_results_md_has_the_newest_run_per_cpu_its_command_and_a_generated_header(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    old = report("AMD EPYC (family 25 model 17)", "2026-11-25T10:00:00Z",
                 [{**ROW, "latency_ms": {"ort": 99.0, "gt-graph": 98.0}}], "benchmarks/e2e.py --old")
    new = report("AMD EPYC (family 25 model 17)", "2026-11-26T12:58:00Z",
                 [ROW, {"model": "unet", "error": "CompileError: boom"}],
                 "benchmarks/e2e.py --models resnet18,unet --json x.json")
    xeon = report("Intel(R) Xeon(R) Platinum (family 6 model 207)", "2026-11-24T09:00:00Z",
                  [{**ROW, "latency_ms": {"ort": 8.0, "openvino": 7.9, "gt-graph": 8.3}}],
                  mcpu="emeraldrapids")
    for name, content in (("a.json", new), ("b.json", old), ("c.json", xeon)):
        (folder / name).write_text(json.dumps(content))
    (folder / "kernels.json").write_text(json.dumps({"rows": []}))  # another benchmark: skipped
    out = tmp_path / "RESULTS.md"
    done = subprocess.run([sys.executable, results.__file__, str(folder), "-o", str(out)],
                          capture_output=True, text=True, check=True)
    assert "skipping" in done.stderr and "kernels.json" in done.stderr
    text = out.read_text()
    assert text.startswith("# Benchmark results\n")
    assert "do not edit by hand" in text.lower() and "benchmarks/results.py" in text
    sections = text.split("\n## ")[1:]
    assert [s.splitlines()[0] for s in sections] == [
        "AMD EPYC (family 25 model 17), LLVM `znver4`",
        "Intel(R) Xeon(R) Platinum (family 6 model 207), LLVM `emeraldrapids`"]
    amd = sections[0]
    assert "run 2026-11-26 12:58:00 UTC" in amd and "99.00" not in amd  # the newest run only
    assert ".venv/bin/python benchmarks/e2e.py --models resnet18,unet --json x.json" in amd
    lines = amd.splitlines()
    head = lines.index("| model | ORT | gt-uniform | gt-graph | predicted | ORT/gt-graph | prediction error "
                       "| max abs diff | tuning s |")
    assert lines[head + 2] == "| resnet18 | 17.30 | 18.10 | 10.15 | 9.48 | **1.70** | +6.6% | 4.8e-06 | 114 |"
    assert lines[head + 3].startswith("| unet | failed: CompileError: boom")
    assert "(shared)" not in text and "rounds_" not in text  # host-state figures stay in the JSON
    xeon_section = sections[1]
    assert "| OpenVINO-f32 |" in xeon_section
    assert "rebuilt from the report's settings" in xeon_section  # no command recorded
    # --check: up to date now, out of date once a report changes
    check = [sys.executable, results.__file__, str(folder), "-o", str(out), "--check"]
    assert subprocess.run(check, capture_output=True).returncode == 0
    (folder / "d.json").write_text(json.dumps(report("AMD EPYC (family 25 model 17)",
                                                     "2026-11-27T00:00:00Z", [ROW])))
    assert subprocess.run(check, capture_output=True).returncode == 1


def test_runs_per_cpu_puts_the_later_of_two_equal_times_first():
    first = report("X", "2026-01-01T00:00:00Z", [ROW], "first")
    second = report("X", "2026-01-01T00:00:00Z", [ROW], "second")
    assert [[r["command"] for r in group] for group in results.runs_per_cpu([first, second])] == \
        [["second", "first"]]


def test_a_suite_measured_over_several_runs_is_one_table_of_each_models_newest_row():
    cpu = "AMD EPYC (family 25 model 17)"
    old = report(cpu, "2026-11-25T10:00:00Z",
                 [{**ROW, "latency_ms": {"ort": 99.0, "gt-graph": 98.0}, "speedup_vs_ort": 99 / 98},
                  {**ROW, "model": "vgg16", "speedup_vs_ort": 2.0,
                   "latency_ms": {"ort": 40.0, "openvino": 30.0, "gt-graph": 20.0}}],
                 "benchmarks/e2e.py --models resnet18,vgg16")
    new = report(cpu, "2026-11-26T12:58:00Z", [ROW], "benchmarks/e2e.py --models resnet18")
    section = results.render([old, new]).split("\n## ")[1]
    lines = section.splitlines()
    models = [line.split(" | ")[0][2:] for line in lines if line.startswith("| ") and "---" not in line]
    assert models == ["model", "resnet18", "vgg16"] and "99.00" not in section
    assert "resnet18: run 2026-11-26 12:58:00 UTC" in section
    assert "vgg16: run 2026-11-25 10:00:00 UTC" in section
    assert section.index("--models resnet18\n") < section.index("--models resnet18,vgg16")
    ratio = (17.3 / 10.15 * 2.0) ** 0.5
    assert f"Geomean ORT/gt-graph over 2 models {ratio:.3f}, minimum {17.3 / 10.15:.3f} (resnet18)" in section


def test_int8_runs_get_their_own_table_with_failed_peers_and_relative_diffs(tmp_path):
    cpu = "AMD EPYC (family 25 model 17)"
    int8_row = {"model": "densenet121-int8", "precision": "int8", "peers": ["ort-int8", "openvino-int8"],
                "peer_errors": {"openvino-int8": "peer 'openvino-int8' failed to start: worker crashed"},
                "latency_ms": {"ort-int8": 20.0, "gt-uniform": 18.0, "gt-graph": 16.0},
                "predicted_ms": 15.0, "speedup_vs_ort": 1.25, "prediction_error": 0.0625, "tune_s": 80.0,
                "reference": "ort-int8", "max_abs_diff": {"gt-graph": 0.05},
                "max_rel_diff": {"gt-graph": 0.01}}
    fp32 = report(cpu, "2026-11-26T12:00:00Z", [ROW], "benchmarks/e2e.py --models resnet18")
    second = {**int8_row, "model": "resnet18-int8", "speedup_vs_ort": 1.1,
              "latency_ms": {"ort-int8": 11.0, "gt-graph": 10.0}}
    int8 = {**report(cpu, "2026-11-27T12:00:00Z", [int8_row, second], "benchmarks/e2e.py --int8"),
            "precision": "int8"}
    text = results.render([fp32, int8])  # the newer int8 run does not hide the fp32 one
    sections = text.split("\n## ")[1:]
    assert [s.splitlines()[0] for s in sections] == [f"{cpu}, LLVM `znver4`",
                                                     f"{cpu}, LLVM `znver4`, int8 (QDQ models)"]
    assert "| resnet18 | 17.30 |" in sections[0] and "int8" not in sections[0]
    lines = sections[1].splitlines()
    head = lines.index("| model | ORT-int8 | OpenVINO-int8 | gt-uniform | gt-graph | predicted "
                       "| ORT-int8/gt-graph | prediction error | max abs diff | max rel diff | tuning s |")
    assert lines[head + 2] == ("| densenet121-int8 | 20.00 | error | 18.00 | 16.00 | 15.00 | **1.25** "
                               "| +6.2% | 5.0e-02 | 1.0e-02 | 80 |")
    assert f"Geomean ORT-int8/gt-graph over 2 models {(1.25 * 1.1) ** 0.5:.3f}" in sections[1]


def test_the_readme_table_is_written_from_the_report_its_marker_names(tmp_path):
    folder = tmp_path / "benchmarks" / "results"
    folder.mkdir(parents=True)
    row_b = {**ROW, "model": "resnet50", "peers": ["ort", "openvino"],
             "latency_ms": {"ort": 40.0, "openvino": 38.0, "gt-uniform": 42.0, "gt-graph": 32.0},
             "prediction_error": -0.031}
    run = report("AMD EPYC (family 25 model 17)", "2026-12-07T20:00:00Z", [{**ROW, "peers": ["ort"]}, row_b],
                 "benchmarks/e2e.py --suite")
    (folder / "a.json").write_text(json.dumps(run))
    readme = tmp_path / "README.md"
    readme.write_text("# tool\n\n## Results\n\n<!-- results-table benchmarks/results/a.json -->\nstale\n"
                      "<!-- results-table end -->\n\n## Tests\n")
    command = [sys.executable, results.__file__, str(folder), "-o", str(tmp_path / "RESULTS.md"),
               "--readme", str(readme)]
    assert subprocess.run(command + ["--check"], capture_output=True).returncode == 1  # "stale"
    subprocess.run(command, capture_output=True, check=True)
    text = readme.read_text()
    assert text.startswith("# tool\n") and text.endswith("<!-- results-table end -->\n\n## Tests\n")
    assert "stale" not in text
    assert ("fp32, batch 1, on **AMD EPYC (family 25 model 17), LLVM `znver4`**, 2026-12-07, 2 threads, "
            "32 kernel candidates per workload, medians of 30 interleaved rounds; ms:") in text
    assert "UTC" not in text and "load average" not in text
    assert ".venv/bin/python benchmarks/e2e.py --suite" in text
    assert "| model | ORT | OpenVINO-f32 | gt-uniform | gt-graph | ORT/gt-graph | OpenVINO-f32/gt-graph " \
           "| prediction error |" in text
    assert "| resnet18 | 17.30 | – | 18.10 | 10.15 | **1.70** | – | +6.6% |" in text
    assert "| resnet50 | 40.00 | 38.00 | 42.00 | 32.00 | **1.25** | **1.19** | -3.1% |" in text
    assert "Geomean ORT/gt-graph over 2 models **1.46**, minimum 1.25 (resnet50)." in text
    assert subprocess.run(command + ["--check"], capture_output=True).returncode == 0


def test_results_md_and_the_readme_table_are_up_to_date():
    # RESULTS.md and the README's table are written by benchmarks/results.py, never by hand
    done = subprocess.run([sys.executable, results.__file__, "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_bf16_run_is_a_table_of_its_own_that_a_later_fp32_run_does_not_hide():
    cpu = "Intel(R) Xeon(R) Processor (family 6 model 167)"
    bf16_row = {**ROW, "latency_ms": {"ort": 17.3, "openvino-bf16": 4.0, "gt-graph": 10.15, "gt-bf16": 5.0}}
    bf16 = report(cpu, "2026-11-25T10:00:00Z", [bf16_row, {**bf16_row, "model": "vgg16"}],
                  "benchmarks/e2e.py --bf16")
    fp32 = report(cpu, "2026-11-26T12:58:00Z", [{**ROW, "latency_ms": {"ort": 17.0, "gt-graph": 9.0}}],
                  "benchmarks/e2e.py --models resnet18")
    sections = results.render([bf16, fp32]).split("\n## ")[1:]
    assert [s.splitlines()[0] for s in sections] == [
        cpu + ", LLVM `znver4`", cpu + ", LLVM `znver4`, fp32 and bfloat16 (`e2e.py --bf16`)"]
    assert "9.00" in sections[0] and "9.00" not in sections[1]
    assert "Geomean OpenVINO-bf16/gt-bf16 over 2 models 0.800, minimum 0.800" in sections[1]
