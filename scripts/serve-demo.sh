#!/usr/bin/env bash
# Serve the demo: a Celery worker on the embedded filesystem broker, and the web server on
# http://127.0.0.1:8000. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var/celery/out var/celery/processed var/celery/control
.venv/bin/celery -A config worker --loglevel=WARNING --concurrency=1 --pool=solo &
worker=$!
trap 'kill $worker 2>/dev/null || true' EXIT INT TERM
echo "Seam is at http://127.0.0.1:8000  (API docs: /api/docs/, admin: /admin/)"
.venv/bin/python manage.py runserver 127.0.0.1:8000
