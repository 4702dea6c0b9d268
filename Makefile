# graphtune: `make demo` and `make test` set everything up from a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast lint bench venv clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e ".[test,bench]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m graphtune.demo

# Everything CI runs (.ci/run): every test but the slow ones, then lint (under 20 min on 2 cores).
# Two worker processes run the tests that only compile and compare (whole modules per worker);
# the `serial` ones (they time things or wait on timeouts) run alone afterwards.
test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not slow and not serial" --durations=20
	$(PY) -m pytest -q -m "serial and not slow" --durations=10
	$(MAKE) --no-print-directory lint

# The fast tier, then lint: tests marked `unit` and not `integration` (no model compile, no
# tuning; under 3 min on 2 cores). The markers are described in setup.cfg and tests/conftest.py.
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "unit and not integration and not slow" --durations=5
	$(MAKE) --no-print-directory lint

# ruff (style, bugs, imports) and mypy (strict on the TVM-free core): settings in pyproject.toml
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m mypy

bench: $(STAMP)
	$(PY) benchmarks/solvers.py --quick

clean:
	rm -rf $(VENV) build *.egg-info
