# The two commands that matter: `make demo` and `make test`. Both set themselves up.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.installed
NPM_STAMP := node_modules/.installed

.PHONY: setup test test-fast demo bench chromium clean

setup: $(PY_STAMP) $(NPM_STAMP) chromium

$(PY_STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e '.[dev]'
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

demo: setup
	$(PY) -m watercolour.cli demo

bench: setup
	$(PY) -m watercolour.cli bench render

clean:
	rm -rf $(VENV) node_modules out .pytest_cache
