# The two commands: `make run` and `make test`. Everything else is a helper of theirs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: run test test-sqlite test-postgres system-deps lint sdk-compat sdk-package bench demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Reinstall when the dependency list changes.
$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.dev: pyproject.toml sdk/pyproject.toml $(VENV)/.runtime
	$(BIN)/pip install -q -e '.[dev]' -e ./sdk
	touch $@

## make run: set up, migrate the embedded SQLite database, create the demo merchant and the demo console users
## (operator@kasir.demo, merchant@kasir.demo; it prints their passwords and the sign-in URL), serve on :8000
run: $(VENV)/.runtime
	$(BIN)/kasir db upgrade
	$(BIN)/kasir demo-merchant
	exec $(BIN)/kasir serve --host 127.0.0.1 --port 8000

## make test: install what the tests need, then the whole suite on SQLite and on PostgreSQL
test: $(VENV)/.dev system-deps
	$(BIN)/ruff check src tests migrations sdk bench examples scripts
	$(BIN)/mypy
	cd sdk && ../$(BIN)/mypy
	$(MAKE) --no-print-directory sdk-compat
	$(MAKE) --no-print-directory sdk-package
	$(MAKE) --no-print-directory test-sqlite
	$(MAKE) --no-print-directory test-postgres

test-sqlite:
	KASIR_TEST_DB=sqlite $(BIN)/pytest -q $(PYTEST_ARGS)

test-postgres:
	KASIR_TEST_DB=postgres $(BIN)/pytest -q $(PYTEST_ARGS)

system-deps:
	@scripts/system-deps.sh

lint: $(VENV)/.dev
	$(BIN)/ruff check src tests migrations sdk bench examples scripts
	$(BIN)/mypy
	cd sdk && ../$(BIN)/mypy
	$(MAKE) --no-print-directory sdk-compat

## the SDK promises Python 3.10: ruff (target py310) and vermin refuse anything newer in sdk/src
sdk-compat:
	$(BIN)/python scripts/check_sdk.py compat

## the SDK's sdist and wheel (python -m build, no download), installed into a fresh venv and imported
sdk-package:
	$(BIN)/python scripts/check_sdk.py package

clean:
	rm -rf $(VENV) var .pytest_cache

## make bench: the benchmarks of bench/ (BENCH_DB=postgres, BENCH_WORKERS=N, BENCH_SECONDS=S)
bench: $(VENV)/.dev
	@scripts/system-deps.sh bench
	$(BIN)/python bench/run.py
	$(BIN)/python bench/console.py

## make demo: against a running `make run`, a merchant goes through every product
demo: $(VENV)/.dev
	NO_PROXY=127.0.0.1,localhost,$$NO_PROXY $(BIN)/python examples/demo.py
