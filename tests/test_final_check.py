"""The final check of graphtune.tune: the solver's config against uniform and kernel-best, timed.

The rule (:func:`graphtune.final_check.choose`) is tested on given samples; compiled
checks assert what holds on any host not oversubscribed (other processes on TVM's cores
scatter the rounds, and the check then keeps the solver's config): a config forced slow
(1-channel blocks, scalar register tiles: ~14x uniform on ResNet-18 at 32 px) is replaced, and
what is kept is the solver's config or, beyond the spread, the lowest median of the timings.
Made-up timings test what tune does with the choice.
"""

import numpy as np
import pytest

import graphtune
from graphtune import final_check as final_check_module
from graphtune import models
from graphtune.config import Config
from graphtune.final_check import KERNEL_BEST, SOLVER, UNIFORM, FinalCheck, choose, final_check
from graphtune.pipeline import FINAL_CHECK_ENV
from reliability_models import residual

pytestmark = [pytest.mark.unit, pytest.mark.serial]  # serial: times three configs

TINY = dict(max_candidates=2, min_repeat_ms=1, repeat=1, progress=False)


# ------------------------------------------------------------------------ the rule, no compiles
def test_a_config_faster_beyond_the_spread_replaces_the_incumbent():
    samples = {"solver": [10.0, 10.2, 10.4, 10.6], "uniform": [8.0, 8.1, 8.2, 8.3],
               "kernel-best": [9.0, 9.1, 9.2, 9.3]}
    chosen, reason = choose(samples, "solver")
    assert chosen == "uniform"  # both beat it beyond the spread: the lowest median is kept
    assert "uniform 8.150 ms beat solver 10.300 ms" in reason


def test_a_lead_within_the_spread_keeps_the_incumbent():
    samples = {"solver": [10.0, 11.0, 12.0, 13.0], "uniform": [9.0, 10.5, 11.5, 14.0]}
    chosen, reason = choose(samples, "solver")
    assert chosen == "solver"
    assert reason.startswith("no other config was faster beyond the spread (fastest: uniform")


def test_ties_and_slower_alternatives_keep_the_incumbent():
    assert choose({"solver": [5.0] * 4, "uniform": [5.0] * 4}, "solver") == ("solver", "fastest")
    assert choose({"solver": [5.0, 5.1], "uniform": [9.0, 9.1]}, "solver") == ("solver", "fastest")


def test_without_the_incumbent_the_lowest_median_is_kept():
    chosen, reason = choose({"uniform": [3.0, 3.0], "kernel-best": [2.0, 2.5]}, "solver")
    assert chosen == "kernel-best" and reason.startswith("lowest median")


def test_summary_names_every_config_and_what_was_kept():
    check = FinalCheck("kernel-best", "why", "solver", {"solver": 2.0, "kernel-best": 1.0},
                       {"solver": 0.1, "kernel-best": 0.1}, errors={"uniform": "boom"}, rounds=3)
    text = check.summary()
    assert check.replaced
    assert "solver 2.000 ms (IQR 0.100), kernel-best 1.000 ms" in text
    assert "uniform failed to compile" in text and text.endswith("kept kernel-best: why")


# ------------------------------------------------------------------------------- compiled
@pytest.fixture(scope="module")
def resnet18():
    return models.get("resnet18", image_size=32)


def _forced_slow(model) -> Config:
    """Every node in 1-channel blocks, one output per register tile, no unrolling: scalar code."""
    config = Config.uniform(model, block=1)
    for node in config.nodes.values():
        node.knobs.update({k: v for k, v in (("reg_n", 1), ("unroll_kw", False)) if k in node.knobs})
    return config


def _assert_kept_the_fastest(check: FinalCheck) -> None:
    """The kept config is the incumbent, or the lowest median of the recorded timings and faster
    than the incumbent beyond the spread; figures are consistent with the samples."""
    timed = {name: np.asarray(values) for name, values in check.samples_ms.items()}
    assert all(len(values) == check.rounds for values in timed.values())
    for name, median in check.median_ms.items():
        assert median == pytest.approx(float(np.median(timed[check.same_as.get(name, name)])))
    fastest = min(timed, key=lambda n: float(np.median(timed[n])))
    beyond = np.percentile(timed[fastest], 75) < np.percentile(timed[check.incumbent], 25)
    assert check.chosen == (fastest if beyond else check.incumbent)


@pytest.mark.integration
def test_a_config_forced_slow_is_replaced_by_uniform(resnet18):
    check = final_check(resnet18, {SOLVER: _forced_slow(resnet18), UNIFORM: Config.uniform(resnet18)})
    assert check.chosen == UNIFORM and check.replaced, check.summary()  # on a host not oversubscribed
    _assert_kept_the_fastest(check)
    assert check.max_abs_diff[UNIFORM] < 1e-3  # the same model, whatever the layouts
    assert set(check.spread_ms) == {SOLVER, UNIFORM} and check.errors == {}


@pytest.mark.integration
def test_configs_compiling_to_the_same_program_are_timed_once(resnet18):
    check = final_check(resnet18, {SOLVER: Config.uniform(resnet18),
                                   UNIFORM: Config.uniform(resnet18, block=16)}, rounds=3)
    assert check.same_as == {UNIFORM: SOLVER}
    assert list(check.samples_ms) == [SOLVER] and check.chosen == SOLVER
    assert check.median_ms[UNIFORM] == check.median_ms[SOLVER]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """Records of the tiny residual model, measured once for the module's tunes."""
    path = tmp_path_factory.mktemp("final") / "residual.records.jsonl"
    graphtune.tune(residual(), records=path, final_check=False, **TINY)
    return path


@pytest.mark.integration
def test_tune_keeps_the_fastest_and_says_so(records, tmp_path, monkeypatch):
    monkeypatch.setenv(FINAL_CHECK_ENV, "1")  # the default outside the test suite
    result = graphtune.tune(residual(), records=records, **TINY)
    check = result.final
    assert check is not None and check.incumbent == SOLVER
    assert set(check.median_ms) == {SOLVER, UNIFORM, KERNEL_BEST} and check.errors == {}
    _assert_kept_the_fastest(check)
    method = result.config.solution["method"]
    assert method == {UNIFORM: "uniform", KERNEL_BEST: "kernel-best"}.get(check.chosen,
                                                                         result.solution.method)
    assert result.config.solution["final_check"]["chosen"] == check.chosen
    assert "final" in result.phase_seconds
    assert "final check (10 rounds" in result.summary()
    path = tmp_path / "residual.graphtune.json"
    result.config.save(path)
    assert Config.load(path).solution["final_check"]["median_ms"] == check.median_ms


@pytest.mark.integration
@pytest.mark.parametrize("fastest", [UNIFORM, KERNEL_BEST, SOLVER])
def test_tune_returns_the_config_measured_fastest(records, monkeypatch, fastest):
    """With the timings made up (the one named ``fastest`` at 1 ms, the others at 5 ms), tune
    returns that config and says so; the configs still compile (a solver's config equal to a
    baseline is timed once: then that baseline shares the solver's figures)."""
    def made_up(calls, **_):
        return {name: np.full(4, 1.0 if name == fastest else 5.0) for name in calls}

    monkeypatch.setattr(final_check_module, "interleaved", made_up)
    result = graphtune.tune(residual(), records=records, final_check=True, **TINY)
    check = result.final
    assert check is not None
    kept = fastest if fastest not in check.same_as else SOLVER
    assert check.chosen == kept and check.replaced == (kept != SOLVER)
    assert result.config.solution["method"] == {UNIFORM: "uniform", KERNEL_BEST: "kernel-best"}.get(
        kept, result.solution.method)
    assert ("note: the config is" in result.summary()) == check.replaced
    assert result.config.check(residual()) == []


@pytest.mark.integration
@pytest.mark.parametrize("how", [{"final_check": False}, {}])  # {}: GRAPHTUNE_FINAL_CHECK=0
def test_final_check_false_skips_it(records, monkeypatch, how):
    monkeypatch.setenv(FINAL_CHECK_ENV, "0")
    result = graphtune.tune(residual(), records=records, **how, **TINY)
    assert result.final is None and "final" not in result.phase_seconds
    assert "final check" not in result.summary()
    assert "final_check" not in result.config.solution


def test_a_bad_final_check_variable_is_refused_before_any_work(monkeypatch, tmp_path):
    monkeypatch.setenv(FINAL_CHECK_ENV, "yes")
    with pytest.raises(graphtune.ArgumentError, match="GRAPHTUNE_FINAL_CHECK='yes': expected 0"):
        graphtune.tune(residual(), records=tmp_path / "r.records.jsonl", **TINY)
    assert not (tmp_path / "r.records.jsonl").exists()
