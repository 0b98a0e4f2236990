# Kernel Workbench. Two commands on a fresh machine:  make lab  (open the notebooks)  and  make test  (run everything).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# On a machine with an NVIDIA driver, also install the CUDA 13 builds of cupy and numba-cuda (extra "gpu").
EXTRAS := browser$(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo ,gpu)
comma := ,
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
# JupyterLab refuses to run as root without --allow-root (containers, CI).
ROOT_FLAG := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
NBVAL := --nbval-lax --nbval-current-env --nbval-cell-timeout=600
PYTEST_NB := $(BIN)/pytest -p no:cacheprovider $(NBVAL) notebooks/
# Test workers for `make test` (pytest-xdist). --dist loadfile keeps a notebook's cells (which share one kernel)
# and a test file's cached checks on one worker.
JOBS ?= 2

.PHONY: install lab test unit notebooks browser lint gpu-check clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 is required"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -e '.[$(EXTRAS)]'
	rm -f $(VENV)/.installed-*
	touch $@

lab: install
	cd notebooks && ../$(BIN)/jupyter lab $(ROOT_FLAG) $(LAB_ARGS)

# Unit tests and notebooks in one pytest run, spread over $(JOBS) workers; then the browser test.
test: install lint
	$(BIN)/pytest -q -p no:cacheprovider -n $(JOBS) --dist loadfile $(NBVAL) tests notebooks --ignore=tests/browser
	$(BIN)/pytest -q tests/browser
	@echo "make test: all passed"

lint: install
	$(BIN)/ruff check workbench kernels tests benchmarks

unit: install
	$(BIN)/pytest -q tests --ignore=tests/browser

notebooks: install
	$(PYTEST_NB) -q

browser: install
	$(BIN)/pytest -q tests/browser

# The one script for a GPU machine: GPU tests, every notebook on the GPU, quick benchmarks (< 8 minutes on one H200).
gpu-check:
	bash scripts/gpu-check.sh

clean:
	rm -rf $(VENV) out .pytest_cache
