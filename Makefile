# Two entry points for people: `make run` (the app on its built-in lab server) and
# `make test` (the suite but its slow tier, real peers included, in about ten minutes).
# `make test-all` adds the slow tier (tests/README.md says what is in it). Everything else
# is plumbing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PEERS := tests/peers

.PHONY: run test test-all test-slow lint fuzz soak setup app-setup apps peers sysdeps bench bench-compare clean

# The suite mostly waits on real processes (servers, agents, the network cut and restored),
# so it runs on more workers than the machine has cores; tests that share machine-wide state
# are kept on one worker by their xdist_group (--dist loadgroup).
PYTEST_WORKERS ?= 4
XDIST := -n $(PYTEST_WORKERS) --dist loadgroup

# The window needs the app alone: no test peers, linters or packaging tools.
run: app-setup sysdeps
	$(PY) main.py

# What the suite needs is made side by side, whatever -j make was given: the Python
# packages and then lint, the Node peers and the Debian check (a fresh clone spends its
# first minutes downloading; lint waits for the packages only, not for npm). Lint still
# comes before the suite: a finding fails the run before it starts.
PREPARE := $(MAKE) --no-print-directory -j 4 --output-sync=target

test:
	@$(PREPARE) setup lint peers sysdeps
	$(PY) -m pytest $(XDIST) -m "not slow" $(PYTEST_ARGS)

# Everything, the slow tier included.
test-all:
	@$(PREPARE) setup lint peers sysdeps
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# The slow tier alone (CI runs it after `make test`: together they are `make test-all`).
test-slow:
	@$(PREPARE) setup peers sysdeps
	$(PY) -m pytest $(XDIST) -m slow $(PYTEST_ARGS)

# ruff over the whole tree, mypy over hostapp/ (both configured in pyproject.toml).
lint: setup
	$(PY) -m ruff check .
	$(PY) -m mypy

# Hypothesis-driven fuzzing of the parsers and the client session (tests/fuzz): about
# 130 inputs per example, so 1,000 examples a target make some 130,000 inputs. The normal
# suite runs the same targets briefly (25 examples each).
FUZZ_EXAMPLES ?= 1000

fuzz: setup
	HOSTAPP_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -p no:cacheprovider tests/fuzz $(PYTEST_ARGS)

# The chaos soak (tests/soak/driver.py): owner and servers SIGKILLed at random, the network
# cut through loopback proxies, calls of every mechanism from several command lines; then
# every outcome checked against the servers' own records. The suite runs it for 2 minutes.
SOAK_SECONDS ?= 600

soak: setup sysdeps
	$(PY) -m tests.soak.driver --seconds $(SOAK_SECONDS) $(SOAK_ARGS)

bench: setup peers sysdeps
	$(PY) -m bench $(BENCH_ARGS)

# The regression guard: this tree against REF (a commit), the intake and window-model cases run in
# alternation on this machine (bench/compare.py); e.g. `make bench-compare REF=main`.
bench-compare: setup
	@test -n "$(REF)" || { echo "usage: make bench-compare REF=<commit> [BENCH_COMPARE_ARGS=...]"; exit 2; }
	$(PY) -m bench.compare $(REF) $(BENCH_COMPARE_ARGS)

app-setup: $(VENV)/.installed-app

$(VENV)/.installed-app: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

# MCP Apps: the component that renders a tool's interactive view (QtWebEngine).
apps: app-setup
	$(PY) -m pip install -q -e '.[apps]'

setup: $(VENV)/.installed

# What the suite needs besides the app: the test extra (peers, pytest), the lint extra
# (`make test` lints first) and the packaging extra (the suite builds the bundle). One
# pip run with the app's own packages, so they are resolved once (it makes the app's
# stamp too).
$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,lint,packaging]'
	touch $(VENV)/.installed-app $@

peers: $(PEERS)/node_modules/.installed

# Exactly what package-lock.json names, from npm's cache where it has them (npm ci asks
# the registry for nothing it already holds).
$(PEERS)/node_modules/.installed: $(PEERS)/package.json $(PEERS)/package-lock.json
	cd $(PEERS) && npm ci --prefer-offline --no-audit --no-fund --loglevel=error
	touch $@

sysdeps:
	bash .ci/system-packages.sh

clean:
	rm -rf $(VENV) $(PEERS)/node_modules
