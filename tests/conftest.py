"""Shared fixtures and the plumbing of the test suite.

How the suite is laid out (``make test-fast``, ``make test``: see the Makefile):

- ``make test`` runs in two pytest-xdist worker processes (``-n 2 --dist loadfile``: a module
  stays on one worker, so its module and session fixtures are built once there), except the
  modules marked ``serial`` (``pytestmark``: they time things or wait on timeouts), which run
  alone afterwards. A worker runs TVM on one thread (:func:`pytest_configure`).
- Tiers are pytest markers, registered in setup.cfg. ``make test`` (what CI runs) runs every
  test but the ``slow`` ones (full-size models: ``pytest -m slow``). ``make test-fast`` runs
  the ``unit`` tests that are not ``integration``: a module joins the fast tier with
  ``pytestmark = pytest.mark.unit`` (TVM-free code, single small kernels), and its tests
  that compile, tune or measure a model, run worker processes or servers, or sweep many
  kernel builds are marked ``@pytest.mark.integration``. A module without ``unit`` runs in ``make test`` only.
- Shared helpers are plain modules beside the tests (``compile_check``, ``schedule_check``,
  ``onnx_blocks``, ``odd_models``, ``reliability_models``, ``x86_reference``); a test module
  imports helpers, never another ``test_*.py``.
- ``tests/`` and ``benchmarks/`` are importable through the ``pythonpath`` option of
  ``[tool:pytest]`` in setup.cfg, the one place that says so; :func:`pytest_configure`
  hands the same path to every process a test starts (``python -c`` scripts, worker pools).
  No module touches ``sys.path`` (tests/test_suite_habits.py checks both habits).
- Docstring examples run in tests/test_doctests.py, in a temp folder fresh for each run
  (:func:`session_tempdir`).
"""

from __future__ import annotations

import os
import pathlib
import tempfile
from collections.abc import Iterator

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Child processes import what the tests import: the ``pythonpath`` ini option, exported."""
    paths = [str(path) for path in config.getini("pythonpath")]
    inherited = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(paths + ([inherited] if inherited else []))
    # graphtune.tune's final check (compile and time three configs) is off unless a test asks for
    # it (tests/test_final_check.py): most tests tune to test something else, and it would add
    # compiles to each. GRAPHTUNE_FINAL_CHECK=1 runs the suite with it.
    os.environ.setdefault("GRAPHTUNE_FINAL_CHECK", "0")
    # likewise the closed loop (a compile and a profile per round): tests/test_feedback.py asks
    os.environ.setdefault("GRAPHTUNE_FEEDBACK_ROUNDS", "0")
    # `make test` runs two pytest-xdist workers on a 2-core machine: one TVM thread each, so
    # that neither's parallel loops wait on threads the other has descheduled (`serial` tests,
    # which time things, run alone afterwards with every core)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("TVM_NUM_THREADS", "1")
        # the two workers contend for the cores by design: record the contention of each
        # timing, but do not retake disturbed ones (graphtune.measure.contention)
        os.environ.setdefault("GRAPHTUNE_CONTENTION_RETRIES", "0")


@pytest.fixture(scope="session")
def session_tempdir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A temp folder fresh for each pytest run, shared by the tests of that run."""
    return tmp_path_factory.mktemp("tmp")


@pytest.fixture
def in_session_tempdir(session_tempdir: pathlib.Path,
                       monkeypatch: pytest.MonkeyPatch) -> Iterator[pathlib.Path]:
    """``tempfile.gettempdir()`` (and ``$TMPDIR`` for child processes) is the run's temp folder.

    Docstring examples name their files under ``tempfile.gettempdir()``, e.g. the records file
    that graphtune/pipeline.py, report.py and config.py share: within a run they share it
    (one tuning for all), across runs they start afresh.
    """
    monkeypatch.setattr(tempfile, "tempdir", str(session_tempdir))
    monkeypatch.setenv("TMPDIR", str(session_tempdir))
    yield session_tempdir


@pytest.fixture(scope="session")
def resnet18_records(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A records file of ResNet-18 at 32 px tuned once per run (2 candidates, quick timing,
    every transform measured): modules that tune it, the docstring examples' shared records
    file and the notebook start from a copy (``shutil.copyfile``: a test may append to its
    own) and measure only what their own settings add. The xdist workers of a run share one
    file: the first to ask tunes, under a lock, and the other waits for it."""
    import fcntl

    import graphtune

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = tmp_path_factory.getbasetemp()
    folder = (root.parent if worker else root) / "resnet18-records"
    folder.mkdir(exist_ok=True)
    path = folder / "r18.records.jsonl"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "done").exists():
            graphtune.tune("resnet18", records=path, image_size=32, max_candidates=2,
                           min_repeat_ms=1, repeat=1, transforms="all", progress=False,
                           final_check=False)
            (folder / "done").touch()
    return path

