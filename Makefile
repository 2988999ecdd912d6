# keras-vit: `make demo` and `make test` work on a fresh machine with only Python 3.10+ and make.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-test

.PHONY: setup demo test test-slow bench clean

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(PY) -m recipes.demo

test: setup
	$(PY) -m pytest -q

test-slow: setup
	$(PY) -m pytest -q -m slow

bench: setup
	$(PY) -m pip install -q -e ".[bench]"
	$(PY) bench/throughput.py

clean:
	rm -rf $(VENV) build dist *.egg-info
