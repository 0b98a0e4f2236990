# Kernel Workbench. Two commands on a fresh machine:  make lab  (open the notebooks)  and  make test  (run everything).
SHELL := /bin/bash
PYTHON ?= python3
# Python keeps the bytecode it compiles (__pycache__, ignored by git) for every command here. A machine that sets
# PYTHONDONTWRITEBYTECODE (this project's CI image does) otherwise recompiles torch, numba, triton and plotly from
# source in every fresh process: `import torch, workbench, numba, triton, plotly` took 7.7 s of CPU without
# bytecode and 3.9 s with it, and `make test` starts dozens of processes (xdist workers, notebook kernels, ranks).
unexport PYTHONDONTWRITEBYTECODE
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
# Progress bars stay out of test and nbval output (the browser test turns them on: it checks what a learner sees).
# Drill attempts made by the tests and notebook 05 go to a throwaway progress store, not the learner's.
QUIET := WORKBENCH_PROGRESS=0 WORKBENCH_HOME=$$(mktemp -d)
# The browser test drives Debian's chromium. As root, the first `make test` installs it; as a normal user without
# it, the browser tests are skipped with one line saying how to enable them.
CHROMIUM := $(or $(WORKBENCH_CHROMIUM),/usr/bin/chromium)
IS_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo 1)

.PHONY: install lab test unit notebooks browser browser-deps lint gpu-check clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "Python >= 3.10 is required"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-compile -e '.[$(EXTRAS)]'
	rm -f $(VENV)/.installed-*
	touch $@

lab: install
	cd notebooks && ../$(BIN)/jupyter lab $(ROOT_FLAG) $(LAB_ARGS)

# Unit tests and notebooks in one pytest run, spread over $(JOBS) workers, and the browser test beside it (its
# output goes to BROWSER_LOG, shown after): run alone, the browser test left a third of the two cores idle (it waits
# on JupyterLab, Chromium and the kernel in turn), which the pytest workers now fill. Both must pass.
BROWSER_LOG := out/browser-test.log
test: install lint browser-deps
	@mkdir -p out
	$(BIN)/pytest -q tests/browser > $(BROWSER_LOG) 2>&1 & browser=$$!; \
	$(QUIET) $(BIN)/pytest -q -p no:cacheprovider -n $(JOBS) --dist loadfile $(NBVAL) tests notebooks \
	  --ignore=tests/browser; unit=$$?; \
	wait $$browser; rc=$$?; echo "---- tests/browser (it ran beside the run above; log: $(BROWSER_LOG))"; \
	cat $(BROWSER_LOG); [ $$unit = 0 ] && [ $$rc = 0 ]
	@if [ -x "$(CHROMIUM)" ]; then echo "make test: all passed"; \
	else echo "make test: all passed, browser tests skipped (no $(CHROMIUM): sudo bash scripts/install-chromium.sh)"; fi

# As root, install Debian's chromium when it is missing (once); as a normal user, leave it to the browser tests'
# skip line.
browser-deps:
	@if [ ! -x "$(CHROMIUM)" ] && [ -n "$(IS_ROOT)" ]; then bash scripts/install-chromium.sh; fi

lint: install
	$(BIN)/ruff check workbench kernels tests benchmarks

unit: install
	$(QUIET) $(BIN)/pytest -q tests --ignore=tests/browser

notebooks: install
	$(QUIET) $(PYTEST_NB) -q

browser: install browser-deps
	$(BIN)/pytest -q tests/browser

# The one script for a GPU machine: GPU tests, every notebook on the GPU, quick benchmarks (< 8 minutes on one H200).
gpu-check:
	bash scripts/gpu-check.sh

clean:
	rm -rf $(VENV) out .pytest_cache
