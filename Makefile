# graphtune: `make demo` and `make test` set everything up from a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

.PHONY: demo test bench venv clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e ".[test,bench]"
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) -m graphtune.demo

test: $(STAMP)
	$(PY) -m pytest -q

bench: $(STAMP)
	$(PY) benchmarks/solvers.py --quick

clean:
	rm -rf $(VENV) build *.egg-info
