"""Issue 13 fuzz: any config file or records file gives a clear graphtune error, or a model
that computes what ONNX Runtime computes — never a traceback, never wrong output.

The hostile shapes (``_hostile``: nesting depth, numbers of thousands of digits, huge and
non-finite floats, huge strings, terminal controls) go into configs, records files, probe
indexes and layout graph documents; every run through the command line ends in exit status 0
or 2 (one line), never 3."""

import contextlib
import io
import json
import math
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import graphtune
from compile_check import assert_matches_ort
from graphtune import safejson
from graphtune.config import Config
from graphtune.errors import GraphtuneError
from reliability_models import residual

FAST = {"max_candidates": 2, "min_repeat_ms": 1, "repeat": 1, "progress": False}
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

MODEL = residual()

_value = st.one_of(
    st.sampled_from(["NCHW", "NCHW4c", "NCHW7c", "NCHW8c", "NCHW16c", "NCHW32c", "NC", "conv2d",
                     "join", "dense", "float32", "a", "b", "sum"]),
    st.integers(-2, 40), st.booleans(), st.none(), st.floats(allow_nan=True),
    st.lists(st.integers(0, 20), max_size=4), st.text(max_size=4),
    st.dictionaries(st.sampled_from(["ic_bn", "oc_bn", "reg_n", "unroll_kw", "inputs"]),
                    st.integers(0, 32), max_size=3),
)


_hostile = st.one_of(
    st.integers(65, 2_000).map(lambda n: "[" * n + "]" * n),  # nesting depth
    st.integers(1, 4).map(lambda k: "[" * (k * 100_000) + "]" * (k * 100_000)),
    st.integers(1, 3).map(lambda k: '{"a": ' * (k * 30_000) + "1" + "}" * (k * 30_000)),
    st.integers(41, 6_000).map(lambda n: "9" * n),  # huge integers (int() refuses > 4300 digits)
    st.integers(41, 500).map(lambda n: "-0." + "3" * n),
    st.sampled_from(["1e308", "-1e308", "1e999", "-1e999", "NaN", "Infinity", "-Infinity",
                     "1.7976931348623157e308", "9" * 40, "-" + "9" * 40, "5e-324", "1e-400"]),
    st.integers(33, 200_000).map(lambda n: json.dumps("NCHW" + "8" * n + "c")),  # huge strings
    st.integers(1, 100_000).map(lambda n: json.dumps("x" * n)),
    st.sampled_from(['"a\\u202eb"', '"\\u2066x"', '"\\u0000"', '"\\ud800"', '"\\u001b[2J"',
                     '""', "[]", "{}", "true", "null"]),
)
"""Raw JSON texts of hostile values (the 50-million-character string: one explicit test in
test_reliability_edges.py)."""

HOSTILE = "\u0001hostile\u0001"


def _with_raw(data, path, raw):
    """``data`` as JSON text, the value at ``path`` replaced by the raw JSON text ``raw``."""
    return json.dumps(_mutate(data, path, HOSTILE, False)).replace(json.dumps(HOSTILE), raw, 1)


def _cli(*argv):
    """``graphtune ARGV`` in this process: (exit status, stdout, stderr)."""
    from graphtune import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = cli.main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def _clear(status, err, *fragments):
    """Exit status 0, or 2 with one line naming ``fragments``: never an internal error (3)."""
    assert status in (0, 2), err
    event(f"exit status {status}")
    if status == 2:
        assert err.startswith("graphtune: error: ") and err.count("\n") == 1, err
        assert all(f in err for f in fragments), err
    assert "\u202e" not in err and "\x1b" not in err


def _base_config() -> dict:
    data = Config.uniform(MODEL).to_dict()
    data["nodes"]["sum"] = {"op": "join", "workload": {"inputs": ["a", "b"]},
                            "in_layout": "NCHW16c", "out_layout": "NCHW16c", "knobs": {}}
    return data


def _paths(data, prefix=()):
    """Every path to a value inside ``data``."""
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, prefix + (index,))


BASE = _base_config()
PATHS = [p for p in _paths(BASE) if p]


def _mutate(data, path, value, delete):
    data = json.loads(json.dumps(data))
    holder = data
    for key in path[:-1]:
        holder = holder[key]
    if delete and isinstance(holder, dict):
        del holder[path[-1]]
    else:
        holder[path[-1]] = value
    return data


def _compile_or_clear_error(load):
    """Load and compile; a GraphtuneError is fine, success must match ONNX Runtime."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compiled = graphtune.compile(MODEL, load())
        except GraphtuneError as err:
            assert str(err) and "\n" not in str(err).strip()
            return "refused"
    assert_matches_ort(MODEL, compiled)
    return "compiled"


@SETTINGS
@given(mutations=st.lists(st.tuples(st.sampled_from(PATHS), _value, st.booleans()),
                          min_size=1, max_size=3),
       cut=st.one_of(st.none(), st.integers(0, 2000)))
def test_fuzz_config_files(mutations, cut):
    data = BASE
    for path, value, delete in mutations:
        try:
            data = _mutate(data, path, value, delete)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed the path
    text = json.dumps(data)
    if cut is not None:
        text = text[:cut]
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "fuzz.graphtune.json"
        file.write_text(text)
        _compile_or_clear_error(lambda: Config.load(file))


_B8, _B16 = st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4, 8, 16])


@SETTINGS
@given(a=st.tuples(_B8, _B16, st.integers(1, 9), st.booleans()),
       b=st.tuples(_B16, _B16, st.integers(1, 9), st.booleans()),
       join=st.sampled_from(["NCHW", "NCHW1c", "NCHW2c", "NCHW4c", "NCHW7c", "NCHW8c",
                             "NCHW16c", "NCHW32c"]))
def test_fuzz_coherent_configs(a, b, join):
    """Knobs and layouts that agree with each other: compiled and right, or refused clearly."""
    from graphtune import x86

    data = json.loads(json.dumps(BASE))
    for name, (ic_bn, oc_bn, reg_n, unroll_kw) in {"a": a, "b": b}.items():
        node = data["nodes"][name]
        node["knobs"] = {"ic_bn": ic_bn, "oc_bn": oc_bn, "reg_n": reg_n, "unroll_kw": unroll_kw}
        try:
            node["in_layout"], node["out_layout"] = x86.layouts_of(node["workload"], node["knobs"])
        except GraphtuneError:
            pass  # invalid knobs (reg_n too large...): compile must refuse them
    data["nodes"]["sum"].update(in_layout=join, out_layout=join)
    _compile_or_clear_error(lambda: Config.from_dict(data))


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """The records lines of one quick tune of the tiny model."""
    path = tmp_path_factory.mktemp("fuzz") / "base.records.jsonl"
    graphtune.tune(MODEL, records=path, **FAST)
    return path.read_text().splitlines()


_median = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(0),
                    st.text(max_size=3), st.none(), st.booleans(), st.integers(-5, 5))
_edit = st.one_of(
    st.tuples(st.just("median"), st.integers(0, 100), _median),
    st.tuples(st.just("ms"), st.integers(0, 100), st.lists(_median, max_size=3)),
    st.tuples(st.just("error"), st.integers(0, 100), st.one_of(st.none(), st.text(max_size=5))),
    st.tuples(st.just("garbage"), st.integers(0, 100), st.text(max_size=20)),
    st.tuples(st.just("duplicate"), st.integers(0, 100), st.none()),
    st.tuples(st.just("hostile"), st.integers(0, 100), _hostile),
)


def _edit_lines(lines, edit):
    kind, index, value = edit
    lines = list(lines)
    index %= len(lines)
    if kind in ("garbage", "hostile"):
        lines.insert(index, value.replace("\n", " "))
    elif kind == "duplicate":
        lines.append(lines[index])
    else:
        try:
            record = json.loads(lines[index])
        except ValueError:
            return lines
        if not isinstance(record, dict):  # a garbage or hostile line an earlier edit inserted
            return lines
        record[{"median": "median_ms"}.get(kind, kind)] = value
        lines[index] = json.dumps(record)
    return lines


@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(edits=st.lists(_edit, min_size=1, max_size=4), torn=st.integers(0, 40))
def test_fuzz_records_files(measured, edits, torn):
    lines = measured
    for edit in edits:
        lines = _edit_lines(lines, edit)
    text = "\n".join(lines) + "\n"
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "fuzz.records.jsonl"
        file.write_text(text[:len(text) - torn])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result = graphtune.tune(MODEL, records=file, **FAST)
            except GraphtuneError as err:
                assert "\n" not in str(err).strip()
                return
        assert math.isfinite(result.predicted_ms) and result.predicted_ms > 0
        assert all(c.cost > 0 for n in result.graph.nodes for c in result.graph.candidates(n)
                   if result.graph.op(n) != "join" and result.graph.op(n) != "boundary")
        assert _compile_or_clear_error(lambda: result.config) == "compiled"


# ------------------------------------------------------------ hostile shapes, every reader
HOSTILE_SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                            suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    import onnx

    path = tmp_path_factory.mktemp("hostile") / "tiny.onnx"
    onnx.save(MODEL, path)
    return path


_CONFIG_PATHS = [p for p in PATHS if not (p[:2] == ("target", "mattr") and p[-1] != 0)] + [
    ("solution", "extra"), ("nodes", "a", "knobs", "extra"), ("nodes", "a\u202e"),
    ("model", "extra"), ("nodes", "a", "workload", "extra")]


@HOSTILE_SETTINGS
@given(path=st.sampled_from(_CONFIG_PATHS), raw=_hostile)
def test_fuzz_hostile_config_files(model_file, path, raw):
    """show, then compile if show took it: exit 0 or one line with exit 2, never 3."""
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "fuzz.graphtune.json"
        file.write_text(_with_raw(BASE, path, raw))
        status, out, err = _cli("show", file)
        _clear(status, err, str(file))
        assert "\u202e" not in out and "\x1b" not in out  # names are printed escaped
        if status == 0:
            status, _, err = _cli("compile", model_file, file, "-o", Path(folder) / "m.so")
            _clear(status, err)


def _records_lines():
    from graphtune.measure import Record, Task

    target = {"kind": "llvm", "mcpu": "znver5", "num-cores": 2, "vector_bits": 512, "threads": 2}
    return [Record.success(Task("transform", {"shape": [1, c, 4, 4], "src": "NCHW",
                                              "dst": "NCHW8c", "dtype": "float32"}),
                           target, [0.5], threads=2).to_json() for c in (1, 2, 3, 4)]


RECORD_LINES = _records_lines()
_RECORD_FIELDS = [p for p in _paths(json.loads(RECORD_LINES[0])) if p]


@HOSTILE_SETTINGS
@given(where=st.one_of(st.none(), st.sampled_from(_RECORD_FIELDS)), at=st.integers(0, 3),
       raw=_hostile)
def test_fuzz_hostile_records_lines(where, at, raw):
    """A hostile line (or field) is one warning naming file and line; the others are read."""
    from graphtune.measure import Records

    lines = list(RECORD_LINES)
    if where is None:
        lines.insert(at, raw)
    else:
        lines[at] = _with_raw(json.loads(lines[at]), where, raw)
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "fuzz.records.jsonl"
        file.write_text("\n".join(lines) + "\n")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            records = Records.load(file)
        messages = [str(w.message) for w in caught]
        assert len(messages) <= 1 and all(
            m.startswith(f"{file}: skipping unreadable line {at + 1} (") for m in messages)
        # every record the reader keeps passed its validity rule (a real, bounded time)
        assert len(records) >= 3
        assert all(r.ok and safejson.bounded_ms(r.median_ms, zero=False) for r in records)
        assert all("\u202e" not in m and "\x1b" not in m for m in messages)


def _probe_line():
    from graphtune.measure import Task
    from graphtune.opgroups.probe_index import ProbeIndex
    from graphtune.ops import Op

    task = Task(Op.OP_GROUP, {"ops": "add", "args": [[[1, 8], "float32"]], "sha": "1" * 16})
    groups = [{"node": "a", "layout": "NCHW8c", "label": "add", "task": task, "bare": None},
              {"node": None, "layout": "NCHW", "label": "relu", "task": task, "bare": task}]
    with tempfile.TemporaryDirectory() as folder:
        index = ProbeIndex(Path(folder) / "m.probes.jsonl", lambda task: True)
        index.add("good", groups)
        return groups, (Path(folder) / "m.probes.jsonl").read_text().strip()


PROBE_GROUPS, PROBE_LINE = _probe_line()
_PROBE_FIELDS = [p for p in _paths(json.loads(PROBE_LINE)) if p]


@HOSTILE_SETTINGS
@given(where=st.one_of(st.none(), st.sampled_from(_PROBE_FIELDS)), raw=_hostile,
       torn=st.booleans())
def test_fuzz_hostile_probe_index_lines(where, raw, torn):
    """The probe index is a cache: a hostile line is skipped (its probe compiled again)."""
    from graphtune.measure import Task
    from graphtune.opgroups.probe_index import ProbeIndex

    data = json.loads(PROBE_LINE)
    data["key"] = "bad"
    bad = raw if where is None else _with_raw(data, where, raw)
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "m.probes.jsonl"
        file.write_text(bad.replace("\n", " ") + "\n" + PROBE_LINE + "\n" + (bad[:50] if torn else ""))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            index = ProbeIndex(file, lambda task: True)
            assert index.get("good") == PROBE_GROUPS
            for group in index.get("bad") or []:
                assert isinstance(group["layout"], str) and isinstance(group["label"], str)
                assert isinstance(group["task"], Task) and isinstance(group["node"], (str, type(None)))
            index.add("new", PROBE_GROUPS)
        messages = [str(w.message) for w in caught]  # at most one, naming the file and a line
        assert len(messages) <= 1 and all(
            m.startswith(f"probe index {file}: skipping ") and "unreadable line(s) (line " in m
            and "\u202e" not in m for m in messages), messages
        assert ProbeIndex(file, lambda task: True).get("new") == PROBE_GROUPS


def _graph_document():
    from graphtune.graph import LayoutGraph

    graph = LayoutGraph()
    graph.add_node("in", op="boundary", costs=[0.0], layouts=["NCHW"])
    graph.add_node("a", costs=[1.0, 2.0], layouts=["NCHW", "NCHW8c"])
    graph.add_node("b", costs=[3.0, 1.0], layouts=["NCHW", "NCHW8c"])
    graph.add_edge("in", "a", cost=[[0.0, 0.5]], shape=[1, 8, 4, 4])
    graph.add_edge("a", "b", cost=[[0.0, 5.0], [5.0, 0.0]], shape=[1, 8, 4, 4])
    return json.loads(graph.to_json())


GRAPH = _graph_document()
_GRAPH_PATHS = [p for p in _paths(GRAPH) if p] + [("edges", 1, "bound")]


@HOSTILE_SETTINGS
@given(where=st.sampled_from(_GRAPH_PATHS),
       raw=st.one_of(_hostile, _value.map(json.dumps), st.just("[[0, 1], [1, 7]]")))
def test_fuzz_hostile_graph_documents(where, raw):
    """graphtune solve of a damaged layout graph: solved, or one line with exit 2."""
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / "g.json"
        file.write_text(_with_raw(GRAPH, where, raw))
        status, out, err = _cli("solve", file, "-v")
        _clear(status, err)
        assert "\u202e" not in out and "\x1b" not in out  # names are printed escaped
