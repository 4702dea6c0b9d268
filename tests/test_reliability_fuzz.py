"""Issue 13 fuzz: any config file or records file gives a clear graphtune error, or a model
that computes what ONNX Runtime computes — never a traceback, never wrong output."""

import json
import math
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_models import assert_matches_ort, residual

import graphtune
from graphtune.config import Config
from graphtune.errors import GraphtuneError

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
)


def _edit_lines(lines, edit):
    kind, index, value = edit
    lines = list(lines)
    index %= len(lines)
    if kind == "garbage":
        lines.insert(index, value.replace("\n", " "))
    elif kind == "duplicate":
        lines.append(lines[index])
    else:
        try:
            record = json.loads(lines[index])
        except ValueError:
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
