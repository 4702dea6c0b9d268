"""Every Examples section of graphtune's docstrings runs and shows what it says.

One test per docstring, as ``pytest --doctest-modules`` collects them, for every module of
graphtune and the benchmarks/ modules other code imports. Here rather than through
``--doctest-modules`` so that each example runs once, in the run's own temp folder
(``in_session_tempdir`` in tests/conftest.py): examples keep files under
``tempfile.gettempdir()`` (the records file that pipeline.py, report.py, config.py and
opgroups/pricing.py share), which must not outlive the run. The option flags are setup.cfg's
``doctest_optionflags``.

Tiers: the examples of :data:`INTEGRATION` compile, tune or measure (or start processes, or
time the host) and are marked ``integration``; the rest are in the fast tier.
"""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil
import shutil

import pytest

import graphtune

pytestmark = pytest.mark.unit

# benchmarks/ modules with examples (tests import them)
BENCHMARKS = ["e2e", "loopback", "precision_cost", "runinfo"]

# Docstrings whose examples compile, tune or measure, start processes or time the host: marked
# integration (`make test` only). A module name covers the module and every docstring in it.
INTEGRATION = ("graphtune.baselines", "graphtune.bind", "graphtune.compiler", "graphtune.final_check",
               "graphtune.hoststate", "graphtune.latency", "graphtune.measure", "graphtune.opgroups",
               "graphtune.peers", "graphtune.pipeline", "graphtune.procs", "graphtune.profiling",
               "graphtune.quantization", "graphtune.report", "graphtune.config.Config.from_solution",
               "graphtune.config.Config.random", "graphtune.frontend.pad.pad_int8_input_channels",
               "loopback")


def _integration(name: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in INTEGRATION)


# Modules that must carry examples (a module losing all of them is a mistake, not a choice).
DOCUMENTED = (["graphtune.graph", "graphtune.synthetic", "graphtune.checks", "graphtune.errors",
               "graphtune.cli", "graphtune.measure.records", "graphtune.measure.rpc",
               "graphtune.frontend.fold", "graphtune.models", "graphtune.solve"]
              + [f"graphtune.models.{m}" for m in ("builder", "resnet", "vgg", "inception",
                                                   "densenet", "mobilenet", "ssd", "efficientnet",
                                                   "mobilenet_v3", "shufflenet", "googlenet",
                                                   "unet", "regnet")]
              + [f"graphtune.solve.{m}" for m in ("auto", "branch", "brute", "cpsat", "dominance",
                                                  "dp", "local", "lp", "pbqp", "polytope",
                                                  "problem", "solution")]
              + ["graphtune.x86"] + [m.name for m in pkgutil.iter_modules(
                  importlib.import_module("graphtune.x86").__path__, "graphtune.x86.")])


def _modules() -> list[str]:
    found = pkgutil.walk_packages(graphtune.__path__, "graphtune.")
    return ["graphtune"] + sorted(m.name for m in found) + BENCHMARKS


def _docstrings() -> list[tuple[str, doctest.DocTest]]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [(name, test) for name in _modules()
            for test in sorted(finder.find(importlib.import_module(name), name), key=lambda t: t.name)
            if test.examples]


DOCSTRINGS = _docstrings()


# examples that tune a model and then compile and time it (15-40 s each) run with -m slow, so that
# make test stays under 20 min; the same calls are tested in tests/test_feedback.py, test_pipeline.py,
# test_cli.py (bench) and test_final_check.py
SLOW = {"graphtune.feedback", "graphtune.report", "graphtune.report.evaluate",
        "graphtune.report.bench_model", "graphtune.pipeline.TuneResult.summary"}


def _marks(name: str) -> list:
    marks = [pytest.mark.integration] if _integration(name) else []
    return marks + ([pytest.mark.slow] if name in SLOW else [])


@pytest.mark.parametrize("docstring", [
    pytest.param(test, id=test.name, marks=_marks(test.name)) for _, test in DOCSTRINGS])
def test_docstring_examples(docstring: doctest.DocTest, in_session_tempdir, pytestconfig, request):
    shared = in_session_tempdir / "graphtune-doctest-resnet18-32.records.jsonl"
    if _integration(docstring.name) and not shared.exists():
        # the examples' shared records start as the run's ResNet-18 records (tests/conftest.py)
        shutil.copyfile(request.getfixturevalue("resnet18_records"), shared)
    flags = 0
    for flag in pytestconfig.getini("doctest_optionflags"):
        flags |= doctest.OPTIONFLAGS_BY_NAME[flag]
    runner = doctest.DocTestRunner(optionflags=flags)
    test = doctest.DocTest(docstring.examples, dict(docstring.globs), docstring.name,
                           docstring.filename, docstring.lineno, docstring.docstring)
    report = io.StringIO()
    runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue()


@pytest.mark.parametrize("module", DOCUMENTED)
def test_module_has_examples(module):
    assert any(name == module for name, _ in DOCSTRINGS)


@pytest.mark.parametrize("name", INTEGRATION)
def test_integration_names_exist(name):
    """A renamed module or docstring must not slip into the fast tier unnoticed."""
    assert any(test.name == name or test.name.startswith(name + ".") for _, test in DOCSTRINGS)
