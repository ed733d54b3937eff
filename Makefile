# Two entry points for people: `make run` (the app on its built-in lab server) and
# `make test` (the whole suite, real peers included). Everything else is plumbing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PEERS := tests/peers

.PHONY: run test lint setup peers sysdeps bench clean

run: setup sysdeps
	$(PY) main.py

# Lint first: a finding fails the run before the suite starts.
test: setup lint peers sysdeps
	$(PY) -m pytest $(PYTEST_ARGS)

# ruff over the whole tree, mypy over hostapp/ (both configured in pyproject.toml).
lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

bench: setup peers sysdeps
	$(PY) -m bench $(BENCH_ARGS)

setup: $(VENV)/.installed

# The packaging extra too: the suite builds the one-folder bundle and starts it; and the
# lint extra, since `make test` lints first.
$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,lint,packaging]'
	touch $@

peers: $(PEERS)/node_modules/.installed

$(PEERS)/node_modules/.installed: $(PEERS)/package.json
	cd $(PEERS) && npm install --no-audit --no-fund --loglevel=error
	touch $@

sysdeps:
	bash .ci/system-packages.sh

clean:
	rm -rf $(VENV) $(PEERS)/node_modules
