# The two commands: `make run` and `make test`. Everything else is a helper of theirs.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Where `make run` serves (`make run PORT=8080`, `make run HOST=0.0.0.0`) and where `make demo` finds it: the
# demo merchant's token script and the console's sign-in name the same address (unless KASIR_PUBLIC_URL is set).
HOST ?= 127.0.0.1
PORT ?= 8000
# The address a browser on this machine reaches the server at (a server on every interface is on 127.0.0.1 too).
KASIR_URL ?= http://$(if $(filter 0.0.0.0,$(HOST)),127.0.0.1,$(HOST)):$(PORT)
# The fast lane's parallel workers (pytest-xdist): one per core.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# The lanes (docs/contributor/tests.md): the fast lane in parallel, then the slow lane (subprocesses,
# browsers, kills, fuzzing) one test at a time. Exit status 5 (no test selected, as a -k may leave a lane
# empty) is not a failure.
FAST_LANE = $(BIN)/pytest -q -m "not slow" -n $(JOBS) $(PYTEST_ARGS) || [ $$? -eq 5 ]
SLOW_LANE = $(BIN)/pytest -q -m slow $(PYTEST_ARGS) || [ $$? -eq 5 ]

.PHONY: run test test-fast test-sqlite test-postgres system-deps lint sdk-compat sdk-package bench demo clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Reinstall when the dependency list changes.
$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

# What `make demo` needs: Kasir's runtime (httpx, rich) and the SDK, not the test toolchain.
$(VENV)/.demo: sdk/pyproject.toml $(VENV)/.runtime
	$(BIN)/pip install -q -e ./sdk
	touch $@

$(VENV)/.dev: pyproject.toml sdk/pyproject.toml $(VENV)/.runtime
	$(BIN)/pip install -q -e '.[dev]' -e ./sdk
	touch $@

## make run: set up, migrate the embedded SQLite database, create the demo merchant and the demo console users
## (operator@kasir.demo, merchant@kasir.demo; it prints their passwords and the sign-in URL), serve on
## 127.0.0.1:8000, or where `make run HOST=... PORT=...` says
run: $(VENV)/.runtime
	$(BIN)/kasir db upgrade
	$(BIN)/kasir demo-merchant --host $(HOST) --port $(PORT)
	exec $(BIN)/kasir serve --host $(HOST) --port $(PORT)

## make test: install what the tests need, then the whole suite on SQLite and on PostgreSQL
test: $(VENV)/.dev system-deps node-deps snapapi-deps
	$(BIN)/ruff check src tests migrations sdk bench examples scripts
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy
	cd sdk && ../$(BIN)/mypy
	$(MAKE) --no-print-directory sdk-compat
	$(MAKE) --no-print-directory sdk-package
	$(MAKE) --no-print-directory test-sqlite
	$(MAKE) --no-print-directory test-postgres

test-sqlite:
	KASIR_TEST_DB=sqlite $(FAST_LANE)
	KASIR_TEST_DB=sqlite $(SLOW_LANE)

test-postgres:
	KASIR_TEST_DB=postgres $(FAST_LANE)
	KASIR_TEST_DB=postgres $(SLOW_LANE)

## make test-fast: the fast lane alone (in-process, in parallel) on SQLite and on PostgreSQL: minutes, not half an hour
test-fast: $(VENV)/.dev system-deps
	KASIR_TEST_DB=sqlite $(FAST_LANE)
	KASIR_TEST_DB=postgres $(FAST_LANE)

system-deps:
	@scripts/system-deps.sh

# openapi-typescript and tsc for tests/test_openapi_typescript.py, at the versions of their lock file, from the
# npm registry (through npm's cache) into the folder's node_modules: the test itself runs offline.
TS_CHECK := tests/support/typescript
.PHONY: node-deps
node-deps: $(TS_CHECK)/node_modules/.installed

$(TS_CHECK)/node_modules/.installed: $(TS_CHECK)/package.json $(TS_CHECK)/package-lock.json | system-deps
	npm ci --prefix $(TS_CHECK) --no-audit --no-fund --loglevel=error
	touch $@

# snapapi 0.1.9 (PyPI), a SNAP toolkit nobody here wrote, whose symmetric signer tests/payouts/test_snapapi.py runs
# to sign requests Kasir must accept: it pins starlette<0.47, which Kasir's FastAPI does not take, so it gets a
# virtual environment of its own, installed here (pip, from the registry); the test itself runs offline.
SNAPAPI_VENV := .venv-snapapi
.PHONY: snapapi-deps
snapapi-deps: $(SNAPAPI_VENV)/.installed

$(SNAPAPI_VENV)/.installed:
	$(PYTHON) -m venv $(SNAPAPI_VENV)
	$(SNAPAPI_VENV)/bin/pip install -q snapapi==0.1.9
	touch $@

lint: $(VENV)/.dev
	$(BIN)/ruff check src tests migrations sdk bench examples scripts
	$(BIN)/ruff format --check src tests
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
	rm -rf $(VENV) $(SNAPAPI_VENV) var .pytest_cache $(TS_CHECK)/node_modules

## make bench: the benchmarks of bench/ (BENCH_DB=postgres, BENCH_WORKERS=N, BENCH_SECONDS=S)
bench: $(VENV)/.dev
	@scripts/system-deps.sh bench
	$(BIN)/python bench/run.py
	$(BIN)/python bench/console.py

## make soak: the crash soak of scripts/soak.py on SQLite, then on PostgreSQL (SOAK_DB=sqlite|postgres for one;
## SOAK_KILLS, SOAK_PAYMENTS, SOAK_WORKERS, ...: see the script); writes bench/results/soak-<db>.json and .md
.PHONY: soak
soak: $(VENV)/.dev
	@scripts/system-deps.sh soak
	for db in $${SOAK_DB:-sqlite postgres}; do SOAK_DB=$$db $(BIN)/python scripts/soak.py || exit 1; done

## make soak-tenants: one hostile merchant beside a good one (scripts/soak_tenants.py), on SQLite, then on PostgreSQL
## (TENANTS_DB=sqlite|postgres for one; TENANTS_GOOD, TENANTS_HOSTILE, ...: see the script); as root (a mount
## namespace per process); writes bench/results/<date>-tenants-<db>.json and .md
.PHONY: soak-tenants
soak-tenants: $(VENV)/.dev
	@scripts/system-deps.sh soak
	for db in $${TENANTS_DB:-sqlite postgres}; do TENANTS_DB=$$db $(BIN)/python scripts/soak_tenants.py || exit 1; done

## make fuzz: Schemathesis, every phase (stateful too), signed, against `kasir serve` on SQLite, then on PostgreSQL
## (FUZZ_DB=sqlite|postgres for one), for FUZZ_SECONDS (480) each, new seeds each round (FUZZ_SEED to repeat
## one); writes bench/results/<date>-fuzz-<db>.md and .json; fails on any 5xx
.PHONY: fuzz
fuzz: $(VENV)/.dev system-deps
	status=0; for db in $${FUZZ_DB:-sqlite postgres}; do \
	  KASIR_TEST_DB=$$db KASIR_FUZZ_SECONDS=$${FUZZ_SECONDS:-480} KASIR_FUZZ_SEED=$${FUZZ_SEED:-} \
	  KASIR_FUZZ_RESULTS=bench/results/$$(date -u +%F)-fuzz-$$db \
	  $(BIN)/pytest -q -p no:randomly -m slow tests/test_api_fuzz.py -k for_a_while || status=1; \
	done; exit $$status

## make demo: against a running `make run` (the same PORT and HOST), a merchant goes through every product
demo: $(VENV)/.demo
	KASIR_URL=$(KASIR_URL) NO_PROXY=127.0.0.1,localhost,$$NO_PROXY $(BIN)/python examples/demo.py
