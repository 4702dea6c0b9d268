"""The closed loop of tune (graphtune.feedback): in-model costs replace the predicted ones."""

from __future__ import annotations

import json
import shutil

import pytest

import graphtune
from graphtune import feedback
from graphtune.errors import ArgumentError
from graphtune.measure import contention
from graphtune.opgroups.pricing import fixed_cost_node
from graphtune.ops import LAYOUT_OPS
from graphtune.profiling import CallTimes
from onnx_blocks import squeeze_excite

TUNE = {"max_candidates": 2, "final_check": False, "progress": False}
MODEL = squeeze_excite()  # conv -> SE gate -> conv: three layout nodes, a join


def _in_model_lines(path) -> list[dict]:
    with open(path) as handle:
        return [r for r in map(json.loads, handle) if r["kind"] == "in_model"]


@pytest.fixture(scope="module")
def looped(tmp_path_factory):
    """The tiny model tuned with two feedback rounds; its records file."""
    folder = tmp_path_factory.mktemp("feedback")
    records = folder / "se.records.jsonl"
    return graphtune.tune(MODEL, records=records, feedback_rounds=2, **TUNE), records


def _copy(records, folder):
    """A copy of a records file (and its probe index) in ``folder``."""
    target = folder / "se.records.jsonl"
    shutil.copy(records, target)
    probes = str(records).replace(".records.jsonl", ".probes.jsonl")
    shutil.copy(probes, str(target).replace(".records.jsonl", ".probes.jsonl"))
    return target


def test_chosen_costs_are_the_in_model_records(looped):
    result, records = looped
    assert result.feedback is not None and 1 <= result.feedback.rounds <= 2
    assert result.measured["feedback_rounds"] == result.feedback.rounds
    lines = _in_model_lines(records)
    by_key = {(r["workload"]["node"], r["workload"]["in_layout"], r["workload"]["out_layout"],
               json.dumps(r["knobs"], sort_keys=True)): r["median_ms"] for r in lines}
    chosen = [(n, result.graph.candidates(n)[i]) for n, i in result.solution.assignment.items()
              if result.graph.op(n) in LAYOUT_OPS]
    matched = 0
    for node, cand in chosen:
        key = (node, cand.in_layout, cand.out_layout, json.dumps(cand.knobs, sort_keys=True))
        if key in by_key:
            assert cand.cost == pytest.approx(by_key[key])
            matched += 1
    assert matched == len(chosen) or not result.feedback.converged
    assert "feedback: " in result.summary()


def test_a_rerun_from_the_records_reuses_the_in_model_records(looped, tmp_path, monkeypatch):
    result, records = looped
    # every record as it is: kernels timed while other work held the CPUs (another test worker)
    # are otherwise timed again, and their new costs may change the solution
    monkeypatch.setenv(contention.RETRIES_ENV, "0")
    calls = []
    real = feedback._profile
    monkeypatch.setattr(feedback, "_profile", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = graphtune.tune(MODEL, records=_copy(records, tmp_path), feedback_rounds=2, **TUNE)
    if result.feedback.converged:
        # it starts from every in-model record of the first run; its first solve may still pick
        # a pair the first run's last solve did not (seen; the cause is not established), which
        # it then profiles
        assert len(calls) == again.feedback.rounds <= result.feedback.rounds
        assert again.feedback.converged and again.feedback.in_model >= result.feedback.in_model
    assert again.solution.assignment == result.solution.assignment


def test_penalised_candidates_cost_their_in_model_time(looped, tmp_path, monkeypatch):
    """Every chosen kernel 100 ms in the model: those candidates cost 100 ms after the round, and
    their nodes' other candidates their isolated cost times the same ratio, or the model's median
    ratio where the node's is more than OUTLIER times that (whether the solution then moves
    depends on the transforms between them, measured)."""
    _, records = looped
    target = _copy(records, tmp_path)
    first = graphtune.tune(MODEL, records=target, feedback_rounds=0, **TUNE)
    before = len(_in_model_lines(target))

    def slow(graph, solution, *args):
        return CallTimes({n: [100.0, 100.0] for n, i in solution.assignment.items()
                          if graph.op(n) in LAYOUT_OPS}, {}, [0.0, 0.0], 1.0), "shared", 1

    monkeypatch.setattr(feedback, "_profile", slow)
    # a fresh model hash: the looped fixture's records would otherwise apply
    monkeypatch.setattr(feedback, "IN_MODEL_PROTOCOL", "test-penalty")
    moved = graphtune.tune(MODEL, records=target, feedback_rounds=1, **TUNE)
    assert moved.feedback.rounds == 1 and len(_in_model_lines(target)) > before
    chosen = {node: index for node, index in first.solution.assignment.items()
              if first.graph.op(node) in LAYOUT_OPS}
    ratios = {node: 100.0 / first.graph.candidates(node)[index].cost for node, index in chosen.items()}
    typical = feedback._median(list(ratios.values()))
    assert any(r > feedback.OUTLIER * typical for r in ratios.values())  # both rules at work
    for node, index in chosen.items():
        isolated = [c.cost for c in first.graph.candidates(node)]
        after = [c.cost for c in moved.graph.candidates(node)]
        assert after[index] == pytest.approx(100.0)
        ratio = ratios[node] if ratios[node] <= feedback.OUTLIER * typical else typical
        assert [ms for i, ms in enumerate(after) if i != index] == \
            pytest.approx([ms * ratio for i, ms in enumerate(isolated) if i != index], rel=1e-6)


def test_no_feedback_rounds_leaves_tune_as_before(looped, tmp_path):
    _, records = looped
    target = _copy(records, tmp_path)
    lines = len(_in_model_lines(target))
    result = graphtune.tune(MODEL, records=target, feedback_rounds=0, **TUNE)
    assert result.feedback is None and result.measured["feedback_rounds"] == 0
    assert len(_in_model_lines(target)) == lines


def test_feedback_rounds_is_checked_first():
    with pytest.raises(ArgumentError, match="feedback_rounds"):
        graphtune.tune(MODEL, feedback_rounds=-1)


def test_a_later_profile_replaces_an_earlier_one(looped, tmp_path, monkeypatch):
    """Round 1 (host slow: 100 ms per call, one node missing) and round 2 (1 ms) profile the same
    candidates: the graph's costs are round 2's, not the first profile's."""
    _, records = looped
    ran: list[dict] = []

    def profile(graph, solution, *args):
        layout = sorted(n for n in solution.assignment if graph.op(n) in LAYOUT_OPS)
        first = not ran
        timed = layout[:-1] if first else layout  # round 1 misses a node: round 2 must run
        ran.append({n: solution.assignment[n] for n in timed})
        ms = 100.0 if first else 1.0
        return CallTimes({n: [ms, ms] for n in timed}, {}, [0.0, 0.0], 1.0), "shared", 1

    monkeypatch.setattr(feedback, "_profile", profile)
    monkeypatch.setattr(feedback, "IN_MODEL_PROTOCOL", "test-newest")
    result = graphtune.tune(MODEL, records=_copy(records, tmp_path), feedback_rounds=2, **TUNE)
    assert result.feedback.rounds == 2 and len(ran) == 2
    for node, index in ran[1].items():
        assert result.graph.candidates(node)[index].cost == pytest.approx(1.0)


def test_a_profile_taken_in_the_split_state_is_taken_again(looped):
    """Readings of 3 (threads not sharing a cache) around the first profile, 1 around the second:
    the second is used."""
    result, _ = looped
    readings = iter([3.0, 3.0, 1.0, 1.0])
    times, state, taken = feedback._profile(result.graph, result.solution, MODEL, None, None, "se",
                                            readings.__next__)
    assert (state, taken) == ("shared", 2)
    assert set(times.nodes) & set(result.solution.assignment)


def test_without_a_shared_reading_every_try_is_taken_and_the_state_said(looped):
    result, _ = looped
    times, state, taken = feedback._profile(result.graph, result.solution, MODEL, None, None, "se",
                                            lambda: 3.0)
    assert (state, taken) == ("split", feedback.PROFILES) and times.vm_ms > 0
    summary = feedback.Feedback(1, 1.0, 1.0, [times.vm_ms], True, 1, states=[state]).summary()
    assert f"{times.vm_ms:.3f} (split)" in summary


def test_the_constant_becomes_the_time_of_the_calls_no_node_owns(looped, tmp_path, monkeypatch):
    """The plain-layout op groups priced alone are one constant on the output boundary; a round
    replaces it by the profile's unowned calls (an isolated timing taken in a hiccup, 5.9 ms for
    a 0.02 ms global mean, no longer stays in the prediction)."""
    result, records = looped
    sink = fixed_cost_node(result.graph)
    plain = [r for r in _in_model_lines(records) if r["workload"]["node"] == ""
             and r["workload"]["shape"] == []]
    recorded = plain[-1]  # one per round that profiled; the last one wins (Records)
    assert result.graph.candidates(sink)[0].cost == pytest.approx(recorded["median_ms"])

    def unowned(graph, solution, *args):
        return CallTimes({n: [1.0, 1.0] for n in solution.assignment if graph.op(n) in LAYOUT_OPS},
                         {}, [7.0, 7.0], 1.0), "shared", 1

    monkeypatch.setattr(feedback, "_profile", unowned)
    monkeypatch.setattr(feedback, "IN_MODEL_PROTOCOL", "test-constant")
    again = graphtune.tune(MODEL, records=_copy(records, tmp_path), feedback_rounds=1, **TUNE)
    assert again.graph.candidates(sink)[0].cost == pytest.approx(7.0)
    assert sink in again.solution.assignment  # its cost is one term of predicted_ms


def test_a_profile_lasts_its_window_and_takes_every_run_in_it(looped):
    """``call_times(seconds=...)`` keeps running past ``repeat`` until the window has passed (the
    loop's profiles span :data:`feedback.PROFILE_SECONDS` of host drift, not one instant)."""
    import time

    from graphtune import profiling
    from graphtune.config import Config

    result, _ = looped
    config = Config.from_solution(result.graph, result.solution, model_name="se")
    compiled = graphtune.compile(MODEL, config)
    began = time.perf_counter()
    times = profiling.call_times(compiled, config, MODEL, 2, seconds=0.3)
    assert time.perf_counter() - began >= 0.3
    runs = {len(ms) for ms in times.nodes.values()}
    assert len(runs) == 1 and runs.pop() > 2 and len(times.other) > 2
    assert len(profiling.call_times(compiled, config, MODEL, 2).other) == 2
    with pytest.raises(ArgumentError, match="seconds=-1"):
        profiling.call_times(compiled, config, MODEL, 2, seconds=-1)


@pytest.mark.parametrize("speed", [1.5, 0.5], ids=["slower", "faster"])
def test_the_rounds_are_put_at_the_fastest_host_speed_the_shared_calls_show(looped, tmp_path,
                                                                           monkeypatch, speed):
    """Round 1 times nodes a, b at their costs; round 2 (host ``speed`` x as slow) times b, c at
    ``speed`` x theirs: b, run in both, shows the drift. The slower side is rescaled to the
    faster's: a round 2 1.5x slower is recorded at round 1's speed (c at its cost, a kept), a round
    2 twice as fast rescales round 1 (a at half its cost, c at half). Round 1 changes no cost, so
    the solution cannot move before round 2 (b keeps its candidate)."""
    _, records = looped
    ran: list[dict] = []

    def profile(graph, solution, *args):
        layout = sorted(n for n in solution.assignment if graph.op(n) in LAYOUT_OPS)
        first = not ran
        timed = layout[:-1] if first else layout[1:]
        costs = {n: graph.candidates(n)[solution.assignment[n]].cost for n in timed}
        ran.append({n: (solution.assignment[n], cost) for n, cost in costs.items()})
        slower = 1.0 if first else speed
        return CallTimes({n: [cost * slower] * 2 for n, cost in costs.items()}, {}, [slower] * 2,
                         1.0), "shared", 1

    monkeypatch.setattr(feedback, "_profile", profile)
    monkeypatch.setattr(feedback, "IN_MODEL_PROTOCOL", f"test-drift-{speed}")
    result = graphtune.tune(MODEL, records=_copy(records, tmp_path), feedback_rounds=2, **TUNE)
    assert len(ran) == 2 and result.feedback.drifts == [1.0, pytest.approx(speed)]
    fastest = min(1.0, speed)
    only_first = [n for n in ran[0] if n not in ran[1]]
    assert only_first and any(ran[0].get(n) == ran[1][n] for n in ran[1])
    for node, (index, cost) in [(n, ran[0][n]) for n in only_first] + list(ran[1].items()):
        assert result.graph.candidates(node)[index].cost == pytest.approx(fastest * cost)
    sink = fixed_cost_node(result.graph)  # round 2's unowned calls, at the same speed
    assert result.graph.candidates(sink)[0].cost == pytest.approx(fastest)
    assert f"host drift x1.00, x{speed:.2f}" in result.summary()


def test_the_unowned_calls_do_not_read_as_host_drift(looped, tmp_path, monkeypatch):
    """The calls no node owns change with the solution (a bfloat16 node's input conversion) and
    were recorded as ~0 where there were none: round 1 had none, round 2 runs 5 ms of them and
    no candidate of round 1. Nothing both rounds ran: no drift, and the older records keep their
    times (they were multiplied by 5 / 1e-6: a 603 ms prediction for a 21 ms bfloat16 ResNet-50)."""
    _, records = looped
    ran: list[dict] = []

    def profile(graph, solution, *args):
        layout = sorted(n for n in solution.assignment if graph.op(n) in LAYOUT_OPS)
        timed = layout[:-1] if not ran else layout[-1:]
        ran.append({n: solution.assignment[n] for n in timed})
        other = [0.0, 0.0] if len(ran) == 1 else [5.0, 5.0]
        return CallTimes({n: [2.0, 2.0] for n in timed}, {}, other, 1.0), "shared", 1

    monkeypatch.setattr(feedback, "_profile", profile)
    monkeypatch.setattr(feedback, "IN_MODEL_PROTOCOL", "test-unowned")
    result = graphtune.tune(MODEL, records=_copy(records, tmp_path), feedback_rounds=2, **TUNE)
    assert len(ran) == 2 and result.feedback.drifts == [1.0, 1.0]
    for node, index in ran[0].items():
        assert result.graph.candidates(node)[index].cost == pytest.approx(2.0)
    sink = fixed_cost_node(result.graph)  # the unowned calls: round 2's time, not rescaled
    assert result.graph.candidates(sink)[0].cost == pytest.approx(5.0)


def test_a_tune_in_another_precision_reuses_no_in_model_record(looped, tmp_path):
    """In-model records are per precision: a bfloat16 tune's calls hold other work than a float32
    tune's of the same candidates (DenseNet-121's concats ran 2x faster next to bfloat16 convs,
    read as host drift x0.40), so it profiles its own models where a float32 rerun profiles none."""
    result, records = looped
    again = graphtune.tune(MODEL, records=_copy(records, tmp_path), feedback_rounds=1,
                           precision="bfloat16", **TUNE)
    assert again.feedback.rounds == 1 and again.feedback.drifts == [1.0]


def test_the_fastest_profiled_config_is_checked_when_the_loop_moved_away(looped, tmp_path, monkeypatch):
    """Round 1 times one node's chosen kernel 100x its isolated cost (an outlier: its node's other
    candidates keep their isolated costs) and the model at 1 ms; the solver moves; round 2 runs the
    model at 5 ms. Round 1's solution is the loop's fastest: the final check times it too."""
    _, records = looped
    ran: list[dict] = []

    def profile(graph, solution, *args):
        layout = sorted(n for n in solution.assignment if graph.op(n) in LAYOUT_OPS)
        ran.append(dict(solution.assignment))
        costs = {n: graph.candidates(n)[solution.assignment[n]].cost for n in layout}
        if len(ran) == 1:
            costs[penalised] *= 100.0
        return CallTimes({n: [ms, ms] for n, ms in costs.items()}, {}, [0.0, 0.0],
                         1.0 if len(ran) == 1 else 5.0), "shared", 1

    first = graphtune.tune(MODEL, records=_copy(records, tmp_path), feedback_rounds=0, **TUNE)
    penalised = next(n for n in sorted(first.solution.assignment) if first.graph.op(n) in LAYOUT_OPS
                     and len(first.graph.candidates(n)) > 1)
    monkeypatch.setattr(feedback, "_profile", profile)
    monkeypatch.setattr(feedback, "IN_MODEL_PROTOCOL", "test-fastest")
    result = graphtune.tune(MODEL, records=_copy(records, tmp_path), feedback_rounds=2,
                            **{**TUNE, "final_check": True})
    assert len(ran) == 2 and ran[0] != ran[1] == result.solution.assignment
    assert result.feedback.fastest is not None and result.feedback.fastest.assignment == ran[0]
    checked = {**result.final.median_ms, **result.final.same_as}
    assert "fastest-profiled" in checked and result.final.chosen in checked
