"""The host-state gauge and the per-state figures of the side-by-side benchmarks."""

import math

import pytest

import e2e  # benchmarks/e2e.py
from graphtune import models
from graphtune.config import Config
from graphtune.hoststate import SHARED_LIMIT, HandoffGauge, by_state, state_of
from graphtune.latency import gauged_rounds
from graphtune.report import compare, markdown_table

pytestmark = [pytest.mark.unit, pytest.mark.serial]  # serial: times peers in fresh processes


def test_gauge_ratio_is_a_finite_positive_ratio_and_builds_its_kernels_once():
    gauge = HandoffGauge(megabytes=0.25)
    first = gauge.ratio(calls=5)
    kernels = gauge._kernels()
    assert math.isfinite(first) and first > 0
    assert gauge.ratio(calls=5) > 0 and gauge._kernels() is kernels


def test_gauge_copies_move_the_rows_they_say():
    import numpy as np

    same, shifted, a, b = HandoffGauge(megabytes=0.25)._kernels()
    rows = a.shape[0]
    same(a, b)
    np.testing.assert_array_equal(b.numpy(), a.numpy())
    shifted(a, b)
    np.testing.assert_array_equal(b.numpy(), np.roll(a.numpy(), -(rows // 2), axis=0))


def test_by_state_groups_rounds_at_the_limit():
    samples = {"gt": [1.0, 2.0, 3.0, 10.0], "ort": [2.0, 2.0, 2.0, 4.0]}
    states = by_state(samples, [0.9, SHARED_LIMIT, 1.1, SHARED_LIMIT + 0.01])
    assert states["shared"] == {"rounds": 3, "samples": {"gt": 3, "ort": 3},
                                "latency_ms": {"gt": 2.0, "ort": 2.0}}
    assert states["split"] == {"rounds": 1, "samples": {"gt": 1, "ort": 1},
                               "latency_ms": {"gt": 10.0, "ort": 4.0}}
    assert by_state(samples, [1.0] * 4).keys() == {"shared"}


def test_by_state_per_sample_leaves_out_samples_timed_across_a_change():
    samples = {"gt": [1.0, 9.0, 2.0, 8.0], "ort": [5.0, 6.0, 7.0, 8.0]}
    ratios = {"gt": [[1.0, 1.0], [4.0, 1.0], [1.0, 1.2], [5.0, 6.0]],
              "ort": [[1.0, 1.0], [1.0, 1.0], [5.0, 5.0], [5.0, 1.0]]}
    states = by_state(samples, ratios)
    assert states["shared"] == {"rounds": 2, "samples": {"gt": 2, "ort": 2},
                                "latency_ms": {"gt": 1.5, "ort": 5.5}}
    assert states["split"] == {"rounds": 1, "samples": {"gt": 1, "ort": 1},
                               "latency_ms": {"gt": 8.0, "ort": 7.0}}
    assert [state_of(r) for r in ratios["gt"]] == ["shared", "mixed", "shared", "split"]


def test_gauged_rounds_read_the_gauge_around_every_timed_turn():
    events = []
    values = iter(range(100))
    calls = {"a": lambda: events.append("a"), "b": lambda: events.append("b")}

    def gauge():
        events.append("gauge")
        return float(next(values))

    samples, readings = gauged_rounds(calls, gauge, repeat=2, warmup=1, settle=0, settle_ms=0)
    assert events[:2] == ["a", "b"]  # warm-up round: no reading
    timed = events[2:]
    turns = [timed[i:i + 3] for i in range(0, len(timed), 3)]
    assert all(turn[0] == "gauge" and turn[2] == "gauge" and turn[1] in "ab" for turn in turns)
    assert len(turns) == 4 and {len(v) for v in samples.values()} == {2}
    assert readings["a"].shape == readings["b"].shape == (2, 2)
    read = readings["a"].ravel().tolist() + readings["b"].ravel().tolist()
    assert sorted(read) == list(map(float, range(8)))


@pytest.mark.parametrize("threads, gauged", [(2, True), (1, False)])
@pytest.mark.integration
def test_compare_gauges_the_host_around_every_turn_with_several_threads(threads, gauged):
    model = models.get("resnet18", image_size=32)
    row = compare(model, {"gt-uniform": Config.uniform(model)}, peers=["ort"], repeat=3,
                  warmup=1, threads=threads)
    assert ("handoff_ratio" in row) is gauged and ("by_state" in row) is gauged
    if gauged:
        assert row["handoff_ratio"].keys() == {"ort", "gt-uniform"}
        for pairs in row["handoff_ratio"].values():
            assert len(pairs) == 3 and all(len(p) == 2 and min(p) > 0 for p in pairs)
        for name, pairs in row["handoff_ratio"].items():  # every sample in one state or mixed
            counted = sum(part["samples"][name] for part in row["by_state"].values())
            assert counted == sum(state_of(p) != "mixed" for p in pairs)


def test_suite_summary_per_state_needs_enough_rounds():
    rows = [{"model": "a", "speedup_vs_ort": 1.2, "speedup_vs_ort_shared": 1.5, "rounds_shared": 10,
             "speedup_vs_ort_split": 0.9, "rounds_split": e2e.MIN_STATE_ROUNDS - 1},
            {"model": "b", "speedup_vs_ort": 0.8, "speedup_vs_ort_shared": 0.6, "rounds_shared": 20}]
    summary = e2e.suite_summary(rows)
    assert summary["by_state"].keys() == {"shared"}
    shared = summary["by_state"]["shared"]
    assert shared["models"] == 2 and shared["min_model"] == "b"
    assert shared["geomean_ort_over_gt"] == pytest.approx(math.sqrt(1.5 * 0.6))


@pytest.mark.integration
def test_compare_splits_the_rounds_between_fresh_peer_processes():
    model = models.get("resnet18", image_size=32)
    row = compare(model, {"gt-uniform": Config.uniform(model)}, peers=["ort"], repeat=5,
                  warmup=1, peer_processes=2)
    assert {name: len(ms) for name, ms in row["process_ms"].items()} == {"ort": 2, "gt-uniform": 2}
    assert all(len(values) == 5 for values in row["samples_ms"].values())
    assert row["reference"] == "ort" and row["max_abs_diff"]["ort"] == 0.0


def test_host_state_columns_show_only_in_the_verbose_table():
    row = {"model": "m", "latency_ms": {"ort": 2.0, "gt-graph": 1.0}, "predicted_ms": 0.9,
           "speedup_vs_ort": 2.0, "prediction_error": 0.1, "rounds_shared": 7,
           "speedup_vs_ort_shared": 2.2, "prediction_error_shared": 0.05, "rounds_split": 2,
           "speedup_vs_ort_split": 1.5, "prediction_error_split": 0.3,
           "by_state": {"shared": {"rounds": 7}, "split": {"rounds": 2}}}
    plain = markdown_table([row])
    assert plain.splitlines()[0] == "| model | ort | gt-graph | predicted | ORT/gt-graph | prediction error |"
    assert "shared" not in plain and "split" not in plain and "rounds" not in plain
    verbose = markdown_table([row], verbose=True)
    head = verbose.splitlines()[0]
    assert "samples (shared)" in head and "prediction error (split)" in head
    assert verbose.splitlines()[2].endswith("| 7 | 2.20 | +5.0% | 2 | 1.50 | +30.0% |")
    # a graphtune bench row (compare) has only by_state: its sample counts still show
    bench = {"model": "m", "latency_ms": {"ort": 2.0}, "by_state": {"split": {"rounds": 4}}}
    assert markdown_table([bench], verbose=True).splitlines()[0].endswith("| samples (split) |")


def test_bench_takes_verbose_for_the_host_state_columns():
    from graphtune.cli import build_parser

    assert build_parser().parse_args(["bench", "resnet18", "-v"]).verbose
    assert not build_parser().parse_args(["bench", "resnet18"]).verbose
