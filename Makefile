# The README's vocabulary. `make demo` and `make test` work on a fresh machine of this kind.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV := .venv
BIN := $(VENV)/bin
# Django 6 needs Python 3.12 or newer: take the first one found, including pyenv's.
PYTHON ?= $(shell for p in python3.13 python3.12 $(HOME)/.pyenv/versions/3.13*/bin/python3 $(HOME)/.pyenv/versions/3.12*/bin/python3 python3; do \
	  if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then command -v $$p; break; fi; done)
STAMP := $(VENV)/.installed

.PHONY: help install demo test lint typecheck pytest worker beat bench services clean

help:
	@echo "make demo   install, migrate, create demo users, start the sandbox, seed killed runs, serve http://127.0.0.1:8000"
	@echo "make test   ruff, mypy and pytest against the machine's PostgreSQL and Redis"
	@echo "make lint | worker | beat | bench"

$(STAMP): pyproject.toml requirements.lock
	@test -n "$(PYTHON)" || { echo "ERROR: no Python 3.12+ found (Django 6 needs it)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	DJANGO_SETTINGS_MODULE=config.settings.local $(BIN)/python manage.py migrate --noinput
	DJANGO_SETTINGS_MODULE=config.settings.local $(BIN)/python manage.py create_demo_users
	DJANGO_SETTINGS_MODULE=config.settings.local scripts/serve-demo.sh

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	DJANGO_SETTINGS_MODULE=config.settings.test $(BIN)/mypy .

services:
	@$(BIN)/python scripts/check_services.py

pytest: install services
	$(BIN)/pytest -p no:cacheprovider $(PYTEST_ARGS)

test: lint typecheck pytest

worker: install
	$(BIN)/celery -A config worker --loglevel=INFO --concurrency=2

beat: install
	$(BIN)/celery -A config beat --loglevel=INFO

bench: install services
	DJANGO_SETTINGS_MODULE=config.settings.test $(BIN)/python bench/journal.py
	DJANGO_SETTINGS_MODULE=config.settings.test $(BIN)/python bench/reconcile.py

clean:
	rm -rf $(VENV) var db.sqlite3* .pytest_cache .mypy_cache .ruff_cache
