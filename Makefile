# rocroof developer and demo entry points. Each target creates .venv on first use.
PY       ?= python3
VENV     ?= .venv
BIN      := $(VENV)/bin
SHARED   ?= ../shared
EXAMPLE  ?= examples/h200
AMD_EXAMPLE ?= $(SHARED)/fixtures/rocprof-compute/vcopy/MI300X_A1_rocpd
DEMO_DB  ?= demo/rocroof-demo.db
AMD_DB   ?= demo/rocroof-demo-amd.db

.PHONY: help demo demo-amd test test-large lint docs clean

## help: list these targets
help:
	@sed -n 's/^## \([a-z-]*\): /\1\t/p' $(MAKEFILE_LIST) | expand -t 14

# the runtime alone (what the demos need), and with the dev tools (what the tests need)
$(VENV)/.runtime: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.runtime

## demo: install the runtime, then ingest the example captures (examples/h200: llama.cpp on an H200) and print per-op reports
demo: $(VENV)/.runtime
	@test -e "$(EXAMPLE)" || { echo "rocroof demo: example capture not found at $(EXAMPLE)"; \
	  echo "  Point EXAMPLE=<capture dir> at any rocroof collect / rocprofv3 / Nsight output: make demo EXAMPLE=path"; exit 1; }
	@mkdir -p $(dir $(DEMO_DB)) && rm -f $(DEMO_DB) $(DEMO_DB)-wal $(DEMO_DB)-shm
	$(BIN)/rocroof ingest "$(EXAMPLE)" --db $(DEMO_DB)
	$(BIN)/rocroof runs --db $(DEMO_DB)
	@for r in $$($(BIN)/rocroof query "SELECT run_id FROM run ORDER BY run_id" --db $(DEMO_DB) --format csv | tail -n +2); do \
	  echo; echo "\$$ rocroof report --run $$r --by op"; $(BIN)/rocroof report --db $(DEMO_DB) --run $$r --by op || exit 1; done

## demo-amd: the same on AMD's recorded MI300X vcopy workload from ../shared/fixtures
demo-amd: $(VENV)/.runtime
	@test -d "$(AMD_EXAMPLE)" || { echo "rocroof demo-amd: $(AMD_EXAMPLE) not found (it comes with ../shared/fixtures)"; exit 1; }
	@mkdir -p $(dir $(AMD_DB)) && rm -f $(AMD_DB) $(AMD_DB)-wal $(AMD_DB)-shm
	$(BIN)/rocroof ingest "$(AMD_EXAMPLE)" --db $(AMD_DB) --label example=vcopy
	$(BIN)/rocroof report --db $(AMD_DB) --by dispatch
	$(BIN)/rocroof report --db $(AMD_DB) --by kernel --format markdown

## test: install, lint (ruff), then the test suite on every core (pytest-xdist) with mypy beside it
test: $(VENV)/.installed
	$(BIN)/ruff check plugin tests
	$(BIN)/ruff format --check plugin tests
	@out=$$(mktemp); $(BIN)/mypy > $$out 2>&1 & types=$$!; \
	echo "$(BIN)/mypy (beside the tests; its report follows them)"; \
	$(BIN)/python -m pytest -q -n auto; tests=$$?; \
	wait $$types; typed=$$?; echo "$(BIN)/mypy:"; cat $$out; rm -f $$out; \
	test $$tests -eq 0 && test $$typed -eq 0

## test-large: the slow robustness tests (SIGKILL during 10^5-dispatch ingests), excluded from make test
test-large: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m large

## lint: ruff (lint and format check) and mypy, without the tests
lint: $(VENV)/.installed
	$(BIN)/ruff check plugin tests
	$(BIN)/ruff format --check plugin tests
	$(BIN)/mypy

## docs: regenerate docs/schema.md from the schema and view definitions
docs: $(VENV)/.installed
	$(BIN)/python -m rocroof.store.docs > docs/schema.md

## clean: remove .venv, the demo databases and the tool caches
clean:
	rm -rf $(VENV) demo .pytest_cache .mypy_cache .ruff_cache
