"""Issue 13: options are checked before any work, and every bad input gets a clear error."""

import json
import socket
import time
import warnings

import pytest

import graphtune
from compile_check import assert_matches_ort
from graphtune.config import Config
from graphtune.errors import ArgumentError, ConfigError, MeasureError, ModelError
from graphtune.measure import RPCRunner
from graphtune.measure.rpc import _parse_address
from graphtune.pipeline import extract
from reliability_models import all_failed_records, conv_nd, residual

FAST = {"max_candidates": 2, "min_repeat_ms": 1, "repeat": 1, "progress": False}


# ------------------------------------------------------------ options before work
@pytest.mark.parametrize("option, message", [
    ({"solver": "bogus"}, "solver 'bogus' is not one of: auto, brute, cpsat, dp, lp, pbqp"),
    ({"repeat": 0}, "repeat must be a positive integer, got 0"),
    ({"max_candidates": -1}, "max_candidates must be a positive integer"),
    ({"time_limit": 0}, "time_limit must be a positive number"),
])
def test_bad_tune_options_fail_before_any_work(tmp_path, option, message):
    records = tmp_path / "r.records.jsonl"
    start = time.perf_counter()
    with pytest.raises(ArgumentError, match=message):
        graphtune.tune(residual(), records=records, **{**FAST, **option})
    assert time.perf_counter() - start < 2 and not records.exists()  # nothing measured


def test_unwritable_records_path_fails_before_measuring():
    with pytest.raises(MeasureError, match="cannot be opened for writing"):
        graphtune.tune(residual(), records="/proc/r.records.jsonl", **FAST)


# ------------------------------------------------------------ errors are not forever
def test_failed_measurements_say_how_to_retry_and_retry_errors_does(tmp_path):
    path = tmp_path / "r.records.jsonl"
    model = residual()
    all_failed_records(path, model)
    with pytest.raises(MeasureError) as err:
        graphtune.tune(model, records=path, **FAST)
    text = str(err.value)
    assert "node 'a': all 2 candidates failed" in text and "timed out" in text
    assert "retry_errors=True" in text and "--retry-errors" in text
    assert f"delete line(s) 1, 2 of {path}" in text
    result = graphtune.tune(model, records=path, retry_errors=True, **FAST)
    assert result.solution.optimal
    assert_matches_ort(model, graphtune.compile(model, result.config))
    assert graphtune.tune(model, records=path, **FAST).solution.optimal  # successes now win


# ------------------------------------------------------------ dynamic shapes
def test_shape_dict_fixes_dynamic_inputs_everywhere(tmp_path):
    model = residual(dims=("N", 8, 8, 8))
    with pytest.raises(ModelError, match=r"pass shape_dict=\{'input': \[...\]\} to tune, compile "
                                         r"or extract \(command line: --shape input=D0,D1,...\)"):
        extract(model)
    shapes = {"input": [1, 8, 8, 8]}
    assert set(extract(model, shape_dict=shapes).nodes) >= {"a", "b", "sum"}
    result = graphtune.tune(model, records=None, shape_dict=shapes, **FAST)
    compiled = graphtune.compile(model, result.config, shape_dict=shapes)
    assert compiled.output_names == ["output"] and compiled.input_names == ["input"]
    assert_matches_ort(model, compiled)


# ------------------------------------------------------------ config joins
def _with_join(model, **changes):
    data = Config.uniform(model).to_dict()
    data["nodes"]["sum"] = {"op": "join", "workload": {"inputs": ["a", "b"]},
                            "in_layout": "NCHW16c", "out_layout": "NCHW16c", "knobs": {},
                            **changes}
    return data


def test_join_layout_that_does_not_divide_channels_is_refused():
    model = residual()
    config = Config.from_dict(_with_join(model, in_layout="NCHW7c", out_layout="NCHW7c"))
    with pytest.raises(ConfigError, match=r"nodes.sum.out_layout: NCHW7c does not divide the "
                                          r"channels \[16, 16\]"):
        graphtune.compile(model, config)
    fine = Config.from_dict(_with_join(model, in_layout="NCHW8c", out_layout="NCHW8c"))
    assert_matches_ort(model, graphtune.compile(model, fine))


@pytest.mark.parametrize("inputs", ["a", 3, ["a", 3], {"a": 1}])
def test_join_inputs_must_be_a_list_of_names(tmp_path, inputs):
    path = tmp_path / "c.graphtune.json"
    data = _with_join(residual())
    data["nodes"]["sum"]["workload"]["inputs"] = inputs
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="nodes.sum.workload.inputs: expected a list of node "
                                          "names"):
        Config.load(path)  # show and compile read the file the same way


# ------------------------------------------------------------ untuned convolutions
@pytest.mark.parametrize("rank", [1, 3])
def test_conv1d_and_conv3d_compile_correctly_with_a_warning(rank):
    model = conv_nd(rank)
    with pytest.warns(UserWarning, match=rf"1 conv{rank}d \(graphtune tunes 2-D convolutions "
                                         rf"only.*\(conv{rank}d\) left out of the layout choice"):
        config = Config.uniform(model)
    assert config.nodes == {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_matches_ort(model, graphtune.compile(model, config))


# ------------------------------------------------------------ RPC addresses
@pytest.mark.parametrize("address", ["host:99999", "host:0", "::1:9190", "host:", "9190",
                                     "[::1]:65536"])
def test_rpc_address_out_of_range_or_ambiguous_is_refused(address):
    with pytest.raises(MeasureError, match="port from 1 to 65535"):
        RPCRunner(address, "x86")


def test_rpc_ipv6_address_in_brackets():
    assert _parse_address("[::1]:9190", "x86") == ("::1", 9190)
    with socket.socket(socket.AF_INET6) as sock:  # a free IPv6 port: nobody listens there
        sock.bind(("::1", 0))
        port = sock.getsockname()[1]
    start = time.perf_counter()
    with pytest.raises(MeasureError, match=rf"cannot reach the RPC tracker at \[::1\]:{port}"):
        RPCRunner(f"[::1]:{port}", "x86").resolve_target()
    assert time.perf_counter() - start < 5
