#!/usr/bin/env bash
# Serve the demo (`make demo`): PostgreSQL (the machine's when DATABASE_URL is set, else an
# embedded server under var/postgres, started here and stopped on exit: config/embedded_postgres.py),
# migrated, with demo users; the sandbox of downstream systems on :8100; a Celery worker with its
# beat on Kombu's SQLAlchemy transport over that same database (restarted if it ever exits);
# half-finished runs seeded by replaying tickets with kills; and Seam on http://127.0.0.1:8000,
# with DEBUG off (config/settings/local.py): the pages people meet, the styled 404 and 500 among
# them. Ctrl-C (or TERM) stops everything it started, the embedded server last.
#
# SEAM_PORT (8000; SEAM_DEMO_PORT, its older name, still works) and SEAM_SANDBOX_PORT (8100) move
# Seam and the sandbox; SEAM_SANDBOX_URL (http://127.0.0.1:$SEAM_SANDBOX_PORT) names the sandbox
# outright, its port included; SEAM_DEMO_VAR (var: the embedded server's data, the logs, the
# beat's schedule) moves the demo's folder, as tests/test_demo_fresh.py does.
set -euo pipefail
cd "$(dirname "$0")/.."
export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-config.settings.local}"
# platformdirs warns when XDG_RUNTIME_DIR is unset (a root shell): the library's lock still works.
export PYTHONWARNINGS="${PYTHONWARNINGS:-ignore:XDG_RUNTIME_DIR}"
export SEAM_SANDBOX_URL="${SEAM_SANDBOX_URL:-http://127.0.0.1:${SEAM_SANDBOX_PORT:-8100}}"
sandbox_port="${SEAM_SANDBOX_URL##*:}"
port="${SEAM_PORT:-${SEAM_DEMO_PORT:-8000}}"
var="${SEAM_DEMO_VAR:-var}"
postgres_data="$var/postgres"
mkdir -p "$var/celery" "$var/log"

embedded=""
pids=()
stop() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ -n "$embedded" ]; then
    .venv/bin/python -m config.embedded_postgres stop --data "$postgres_data" || true
  fi
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${DATABASE_URL:-}" ]; then
  echo "Starting the demo's embedded PostgreSQL ($postgres_data, on a unix socket only)"
  embedded=1
  eval "$(.venv/bin/python -m config.embedded_postgres start --data "$postgres_data")"
  export DATABASE_URL
  echo "PostgreSQL: $DATABASE_URL"
fi
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py create_demo_users

.venv/bin/python manage.py runsandbox --port "$sandbox_port" > "$var/log/sandbox.log" 2>&1 &
pids+=($!)
# The demo's only worker (and its beat, whose sweep settles the seeded runs) is restarted
# whenever it exits, rather than leaving the demo without one.
scripts/supervise.sh .venv/bin/celery -A config worker --beat --schedule "$var/celery/beat-schedule" --loglevel=WARNING --concurrency=1 --pool=solo >> "$var/log/worker.log" 2>&1 &
pids+=($!)

for _ in $(seq 60); do
  curl -sf "$SEAM_SANDBOX_URL/sandbox/api/ledger/" > /dev/null && break
  sleep 0.5
done
echo "Seeding half-finished runs (each runner is killed mid-flow on purpose):"
.venv/bin/python manage.py seed_demo
echo
echo "Seam:    http://127.0.0.1:$port   (API docs: /api/docs/, admin: /admin/)"
echo "Sandbox: $SEAM_SANDBOX_URL/sandbox/   (the downstream systems' own state)"
# In the background and waited for, so that a TERM for this script is handled at once.
.venv/bin/python manage.py runserver "127.0.0.1:$port" &
pids+=($!)
wait "${pids[-1]}"
