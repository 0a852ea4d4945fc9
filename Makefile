# rocroof developer and demo entry points. Each target creates .venv on first use.
PY       ?= python3
VENV     ?= .venv
BIN      := $(VENV)/bin
SHARED   ?= ../shared
EXAMPLE  ?= $(SHARED)/fixtures/rocprof-compute/vcopy/MI300X_A1_rocpd
DEMO_DB  ?= demo/rocroof-demo.db

.PHONY: demo test lint docs clean

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

## demo: install, then ingest the example capture and print its reports (no GPU needed)
demo: $(VENV)/.installed
	@test -d "$(EXAMPLE)" || { echo "rocroof demo: example capture not found at $(EXAMPLE)"; \
	  echo "  It is AMD's recorded MI300X vcopy workload from ../shared/fixtures (see README, 'Example data')."; \
	  echo "  Point EXAMPLE=<capture dir> at any rocprofv3 / rocprofiler-compute output: make demo EXAMPLE=path"; exit 1; }
	@mkdir -p $(dir $(DEMO_DB)) && rm -f $(DEMO_DB) $(DEMO_DB)-wal $(DEMO_DB)-shm
	$(BIN)/rocroof ingest "$(EXAMPLE)" --db $(DEMO_DB) --label example=vcopy
	$(BIN)/rocroof report --db $(DEMO_DB) --by dispatch
	$(BIN)/rocroof report --db $(DEMO_DB) --by kernel --format markdown

## test: install, then lint (ruff), type-check (mypy) and run the test suite
test: $(VENV)/.installed
	$(BIN)/ruff check plugin tests
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

## docs: regenerate docs/schema.md from the schema and view definitions
docs: $(VENV)/.installed
	$(BIN)/python -m rocroof.store.docs > docs/schema.md

clean:
	rm -rf $(VENV) demo .pytest_cache .mypy_cache .ruff_cache
