# The front door. Every target's logic lives in Python; `make help` lists them.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
FEES := $(VENV)/bin/fees
RAW ?= data/raw
DATA ?= data/warehouse
REGISTRY ?= data/exchanges.csv
PORT ?= 8000
WORKERS ?= 1
ROWS ?= 1000000
OUT ?= data/synth/$(ROWS)
FUZZ_EXAMPLES ?= 1000
SOAK_SECONDS ?= 300
export FEES_DATA_DIR ?= $(DATA)
export FEES_ACCOUNTS_FILE ?= data/demo-accounts.json
UV_VERSION := 0.13.9
# Every Python process keeps its compiled modules (in __pycache__, ignored by git), even where
# the environment says not to: otherwise each server and ingest the suite starts compiles the
# project again, and pytest rewrites every test module and plugin module at every run.
unexport PYTHONDONTWRITEBYTECODE

.DEFAULT_GOAL := help
.PHONY: help setup run serve test lint fuzz soak cluster-soak ingest sql price synth embedded lines coverage openapi bench bench-pricing \
	bench-ingest \
	bench-workers screenshots clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

# uv installs the pinned dependencies in a third of pip's time (30 s against 91 on a fresh
# machine); it compiles them to bytecode as pip does, so no process compiles them again.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) -e ".[dev]"
	touch $@

setup: $(VENV)/.installed ## Create .venv and install the pinned dependencies

run: setup ## Ingest the embedded data if nothing servable is published, then serve on :$(PORT)
	$(FEES) ingest --raw $(RAW) --data $(DATA) --registry $(REGISTRY) --if-stale
	FEES_DOCS_KEY=demo-key $(FEES) serve --port $(PORT) --workers $(WORKERS)

test: setup ## Lint, type-check and run every test
	$(PY) -m ruff check ingest service tools tests
	$(PY) -m mypy
	$(PY) -m pytest

lint: setup ## Lint and type-check only
	$(PY) -m ruff check ingest service tools tests
	$(PY) -m mypy

fuzz: setup ## Fuzz every operation against the OpenAPI document, FUZZ_EXAMPLES cases each
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -n 0 -s tests/test_fuzz.py

ingest: setup ## Validate $(RAW) and publish a new version of $(DATA) (if anything changed)
	$(FEES) ingest --raw $(RAW) --data $(DATA) --registry $(REGISTRY) $(if $(STRICT),--strict)

sql: setup ## Run Q="select ..." against the current version (view `fees`, `exchanges`)
	$(FEES) sql "$$Q" --data $(DATA)

price: setup ## Price FILLS=fills.csv on the current version of $(DATA), to PRICED (default: stdout)
	@$(FEES) price "$(FILLS)" --data $(DATA) $(if $(PRICED),--out "$(PRICED)")

synth: setup ## Write ROWS synthetic raw records to OUT (deterministic; not committed)
	$(FEES) synth --rows $(ROWS) --out $(OUT) --registry $(REGISTRY)

embedded: setup ## Rebuild the embedded dataset data/raw from the sourced facts in data/facts
	$(PY) -m tools.embedded

lines: setup ## List VENUE's fee lines that may be one item (decide: python -m tools.lines join|apart)
	$(PY) -m tools.lines suggest $(VENUE)

coverage: ingest ## Write docs/data-coverage.md: what the current version of $(DATA) covers
	$(FEES) coverage --data $(DATA) --out docs/data-coverage.md --readme README.md

bench-ingest: setup ## Ingest throughput vs a plain DuckDB COPY, and peak memory
	$(PY) -m tools.bench_ingest

soak: setup ## SOAK_SECONDS of load on every endpoint while a version is published every 30 s
	$(PY) -m tools.soak --seconds $(SOAK_SECONDS)

cluster-soak: setup ## SOAK_SECONDS through HAProxy to 3 replicas, Redis and S3, with a kill and restarts
	$(PY) -m tools.cluster --seconds $(SOAK_SECONDS)

bench: setup ## HTTP benchmarks (wrk) at 100k, 1M and 10M records, then pricing at 10M
	$(PY) -m tools.bench
	$(PY) -m tools.bench_pricing

bench-pricing: setup ## Pricing alone: fee-estimates of 1k and 100k fills, fees price on 1M
	$(PY) -m tools.bench_pricing

bench-workers: setup ## Discovery throughput (wrk) with 1 and 2 server processes, 3 runs each
	$(PY) -m tools.bench_workers

screenshots: setup ## Write docs/explore-*.png: the fee explorer's three views, over the embedded data
	$(FEES) ingest --raw $(RAW) --data $(DATA) --registry $(REGISTRY) --if-stale
	$(PY) -m tools.screenshots

clean: ## Remove the venv, caches and generated data (not data/raw)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache $(DATA) data/synth .bench .soak .cluster

openapi: setup ## Write service/openapi.json from the declarations (service/api.py, service/operations.json)
	$(PY) -m service.api
