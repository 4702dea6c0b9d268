"""Damaged and hostile inputs at the edges: one clear line (exit 2) or one warning, never an
internal error (exit 3). One test per case of the issue; the fuzz runs over these shapes are in
test_reliability_fuzz.py."""

import errno
import json
import os
import shutil
import warnings

import onnx
import pytest

import graphtune
from graphtune import safejson
from graphtune.config import Config
from graphtune.errors import ConfigError, MeasureError
from graphtune.measure import Records, Task
from graphtune.opgroups import probe_index
from graphtune.opgroups.probe_index import ProbeIndex
from graphtune.ops import Op
from reliability_models import one_line_error, residual, run_cli

FAST = {"max_candidates": 2, "min_repeat_ms": 1, "repeat": 1, "progress": False}
TUNE = ["--max-candidates", "2", "-q"]
BIDI = "\u202e"




@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """The tiny model, the records and probe index of one quick tune of it, and its config."""
    folder = tmp_path_factory.mktemp("edges")
    model = residual()
    onnx.save(model, folder / "tiny.onnx")
    result = graphtune.tune(model, records=folder / "tiny.records.jsonl", **FAST)
    result.config.save(folder / "tiny.graphtune.json")
    return folder


@pytest.fixture
def files(tuned, tmp_path, monkeypatch):
    """A working folder with copies of ``tuned``'s files (a re-tune measures nothing)."""
    for name in os.listdir(tuned):
        shutil.copy(tuned / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _warnings(caught, fragment):
    return [str(w.message) for w in caught if fragment in str(w.message)]


# ------------------------------------------------------------ 1. records line of deep brackets
def test_a_records_line_of_5_million_brackets_is_one_warning_and_tune_goes_on(files, capsys):
    records = files / "tiny.records.jsonl"
    lines = records.read_text().splitlines()
    lines.insert(1, "[" * 5_000_000 + "]" * 5_000_000)
    records.write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status, out, err = run_cli(capsys, "tune", "tiny.onnx", "--records", records,
                               "-o", "t.graphtune.json", *TUNE)
    assert status == 0, err
    assert "optimal" in out
    [message] = _warnings(caught, "skipping unreadable line")
    assert message.startswith(f"{records}: skipping unreadable line 2 (JSONLimitError: nested "
                              "more than 64 levels deep)")
    assert records.read_text().splitlines()[1] == lines[1]  # skipped, never deleted


# ------------------------------------------------------------ 2. config fields and sizes
def _config_text(files, edit):
    data = json.loads((files / "tiny.graphtune.json").read_text())
    return edit(data)


def _solution_fast(data):
    data["solution"]["predicted_ms"] = "fast"
    return json.dumps(data, indent=1)


def _deep(data):
    return json.dumps(data).replace('"knobs": {', '"knobs": {"x": ' + "[" * 200_000 +
                                    "]" * 200_000 + ", ", 1)


def _long_int(data):
    return json.dumps(data, indent=1).replace('"reg_n": ', '"reg_n": ' + "9" * 5_000 + ", \"r\": ", 1)


def _long_layout(data):
    data["nodes"]["a"]["in_layout"] = "NCHW" + "8" * 50_000_000 + "c"
    return json.dumps(data)


def _huge_cost(data):
    for node in data["nodes"].values():
        node["cost_ms"] = 1e308
    return json.dumps(data, indent=1)


CONFIGS = {
    "solution_fast": (_solution_fast, ["solution.predicted_ms", "'fast'"]),
    "nested_200000": (_deep, ["nested more than 64 levels deep"]),
    "int_5000_digits": (_long_int, ["line ", "a number with 5,000 digits"]),
    "layout_50M_chars": (_long_layout, ["more than 32 MiB"]),
    "cost_1e308": (_huge_cost, [".cost_ms", "1e+308"]),
}


@pytest.mark.parametrize("case", list(CONFIGS))
@pytest.mark.parametrize("command", ["show", "compile"])
def test_hostile_configs_are_one_config_error_naming_file_and_field(files, capsys, case, command):
    edit, fragments = CONFIGS[case]
    (files / "bad.graphtune.json").write_text(_config_text(files, edit))
    argv = {"show": ["show", "bad.graphtune.json"],
            "compile": ["compile", "tiny.onnx", "bad.graphtune.json", "-o", "x.so"]}[command]
    status, out, err = run_cli(capsys, *argv)
    one_line_error(status, err, "bad.graphtune.json: ", *fragments)
    assert out == "" and not (files / "x.so").exists()


@pytest.mark.parametrize("argv", [
    ["profile", "tiny.onnx", "--config", "bad.graphtune.json", "--no-ort", "--repeat", "1"],
    ["bench", "tiny.onnx", "--config", "bad.graphtune.json", "--repeat", "1"],
])
def test_profile_and_bench_refuse_a_mistyped_solution(files, capsys, argv):
    (files / "bad.graphtune.json").write_text(_config_text(files, _solution_fast))
    status, _, err = run_cli(capsys, *argv)
    one_line_error(status, err, "bad.graphtune.json: solution.predicted_ms")


@pytest.mark.parametrize("field, value, fragment", [
    ("kernel_ms", None, "solution.kernel_ms: missing"),  # show prints it with predicted_ms
    ("optimal", "yes", "solution.optimal: expected true or false"),
    ("op_groups", [["a", "NCHW16c", "add", "1"]], "solution.op_groups.0: expected [node"),
    ("transform_ms", float("inf"), "solution.transform_ms"),
    ("method", ["dp"], "solution.method: expected a string"),
])
def test_every_solution_field_show_uses_is_type_checked(files, field, value, fragment):
    data = json.loads((files / "tiny.graphtune.json").read_text())
    if value is None:
        del data["solution"][field]
    else:
        data["solution"][field] = value
    with pytest.raises(ConfigError, match="^" + fragment.replace("[", r"\[").replace(".", r"\.")):
        Config.from_dict(data)


def test_node_fields_are_bounded_before_they_are_used(files):
    data = json.loads((files / "tiny.graphtune.json").read_text())
    node = data["nodes"]["a"]
    for key, value, fragment in [
        ("in_layout", "NCHW" + "8" * 10_000 + "c", "nodes.a.in_layout: a layout name of 10,005 "
                                                    "characters"),
        ("knobs", {**node["knobs"], "reg_n": 10**30}, "nodes.a.knobs.reg_n: expected a number"),
        ("knobs", {**node["knobs"], "reg_n": [[2]]}, "nodes.a.knobs.reg_n: expected a number"),
        ("cost_ms", float("nan"), "nodes.a.cost_ms: expected null or a time in ms"),
        ("cost_ms", -1, "nodes.a.cost_ms"),
    ]:
        bad = json.loads(json.dumps(data))
        bad["nodes"]["a"][key] = value
        with pytest.raises(ConfigError) as err:
            Config.from_dict(bad)
        assert str(err.value).startswith(fragment), err.value


def test_a_deep_python_config_is_refused_without_recursion():
    data = {"format": "graphtune.config", "version": 1, "nodes": {}, "model": {"x": []}}
    inner = data["model"]["x"]
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]
    with pytest.raises(ConfigError, match="^model: nested more than 64 levels deep"):
        Config.from_dict(data)


def test_show_totals_match_their_parts(files, capsys):
    status, out, _ = run_cli(capsys, "show", "tiny.graphtune.json")
    assert status == 0
    config = Config.load(files / "tiny.graphtune.json")
    total = sum(n.cost_ms or 0.0 for n in config.nodes.values())
    assert f"kernels {total:.4f} ms" in out and len(out.splitlines()[-1]) < 300


# ------------------------------------------------------------ 3. unwritable probe index
def test_an_unusable_probe_index_is_one_warning_and_tune_goes_on(files, capsys):
    index = files / "tiny.probes.jsonl"
    index.unlink()
    index.mkdir()  # neither readable nor writable as a file, root included
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status, out, err = run_cli(capsys, "tune", "tiny.onnx", "-o", "t.graphtune.json", *TUNE)
    assert status == 0, err
    [message] = _warnings(caught, "probe index")
    assert message.startswith("probe index tiny.probes.jsonl cannot be read (not a regular "
                              "file); tuning goes on without it")
    assert index.is_dir() and "optimal" in out


def _groups():
    task = Task(Op.OP_GROUP, {"ops": "add", "args": [[[1, 8], "float32"]], "sha": "1" * 16})
    return [{"node": "a", "layout": "NCHW8c", "label": "add", "task": task, "bare": None}]


def test_a_probe_index_that_cannot_be_written_warns_once_and_keeps_answering(tmp_path,
                                                                              monkeypatch):
    path = tmp_path / "m.probes.jsonl"
    ProbeIndex(path, lambda task: True).add("old", _groups())
    os.chmod(path, 0o444)

    def refuse(file, mode="r", *args, **kwargs):  # what a read-only file does to a non-root user
        if "a" in mode or "w" in mode:
            raise PermissionError(errno.EPERM, "Operation not permitted", str(file))
        return open(file, mode, *args, **kwargs)

    monkeypatch.setattr(probe_index, "open", refuse, raising=False)
    index = ProbeIndex(path, lambda task: True)
    with pytest.warns(UserWarning) as caught:
        index.add("k1", _groups())
        index.add("k2", _groups())
    [message] = [str(w.message) for w in caught]
    assert message == (f"probe index {path} cannot be written (Operation not permitted); tuning "
                       "goes on without it (probes it would have spared are compiled); make the "
                       "file writable or delete it")
    assert index.get("k2") == _groups() and index.get("old") == _groups()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_probe_index_on_a_device_is_not_read_forever(tmp_path):
    path = tmp_path / "m.probes.jsonl"
    path.symlink_to("/dev/full")  # reads never end, writes fail
    with pytest.warns(UserWarning, match="cannot be read .not a regular file."):
        index = ProbeIndex(path, lambda task: True)
    index.add("k", _groups())  # no second warning, no error
    assert index.get("k") == _groups()


def test_hostile_probe_index_lines_are_skipped(tmp_path):
    path = tmp_path / "m.probes.jsonl"
    ProbeIndex(path, lambda task: True).add("good", _groups())
    good = path.read_text()
    line = json.loads(good)
    bad_types = [json.dumps({**line, "key": k, "groups": [{**line["groups"][0], field: value}]})
                 for k, (field, value) in enumerate([("layout", 8), ("node", ["a"]),
                                                     ("label", None)])]
    path.write_text("[" * 1_000_000 + "]" * 1_000_000 + "\n" + "9" * 5000 + "\n"
                    + "\n".join(bad_types) + "\n" + good)
    with pytest.warns(UserWarning) as caught:
        index = ProbeIndex(path, lambda task: True)
    assert [str(w.message) for w in caught] == [
        f"probe index {path}: skipping 5 unreadable line(s) (line 1: JSONLimitError: nested more "
        "than 64 levels deep); their probes are compiled again; delete the file to silence this "
        "warning"]
    assert index.get("good") == _groups()
    assert all(index.get(k) is None for k in (0, 1, 2))


# ------------------------------------------------------------ 4. nothing created before a refusal
def test_a_refused_tune_leaves_no_records_file(files, capsys):
    onnx.save(residual(dims=("N", 8, 8, 8)), files / "dyn.onnx")
    for extra in ([], ["--records", "mine.records.jsonl"]):
        status, _, err = run_cli(capsys, "tune", "dyn.onnx", *extra, *TUNE)
        one_line_error(status, err, "--shape input=D0,D1,...")
    assert not any(p.name.startswith(("dyn.", "mine.")) and p.suffix == ".jsonl"
                   for p in files.iterdir()), sorted(os.listdir(files))


# ------------------------------------------------------------ 5. profile --records missing
def test_profile_with_a_missing_records_file_speaks_cli(files, capsys):
    status, _, err = run_cli(capsys, "profile", "tiny.onnx", "--records", "gone.records.jsonl",
                         "--no-ort")
    one_line_error(status, err, "--records gone.records.jsonl: no such file",
                   "graphtune tune")
    assert "measure(" not in err
    with pytest.raises(MeasureError, match="graphtune tune --records PATH") as raised:
        Records.load(files / "gone.records.jsonl")
    assert "measure(" not in str(raised.value)


# ------------------------------------------------------------ 6. names that could mislead a terminal
def test_bidi_names_are_printed_escaped(files, capsys):
    data = json.loads((files / "tiny.graphtune.json").read_text())
    data["nodes"]["a" + BIDI + "evil"] = data["nodes"].pop("a")
    data["model"]["name"] = "tiny\x1b[2J"
    (files / "bidi.graphtune.json").write_text(json.dumps(data))
    status, out, _ = run_cli(capsys, "show", "bidi.graphtune.json")
    assert status == 0
    assert BIDI not in out and "\x1b" not in out
    assert "a\\u202eevil" in out and "model tiny\\x1b[2J" in out
    status, _, err = run_cli(capsys, "compile", "tiny.onnx", "bidi.graphtune.json", "-o", "x.so")
    one_line_error(status, err, "nodes.a\\u202eevil")
    assert BIDI not in err
    data["nodes"]["a" + BIDI + "evil"]["cost_ms"] = "slow"
    with pytest.raises(ConfigError, match=r"^nodes\.a\\u202eevil\.cost_ms"):
        Config.from_dict(data)


def test_records_warnings_escape_what_they_quote(tmp_path):
    path = tmp_path / f"a{BIDI}.records.jsonl"
    path.write_text("{not json\n")
    with pytest.warns(UserWarning) as caught:
        Records(path)
    [message] = [str(w.message) for w in caught]
    assert BIDI not in message and "a\\u202e.records.jsonl: skipping unreadable line 1" in message


def test_printable_escapes_what_could_mislead_a_terminal():
    assert safejson.printable("layer1.0.conv1 (é, 卷积)") == "layer1.0.conv1 (é, 卷积)"
    for char in ["\u202a", "\u202e", "\u2066", "\u2069", "\u200f", "\x1b", "\x00", "\x7f",
                 "\x9b", "\n", "\ud800"]:
        assert char not in safejson.printable(f"a{char}b")
