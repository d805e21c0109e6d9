"""How long a dead run waits before a person sees it: from the moment its process dies to its
escalation appearing in the queue, with the default settings and with shortened ones.

One run, on a database of its own, against a real sandbox subprocess, real `celery worker` and
`celery beat` processes (as `make worker` and `make beat` start them) on Redis (database 12
unless SEAM_BENCH_REDIS_URL says otherwise, emptied before and after), measures per round:

1. a scripted ticket (T-40912, returns) replayed in a child process (`manage.py replay_ticket
   --child`) that is SIGKILLed between the payments provider's acceptance of its second write
   and the commit of that write's outcome: an intent is left open, the refund really happened;
2. from the child's death (its exit, seen by this process), polling every 50 ms through the
   queue's own selector (`console.selectors.queue_runs`, what GET / reads): when the run first
   appears in the queue as stuck (running, silent past SEAM_STALE_AFTER_SECONDS), and when its
   escalation appears (the sweep asked the sandbox about the open intent, settled it, and the
   task's policy escalated the run: `awaiting_person`).

The expected latency is the stale threshold plus up to one sweep interval (beat's phase against
the moment of death is arbitrary) plus the sweep's own work; the baseline is that budget,
SEAM_STALE_AFTER_SECONDS + SEAM_SWEEP_INTERVAL_SECONDS, and measured / budget is printed. It is
measured with the defaults (60 s and 10 s) and with shortened settings (5 s and 1 s) to show
that it follows the settings.

    DJANGO_SETTINGS_MODULE=config.settings.test .venv/bin/python -m bench.recovery [--json]

The database, `seam_bench_recovery` unless `--database` says otherwise, is created, migrated and
dropped at the end unless `--keep`. `--json` prints only a JSON object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.journal import BenchError, progress
from bench.reconcile import DEFAULT_REDIS_URL, drop_database, setup_django
from devtools.processes import Fleet, ProcessFailed, emptied_redis, manage_py, running_sandbox

TICKET = "T-40912"
KILL_FLAG = ("--kill-between-accept-and-record", "2")
TENANT = "bench-recovery"
POLL_S = 0.05
# (name, SEAM_STALE_AFTER_SECONDS, SEAM_SWEEP_INTERVAL_SECONDS); None: the settings' defaults.
SETTINGS = [("default", None, None), ("short", 5.0, 1.0)]


def kill_a_run(env: dict[str, str]) -> tuple[Any, float, dt.datetime]:
    """Replay the ticket in a child that is SIGKILLed mid-flow. Returns the run, the monotonic
    time of death as seen here and the wall-clock one."""
    from journal.models import IntentStatus, Run

    external_id = f"bench-recovery-{uuid.uuid4().hex[:10]}"
    child = manage_py(
        "replay_ticket",
        TICKET,
        "--child",
        "--tenant",
        TENANT,
        "--external-id",
        external_id,
        *KILL_FLAG,
        env=env,
    )
    died, died_at = time.monotonic(), dt.datetime.now(dt.UTC)
    if child.returncode != -signal.SIGKILL:
        raise BenchError(f"the runner exited with {child.returncode}, not SIGKILL:\n{child.stderr[-2000:]}")
    run = Run.objects.filter(tenant__slug=TENANT, external_id=external_id).first()
    if run is None or not run.intents.filter(status=IntentStatus.INTENDED).exists():
        raise BenchError("the killed run left no open intent")
    return run, died, died_at


def wait_for_escalation(run: Any, *, died: float, timeout: float, fleet: Fleet) -> dict[str, Any]:
    from django.utils import timezone

    from console.selectors import QueueFilters, queue_runs
    from journal.models import Tenant

    tenant = Tenant.objects.get(slug=TENANT)
    stuck_s: float | None = None
    while True:
        elapsed = time.monotonic() - died
        listed = (
            queue_runs(tenant=tenant, user=None, filters=QueueFilters(), now=timezone.now())
            .filter(pk=run.pk)
            .values("awaiting_person", "outcome_reason")
            .first()
        )
        if listed is not None and stuck_s is None:
            stuck_s = elapsed
        if listed is not None and listed["awaiting_person"]:
            return {"stuck_s": stuck_s, "escalated_s": elapsed, "reason": listed["outcome_reason"]}
        if elapsed > timeout:
            raise BenchError(f"run {run.pk} not escalated within {timeout:.0f} s\n{fleet.logs()}")
        fleet.check_alive()
        time.sleep(POLL_S)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from django.conf import settings
    from django.test import override_settings

    broker = os.environ.get("SEAM_BENCH_REDIS_URL", DEFAULT_REDIS_URL)
    url = setup_django(args.database, broker=broker)
    defaults = (float(settings.SEAM_STALE_AFTER_SECONDS), float(settings.SEAM_SWEEP_INTERVAL_SECONDS))
    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        with (
            emptied_redis(broker) as client,
            running_sandbox(url) as (sandbox, _process),
            tempfile.TemporaryDirectory() as logs,
        ):
            progress(f"sandbox at {sandbox}")
            base_env = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "config.settings.test",
                "DATABASE_URL": url,
                "CELERY_BROKER_URL": broker,
                "SEAM_SANDBOX_URL": sandbox,
                "DJANGO_CONN_MAX_AGE": "60",
                "DJANGO_DEBUG": "false",
                "PYTHONUNBUFFERED": "1",
            }
            for name, stale, interval in SETTINGS:
                if args.only and name not in args.only:
                    continue
                env = dict(base_env)
                for key in ("SEAM_STALE_AFTER_SECONDS", "SEAM_SWEEP_INTERVAL_SECONDS"):
                    env.pop(key, None)  # the defaults are the settings' own, not this shell's
                if stale is not None:
                    env["SEAM_STALE_AFTER_SECONDS"] = str(stale)
                    env["SEAM_SWEEP_INTERVAL_SECONDS"] = str(interval)
                threshold, sweep = (stale, interval) if stale is not None else defaults
                assert threshold is not None and sweep is not None
                budget = threshold + sweep
                rounds = args.rounds if name == "default" else args.short_rounds
                progress(f"{name}: stale after {threshold:g} s, sweep every {sweep:g} s; {rounds} round(s)")
                client.flushdb()
                fleet = Fleet(env=env, logs_dir=Path(logs) / name)
                fleet.logs_dir.mkdir()
                latencies = []
                try:
                    # As `make worker` and `make beat` start them.
                    fleet.start("worker", "worker", "--concurrency=2", "--without-gossip", "--without-mingle")
                    fleet.start("beat", "beat", f"--schedule={fleet.logs_dir / 'beat-schedule'}")
                    fleet.wait_ready("worker")
                    with override_settings(SEAM_STALE_AFTER_SECONDS=threshold):
                        for n in range(rounds):
                            run, died, died_at = kill_a_run(env)
                            seen = wait_for_escalation(run, died=died, timeout=budget * 3 + 60, fleet=fleet)
                            progress(
                                f"  round {n + 1}: stuck in the queue after {seen['stuck_s']:.1f} s, "
                                f"escalated ({seen['reason']}) after {seen['escalated_s']:.1f} s"
                            )
                            # The clock of "stuck" starts at the run's last heartbeat, a little before its death.
                            heartbeat_s = (died_at - run.last_heartbeat_at).total_seconds()
                            latencies.append(
                                {
                                    **seen,
                                    "last_heartbeat_before_death_s": heartbeat_s,
                                    "died_at": died_at.isoformat(timespec="seconds"),
                                }
                            )
                finally:
                    fleet.stop_all(grace=10.0)
                    client.flushdb()
                escalated = [r["escalated_s"] for r in latencies]
                stuck = [r["stuck_s"] for r in latencies]
                results.append(
                    {
                        "settings": name,
                        "stale_after_s": threshold,
                        "sweep_interval_s": sweep,
                        "budget_s": budget,
                        "rounds": latencies,
                        "escalated_s_median": statistics.median(escalated),
                        "escalated_s_max": max(escalated),
                        "stuck_s_median": statistics.median(stuck),
                        "last_heartbeat_before_death_s_median": statistics.median(
                            r["last_heartbeat_before_death_s"] for r in latencies
                        ),
                        "escalated_over_budget": statistics.median(escalated) / budget,
                        "max_escalated_over_budget": max(escalated) / budget,
                        "stuck_over_threshold": statistics.median(stuck) / threshold,
                    }
                )
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            progress(f"dropping database {args.database}")
            drop_database(url, args.database)
    return {
        "ticket": TICKET,
        "kill": " ".join(KILL_FLAG),
        "poll_s": POLL_S,
        "results": results,
        "elapsed_s": time.perf_counter() - started,
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        f"recovery latency: {result['ticket']} killed ({result['kill']}), from the runner's death to its "
        f"escalation in the queue (polled every {result['poll_s'] * 1e3:.0f} ms)",
        "",
        f"{'settings':<10}{'stale s':>8}{'sweep s':>8}{'budget s':>9}{'stuck s':>9}{'escalated s':>12}"
        f"{'max s':>8}{'/ budget':>9}{'max / budget':>13}",
    ]
    for r in result["results"]:
        lines.append(
            f"{r['settings']:<10}{r['stale_after_s']:>8g}{r['sweep_interval_s']:>8g}{r['budget_s']:>9g}"
            f"{r['stuck_s_median']:>9.1f}{r['escalated_s_median']:>12.1f}{r['escalated_s_max']:>8.1f}"
            f"{r['escalated_over_budget']:>9.2f}{r['max_escalated_over_budget']:>13.2f}"
        )
    lines += [
        "",
        "budget = SEAM_STALE_AFTER_SECONDS + SEAM_SWEEP_INTERVAL_SECONDS; stuck: first listed in the queue "
        "(running, silent past the threshold, counted from the last heartbeat, "
        + ", ".join(
            f"{r['last_heartbeat_before_death_s_median']:.1f} s before death ({r['settings']})"
            for r in result["results"]
        )
        + "); escalated: awaiting a person; medians over the rounds",
        f"elapsed {result['elapsed_s']:.0f} s",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="runs killed with the defaults (default 2)")
    parser.add_argument(
        "--short-rounds", type=int, default=3, help="runs killed with the short settings (default 3)"
    )
    parser.add_argument(
        "--only",
        type=lambda v: [p for p in v.split(",") if p],
        default=[],
        help="settings to measure, comma-separated: default,short (default both)",
    )
    parser.add_argument(
        "--database", default="seam_bench_recovery", help="database (default seam_bench_recovery)"
    )
    parser.add_argument("--keep", action="store_true", help="do not drop the database at the end")
    parser.add_argument("--json", action="store_true", help="print only a JSON object of the figures")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.short_rounds < 1:
        parser.error("need --rounds >= 1 and --short-rounds >= 1")
    if set(args.only) - {name for name, _, _ in SETTINGS}:
        parser.error("--only takes default and/or short")
    if "bench" not in args.database:
        parser.error("the database is dropped at the end: its name must contain 'bench'")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        result = measure(args)
    except (BenchError, ProcessFailed) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
