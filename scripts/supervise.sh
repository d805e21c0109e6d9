#!/usr/bin/env bash
# supervise.sh COMMAND [ARGS...]: run COMMAND, and again whenever it exits (after 2 s, logged on
# stderr), until this script is sent TERM or INT, which it passes on to COMMAND as TERM and waits
# for, SEAM_SUPERVISE_GRACE seconds (15) at most: a Celery worker finishes the task in hand first,
# and one still busy then is killed, so that Ctrl-C on the demo always ends. Its task is not lost:
# unacknowledged, it comes back from the broker, and the database holds what was done.
# scripts/serve-demo.sh keeps the demo's only Celery worker (with its beat) alive with it.
set -uo pipefail
command="$1"
child=""
grace="${SEAM_SUPERVISE_GRACE:-15}"
stop() {
  trap '' TERM INT  # a second signal (serve-demo.sh's TERM after the terminal's INT) changes nothing
  if [ -n "$child" ] && kill -TERM "$child" 2>/dev/null; then
    for _ in $(seq $((grace * 5))); do
      kill -0 "$child" 2>/dev/null || break
      sleep 0.2
    done
    if kill -KILL "$child" 2>/dev/null; then
      echo "$(date -u +%FT%TZ) supervise: $command (pid $child) still running ${grace} s after TERM; killed" >&2
    fi
    wait "$child" 2>/dev/null
  fi
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
