#!/usr/bin/env bash
# Serve the demo: the sandbox of downstream systems on :8100, half-finished runs seeded by
# replaying tickets with kills, a Celery worker on the embedded filesystem broker (restarted if it
# ever exits), and Seam on
# http://127.0.0.1:8000. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var/celery/out var/celery/processed var/celery/control var/log
export SEAM_SANDBOX_URL="${SEAM_SANDBOX_URL:-http://127.0.0.1:8100}"
sandbox_port="${SEAM_SANDBOX_URL##*:}"

.venv/bin/python manage.py runsandbox --port "$sandbox_port" > var/log/sandbox.log 2>&1 &
sandbox=$!
# The demo's only worker (and its beat, whose sweep settles the seeded runs) is restarted
# whenever it exits, rather than leaving the demo without one.
scripts/supervise.sh .venv/bin/celery -A config worker --beat --schedule var/celery/beat-schedule --loglevel=WARNING --concurrency=1 --pool=solo >> var/log/worker.log 2>&1 &
worker=$!
trap 'kill $sandbox $worker 2>/dev/null || true' EXIT INT TERM

for _ in $(seq 60); do
  curl -sf "$SEAM_SANDBOX_URL/sandbox/api/ledger/" > /dev/null && break
  sleep 0.5
done
echo "Seeding half-finished runs (each runner is killed mid-flow on purpose):"
.venv/bin/python manage.py seed_demo
echo
echo "Seam:    http://127.0.0.1:8000   (API docs: /api/docs/, admin: /admin/)"
echo "Sandbox: $SEAM_SANDBOX_URL/sandbox/   (the downstream systems' own state)"
.venv/bin/python manage.py runserver 127.0.0.1:8000
