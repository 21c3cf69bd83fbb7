# torchconform's two entry points (see README.md):
#   make demo   the main job on the embedded defaults (reference device, SQLite, generated site)
#   make test   the whole test suite
# Both create or refresh the local virtual environment .venv themselves.
# make vision-test runs the tests that need torchvision and timm in a second environment,
# .venv-vision, which it creates itself (its own torch: see the vision section below).

PYTHON ?= python3
VENV   ?= .venv
# This machine kind has a CPU build of torch on local disk; a bare `torch`
# requirement would pull a multi-GB CUDA build.  Override to test other torches.
TORCH_SPEC ?= torch==2.13.0
# The tests also need the optional components' packages: PostgreSQL driver,
# Playwright, transformers (model zoo) and Ray (sweep engine).
TEST_EXTRAS ?= dev,postgres,zoo,ray
PYTEST_ARGS ?= -n 2

BIN := $(VENV)/bin

.PHONY: venv demo test services vision-venv vision-test clean

# Each install step says what it does and roughly how long it takes (timed on 2 busy cores), then
# runs quietly: pip's -qq keeps errors and drops warnings, among them setuptools' "Package would be
# ignored" for every data folder (refdev/csrc, ...) while it builds the editable install.
$(BIN)/python:
	@echo "make: creating the virtual environment $(VENV) and updating its pip (about 25 s)"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -qq --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml setup.py
	@$(BIN)/python -c "import torch" 2>/dev/null || { \
	  echo "make: installing $(TORCH_SPEC), CPU build (about 1.5 minutes, once)"; \
	  $(BIN)/pip install -qq "$(TORCH_SPEC)"; }
	@echo "make: installing torchconform (editable) and its dependencies (about 40 s, once)"
	@$(BIN)/pip install -qq -e .
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed tests/constraints.txt
	@# Keep the installed torch whatever the extras ask for (no surprise CUDA build).
	@echo "make: installing the test extras ($(TEST_EXTRAS); Ray and transformers are large: minutes, once)"
	@$(BIN)/pip install -qq -c tests/constraints.txt -e ".[$(TEST_EXTRAS)]" "torch==$$($(BIN)/python -c 'import torch; print(torch.__version__.split("+")[0])')"
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(BIN)/torchconform demo

# Installs what the tests need from Debian/PyPI (PostgreSQL, Chromium) when it
# is missing; each tests/services/*.sh handles one service.
services: $(VENV)/.installed-test
	@for s in tests/services/*.sh; do [ -f "$$s" ] && VENV=$(VENV) bash "$$s" || exit 1; done

test: services
	$(BIN)/python -m pytest $(PYTEST_ARGS) $(ARGS)

# -- the vision environment ---------------------------------------------------------------
# torchvision only imports beside the torch it was built for, and the one this machine kind
# has on local disk goes with the CUDA build of torch 2.14.1 (no GPU needed to import or run
# it on CPU).  So the torchvision/timm zoo gets its own venv rather than swapping the main
# one's torch.  timm is pinned like transformers in tests/constraints.txt: its model list
# changes between releases, and docs/zoo-vision.md's figures are for this one.
VISION_VENV  ?= .venv-vision
VISION_TORCH ?= torch==2.14.1 torchvision==0.29.1
VISION_TIMM  ?= timm==1.0.29
# Exactly the tests that need torchvision/timm (they skip in .venv).
VISION_TESTS ?= tests/test_zoo_vision.py
VBIN := $(VISION_VENV)/bin

$(VBIN)/python:
	@echo "make: creating the virtual environment $(VISION_VENV) and updating its pip (about 25 s)"
	@$(PYTHON) -m venv $(VISION_VENV)
	@$(VBIN)/python -m pip install -qq --upgrade pip

$(VISION_VENV)/.installed: $(VBIN)/python pyproject.toml setup.py tests/constraints.txt
	@$(VBIN)/python -c "import torchvision, timm" 2>/dev/null || { \
	  echo "make: installing $(VISION_TORCH) $(VISION_TIMM) from local disk (5.5 GB with CUDA libraries: about 2 minutes, once)"; \
	  $(VBIN)/pip install -qq $(VISION_TORCH) $(VISION_TIMM); }
	@# As for .installed-test: name the installed torch so no extra swaps it for another build.
	@echo "make: installing torchconform (editable, dev extra) beside that torch (about 40 s, once)"
	@$(VBIN)/pip install -qq -c tests/constraints.txt -e ".[dev]" "torch==$$($(VBIN)/python -c 'import torch; print(torch.__version__.split("+")[0])')"
	@touch $@

vision-venv: $(VISION_VENV)/.installed

vision-test: $(VISION_VENV)/.installed
	$(VBIN)/python -m pytest $(VISION_TESTS) $(ARGS)

clean:
	rm -rf $(VENV) $(VISION_VENV) site torchconform.db torchconform.db-wal torchconform.db-shm
