"""The last step of :func:`graphtune.tune`: never return a config slower than doing nothing.

The solver's config is an optimum of *predicted* costs: isolated timings that miss
what only the whole compiled model shows (the host's cache state, bandwidth drift,
fusion the op groups did not see...). :func:`final_check` compiles it with the configs
a user could have had without graph tuning — ``uniform`` (every node in 16-channel
blocks, default knobs: :func:`graphtune.baselines.uniform`) and ``kernel-best`` (each
node its fastest kernel, transforms ignored: :func:`graphtune.baselines.kernel_best_solution`)
— times them end to end, interleaved in one process (:func:`graphtune.latency.interleaved`:
A, B, C, B, C, A, ... on the same random inputs), and keeps the solver's config unless
another one wins beyond the run's spread (:func:`choose`).

Configs that compile to the same program (equal rewritten Relax module and kernel
knobs, :func:`program_key`) are compiled and timed once; ``FinalCheck.same_as`` says
which. A config that fails to compile is left out (``FinalCheck.errors``); if the
solver's own config fails, the fastest other one is kept.

Examples
--------
>>> from graphtune import models
>>> from graphtune.config import Config
>>> model = models.get("resnet18", image_size=32)
>>> check = final_check(model, {"solver": Config.uniform(model, block=1),  # ~4x slower
...                             "uniform": Config.uniform(model)}, rounds=5)
>>> sorted(check.median_ms), check.rounds, check.chosen in ("solver", "uniform")
(['solver', 'uniform'], 5, True)
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .config import Config
from .errors import GraphtuneError
from .latency import interleaved
from .numerics import max_abs_diff

__all__ = ["FinalCheck", "final_check", "choose", "program_key", "SOLVER", "UNIFORM",
           "KERNEL_BEST", "FASTEST_PROFILED", "ROUNDS"]

SOLVER, UNIFORM, KERNEL_BEST = "solver", "uniform", "kernel-best"
"""Names :func:`graphtune.tune` gives the configs it checks: the solver's, and the two baselines."""

FASTEST_PROFILED = "fastest-profiled"
"""Name of the config of the closed loop's round that ran fastest, checked when it is not the
solver's (:attr:`graphtune.feedback.Feedback.fastest`)."""

ROUNDS = 10
"""Timed interleaved rounds (each times every distinct config once); medians and quartiles of these."""

WARMUP = 2
"""Untimed rounds first (thread pool, caches, page faults of the first calls)."""

SETTLE, SETTLE_MS = 1, 10.0
"""Untimed calls of a config right before each of its timed calls: at least ``SETTLE`` and
``SETTLE_MS`` ms of them. All configs run on the same TVM thread pool in this process, so the
3 calls and 50 ms that :func:`graphtune.latency.interleaved` needs against runtimes of other
processes (``docs/timing.md``) are not needed: one call brings the config's weights back to
cache (a large model's turn then costs 2 calls, not 4)."""


@dataclass
class FinalCheck:
    """What :func:`final_check` timed and chose.

    Attributes
    ----------
    chosen : str
        Name of the config kept (``"solver"``, ``"uniform"``, ``"kernel-best"`` or
        ``"fastest-profiled"`` in :func:`graphtune.tune`).
    reason : str
        Why, in one sentence with the figures.
    incumbent : str
        The config kept unless another wins beyond the spread (the solver's).
    median_ms, spread_ms : dict of str to float
        Per config timed: the median of its samples, and their interquartile range
        (75th minus 25th percentile), in ms. A config timed as another
        (``same_as``) has the other's figures.
    samples_ms : dict of str to list of float
        Every timed sample, in round order.
    max_abs_diff : dict of str to float
        Largest absolute difference of each config's outputs from the incumbent's on the same
        random inputs (0 for the incumbent; a large value is a compiler bug to report).
    same_as : dict of str to str
        Configs that compile to the same program as an earlier one -> that one's name: compiled
        and timed once.
    errors : dict of str to str
        Configs that failed to compile -> the error; they are not timed.
    rounds : int
        Timed rounds.
    seconds : float
        Wall time of the check: compiles and timing.
    compile_s : dict of str to float
        Wall time of each config's compile (those compiled).

    Examples
    --------
    >>> check = FinalCheck("solver", "kept", "solver", {"solver": 1.0}, {"solver": 0.1})
    >>> check.replaced, check.to_dict()["median_ms"]
    (False, {'solver': 1.0})
    """

    chosen: str
    reason: str
    incumbent: str
    median_ms: dict[str, float]
    spread_ms: dict[str, float]
    samples_ms: dict[str, list[float]] = field(default_factory=dict)
    max_abs_diff: dict[str, float] = field(default_factory=dict)
    same_as: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    rounds: int = 0
    seconds: float = 0.0
    compile_s: dict[str, float] = field(default_factory=dict)

    @property
    def replaced(self) -> bool:
        """Whether another config than the incumbent was kept."""
        return self.chosen != self.incumbent

    def to_dict(self) -> dict[str, Any]:
        """The check as JSON-able plain data (every field)."""
        return asdict(self)

    def summary(self) -> str:
        """One line: each config's median and spread, what was kept and why.

        Examples
        --------
        >>> check = FinalCheck("uniform", "uniform beat solver beyond the spread", "solver",
        ...                    {"solver": 2.0, "uniform": 1.0, "kernel-best": 2.0},
        ...                    {"solver": 0.1, "uniform": 0.05, "kernel-best": 0.1},
        ...                    same_as={"kernel-best": "solver"}, rounds=10, seconds=3.0)
        >>> print(check.summary())  # doctest: +NORMALIZE_WHITESPACE
        final check (10 rounds, 3.0 s, compiles 0.0 s): solver 2.000 ms (IQR 0.100), uniform 1.000 ms
        (IQR 0.050), kernel-best = solver; kept uniform: uniform beat solver beyond the spread
        """
        parts = []
        for name in _ordered(self):
            if name in self.errors:
                parts.append(f"{name} failed to compile")
            elif name in self.same_as:
                parts.append(f"{name} = {self.same_as[name]}")
            else:
                parts.append(f"{name} {self.median_ms[name]:.3f} ms (IQR {self.spread_ms[name]:.3f})")
        return (f"final check ({self.rounds} rounds, {self.seconds:.1f} s, compiles "
                f"{sum(self.compile_s.values()):.1f} s): {', '.join(parts)}; "
                f"kept {self.chosen}: {self.reason}")


def _ordered(check: FinalCheck) -> list[str]:
    """The check's config names: those timed (as given, the incumbent first), then those that failed."""
    names = list(check.median_ms)
    return names + [n for n in check.errors if n not in names]


def choose(samples: Mapping[str, Sequence[float] | np.ndarray], incumbent: str) -> tuple[str, str]:
    """The config to keep, and why: the incumbent unless another wins beyond the spread.

    The config with the lowest median replaces the incumbent when it *wins beyond the
    spread*: its 75th percentile is below the incumbent's 25th, i.e. it was faster in
    most rounds by more than the rounds scattered. A tie, or a lead within the spread,
    keeps the incumbent. Without samples of the incumbent (it failed to compile), the
    config with the lowest median is kept.

    Parameters
    ----------
    samples : mapping of str to sequence of float or numpy.ndarray
        Per config, its timed samples (ms), at least one each.
    incumbent : str
        The config kept unless another wins (the solver's).

    Returns
    -------
    tuple of str
        ``(name kept, reason)``.

    Examples
    --------
    >>> choose({"solver": [10, 11, 12, 13], "uniform": [7, 8, 8, 9]}, "solver")[0]
    'uniform'
    >>> choose({"solver": [10, 11, 12, 13], "uniform": [9, 10, 12, 14]}, "solver")
    ('solver', 'no other config was faster beyond the spread (fastest: uniform 11.000 ms, solver 11.500 ms)')
    >>> choose({"solver": [2, 2, 2], "uniform": [3, 3, 3]}, "solver")
    ('solver', 'fastest')
    """
    if not samples:
        raise ValueError("choose: no samples")
    median = {name: float(np.median(values)) for name, values in samples.items()}
    best = min(median, key=lambda n: median[n])
    if incumbent not in samples:
        return best, f"lowest median of the configs that compiled ({median[best]:.3f} ms)"
    if median[best] >= median[incumbent]:
        return incumbent, "fastest"
    high, low = float(np.percentile(samples[best], 75)), float(np.percentile(samples[incumbent], 25))
    if high < low:
        return best, (f"{best} {median[best]:.3f} ms beat {incumbent} {median[incumbent]:.3f} ms "
                      f"beyond the spread (its 75th percentile {high:.3f} ms < {incumbent}'s 25th "
                      f"{low:.3f} ms)")
    return incumbent, (f"no other config was faster beyond the spread (fastest: {best} "
                       f"{median[best]:.3f} ms, {incumbent} {median[incumbent]:.3f} ms)")


def program_key(mod: Any, config: Config, target: Any) -> tuple:
    """What a compile of ``mod`` with ``config`` runs, as a comparable key.

    The structural hash of the module rewritten to the config's layouts
    (:func:`graphtune.compiler.driver.rewrite_model`: every layout transform and
    join layout the compiled model has) and each layout node's layouts and knobs:
    configs with equal keys compile to the same program, e.g. a solver's config
    in 16-channel blocks throughout and ``uniform``.

    Examples
    --------
    >>> from graphtune import models, x86
    >>> from graphtune.frontend import import_model
    >>> model = models.get("resnet18", image_size=32)
    >>> mod, tgt = import_model(model), x86.host_target()
    >>> key = program_key(mod, Config.uniform(model), tgt)
    >>> key == program_key(mod, Config.uniform(model), tgt), key == program_key(
    ...     mod, Config.uniform(model, block=8), tgt)
    (True, False)
    """
    import tvm_ffi

    from .compiler.driver import rewrite_model

    new_mod, anchors, _ = rewrite_model(mod, config, target)
    plans = sorted((plan.name, plan.in_layout, plan.out_layout, json.dumps(plan.knobs, sort_keys=True))
                   for plan in anchors.values())
    return tvm_ffi.structural_hash(new_mod), tuple(plans)


def final_check(model: Any, configs: Mapping[str, Config], *, incumbent: str | None = None,
                rounds: int = ROUNDS, warmup: int = WARMUP, seed: int = 0, target: Any = None,
                shape_dict: Mapping[str, Sequence[int]] | None = None) -> FinalCheck:
    """Compile ``configs``, time them interleaved end to end, and choose one (:func:`choose`).

    Parameters
    ----------
    model : onnx.ModelProto, path or tvm.IRModule
        The model (as :func:`graphtune.compile` takes it).
    configs : mapping of str to Config
        Name -> config, the incumbent first unless ``incumbent`` names it.
    incumbent : str, optional
        The config kept unless another wins beyond the spread (default the first).
    rounds, warmup : int
        Timed and untimed interleaved rounds (:data:`ROUNDS`, :data:`WARMUP`).
    seed : int
        Seed of the random (standard normal) inputs every config runs on.
    target : tvm.target.Target or dict, optional
        Compile target; default this host (the configs are timed here).
    shape_dict : mapping of str to list of int, optional
        Static shapes of ONNX inputs with dynamic dimensions.

    Returns
    -------
    FinalCheck

    Raises
    ------
    ValueError
        No configs, an unknown ``incumbent``, or ``rounds`` < 1.

    Examples
    --------
    Configs that compile to the same program are timed once (the module docstring shows a
    choice):

    >>> from graphtune import models
    >>> model = models.get("resnet18", image_size=32)
    >>> check = final_check(model, {"a": Config.uniform(model), "b": Config.uniform(model)},
    ...                     rounds=2)
    >>> check.same_as, check.chosen
    ({'b': 'a'}, 'a')
    """
    from . import x86
    from .compiler import compile as gt_compile
    from .frontend.importer import import_model

    if not configs:
        raise ValueError("final_check: no configs")
    incumbent = next(iter(configs)) if incumbent is None else incumbent
    if incumbent not in configs or rounds < 1:
        raise ValueError(f"final_check: incumbent {incumbent!r} must name a config and rounds "
                         f"be >= 1, got {list(configs)} and {rounds}")
    start = time.perf_counter()
    tgt = x86.host_target(target)
    mod = import_model(model, shape_dict=shape_dict)
    names = [incumbent, *(name for name in configs if name != incumbent)]
    keys: dict[tuple, str] = {}
    same_as: dict[str, str] = {}
    errors: dict[str, str] = {}
    compiled: dict[str, Any] = {}
    for name in names:
        try:
            key = program_key(mod, configs[name], tgt)
            if key in keys:
                same_as[name] = keys[key]
                continue
            compiled[name] = gt_compile(model, configs[name], tgt, shape_dict=shape_dict)
            keys[key] = name
        except GraphtuneError as err:
            errors[name] = str(err)
    if not compiled:
        return FinalCheck(incumbent, f"no config compiled; kept {incumbent}: "
                          + "; ".join(f"{n}: {e}" for n, e in errors.items()), incumbent, {}, {},
                          errors=errors, rounds=0, seconds=time.perf_counter() - start)
    inputs = next(iter(compiled.values())).random_inputs(seed)
    outputs = {name: _outputs(built(*inputs)) for name, built in compiled.items()}
    reference = outputs.get(incumbent, next(iter(outputs.values())))
    calls = {name: built.bound_call(*inputs) for name, built in compiled.items()}
    samples = interleaved(calls, repeat=rounds, warmup=warmup, settle=SETTLE, settle_ms=SETTLE_MS)
    chosen, reason = choose(samples, incumbent)
    if incumbent in errors:
        reason = f"{incumbent}'s config failed to compile; {reason}"
    timed = {name: samples[same_as.get(name, name)] for name in names if name not in errors}
    return FinalCheck(
        chosen, reason, incumbent,
        median_ms={name: float(np.median(v)) for name, v in timed.items()},
        spread_ms={name: float(np.percentile(v, 75) - np.percentile(v, 25)) for name, v in timed.items()},
        samples_ms={name: v.tolist() for name, v in samples.items()},
        max_abs_diff={name: max((max_abs_diff(a, b) for a, b in zip(outputs[same_as.get(name, name)],
                                                                       reference)), default=0.0)
                      for name in timed},
        same_as=same_as, errors=errors, rounds=rounds, seconds=time.perf_counter() - start,
        compile_s={name: float(built.compile_seconds or 0.0) for name, built in compiled.items()})


def _outputs(result: Any) -> list[np.ndarray]:
    """A compiled model's result as a list of arrays."""
    return [np.asarray(r) for r in (result if isinstance(result, list) else [result])]
