# Two entry points for people: `make run` (the app on its built-in lab server) and
# `make test` (the whole suite, real peers included). Everything else is plumbing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PEERS := tests/peers

.PHONY: run test fuzz setup peers sysdeps bench clean

run: setup sysdeps
	$(PY) main.py

test: setup peers sysdeps
	$(PY) -m pytest $(PYTEST_ARGS)

# Hypothesis-driven fuzzing of the parsers and the client session (tests/fuzz): about
# 130 inputs per example, so 1,000 examples a target make some 130,000 inputs. The normal
# suite runs the same targets briefly (25 examples each).
FUZZ_EXAMPLES ?= 1000

fuzz: setup
	HOSTAPP_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -p no:cacheprovider tests/fuzz $(PYTEST_ARGS)

bench: setup peers sysdeps
	$(PY) -m bench $(BENCH_ARGS)

setup: $(VENV)/.installed

# The packaging extra too: the suite builds the one-folder bundle and starts it.
$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,packaging]'
	touch $@

peers: $(PEERS)/node_modules/.installed

$(PEERS)/node_modules/.installed: $(PEERS)/package.json
	cd $(PEERS) && npm install --no-audit --no-fund --loglevel=error
	touch $@

sysdeps:
	bash .ci/system-packages.sh

clean:
	rm -rf $(VENV) $(PEERS)/node_modules
