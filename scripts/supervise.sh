#!/usr/bin/env bash
# supervise.sh COMMAND [ARGS...]: run COMMAND, and again whenever it exits (after 2 s, logged on
# stderr), until this script is sent TERM or INT, which it passes on to COMMAND and waits for.
# scripts/serve-demo.sh keeps the demo's only Celery worker (with its beat) alive with it.
set -uo pipefail
child=""
stop() {
  [ -n "$child" ] && kill -TERM "$child" 2>/dev/null && wait "$child" 2>/dev/null
  exit 0
}
trap stop TERM INT
while true; do
  "$@" &
  child=$!
  status=0
  wait "$child" || status=$?
  # A signal for this script interrupts `wait` and runs `stop`, which never returns here.
  echo "$(date -u +%FT%TZ) supervise: $1 (pid $child) exited with status $status; restarting in 2 s" >&2
  sleep 2 &
  wait $! || true
done
