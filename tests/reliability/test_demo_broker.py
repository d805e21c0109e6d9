"""The demo's broker (Kombu's SQLAlchemy transport on the demo's PostgreSQL, as
config/settings/local.py sets it) under load: several producer processes queue hundreds of tasks
at once, and one more is SIGKILLed while it queues (the demo's seeding kills processes on
purpose), while the demo's worker (`--pool=solo --concurrency=1`, as scripts/serve-demo.sh
starts it) consumes them. Every task runs, the worker is alive at the end and no message is left
waiting. A message is one row committed in one transaction, so a producer killed mid-publish
leaves a whole message or none."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from audit.models import AuditVerification
from devtools.processes import ROOT, Fleet, database_url

# Hundreds of tasks from concurrent producers and a killed worker: in `make chaos` (CI runs it after `make test`).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chaos]

PRODUCERS = 4
TASKS = 600
# Queued by the producer that is killed part of the way through.
KILLED_PRODUCERS_TASKS = 300
# Each message carries this much in a header the task ignores: big enough that serialising it
# takes a moment, which is when a worker could find the message's file already there but empty.
PADDING = 200_000

PRODUCE = """
import os, sys
import django
django.setup()
from audit.tasks import verify_audit_chain
padding = "x" * int(os.environ["PADDING"])
for verification_id in sys.argv[1].split(","):
    verify_audit_chain.apply_async((int(verification_id),), headers={"padding": padding})
    print("queued", flush=True)
"""


@pytest.fixture
def demo_env() -> dict[str, str]:
    url = database_url(connection.settings_dict)
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": url,
        "DJANGO_CONN_MAX_AGE": "0",
        # The demo's broker on the database under test, as local.py derives it from DATABASE_URL.
        "CELERY_BROKER_URL": "sqla+postgresql+psycopg://" + url.partition("://")[2],
        "PADDING": str(PADDING),
        "PYTHONUNBUFFERED": "1",
    }


def _waiting_messages(demo_env: dict[str, str]) -> int:
    """Messages in the broker's table that no worker has taken (Kombu keeps taken ones, hidden)."""
    with psycopg.connect(demo_env["DATABASE_URL"]) as conn:
        row = conn.execute("SELECT count(*) FROM kombu_message WHERE visible").fetchone()
    return int(row[0]) if row else 0


@pytest.fixture
def demo_worker(demo_env: dict[str, str], tmp_path: Path) -> Iterator[Fleet]:
    fleet = Fleet(env=demo_env, logs_dir=tmp_path)
    # The demo's worker, as scripts/serve-demo.sh starts it (without its beat).
    fleet.start("worker", "worker", "--pool=solo", "--concurrency=1", "--without-gossip", "--without-mingle")
    try:
        fleet.wait_ready("worker")
        yield fleet
    finally:
        fleet.stop_all()


def test_the_demo_worker_runs_every_task_from_concurrent_producers_and_survives(
    demo_worker: Fleet, demo_env: dict[str, str]
) -> None:
    now = timezone.now()
    ids = [
        v.pk
        for v in AuditVerification.objects.bulk_create(
            AuditVerification(requested_at=now) for _ in range(TASKS + KILLED_PRODUCERS_TASKS)
        )
    ]
    ids, killed_ids = ids[:TASKS], ids[TASKS:]
    killed = subprocess.Popen(
        [sys.executable, "-c", PRODUCE, ",".join(map(str, killed_ids))],
        cwd=ROOT,
        env=demo_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    producers = [
        subprocess.Popen(
            [sys.executable, "-c", PRODUCE, ",".join(map(str, ids[n::PRODUCERS]))],
            cwd=ROOT,
            env=demo_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for n in range(PRODUCERS)
    ]
    # Killed while it queues: after its 50th message, long before its last.
    assert killed.stdout is not None
    for _ in range(50):
        assert killed.stdout.readline() == b"queued\n", "the producer to be killed stopped by itself"
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    killed.stdout.close()
    for producer in producers:
        output, _ = producer.communicate(timeout=300)
        assert producer.returncode == 0, output.decode(errors="replace")

    def pending() -> int:
        return AuditVerification.objects.filter(pk__in=ids, finished_at__isnull=True).count()

    took = demo_worker.wait_for(
        lambda: pending() == 0 and _waiting_messages(demo_env) == 0,
        timeout=300,
        what=f"all {TASKS} tasks run, and whatever the killed producer queued",
        detail=lambda: f"{pending()} pending, {_waiting_messages(demo_env)} messages waiting",
    )
    demo_worker.check_alive()
    assert AuditVerification.objects.filter(pk__in=ids, finished_at__isnull=False, checked=0).count() == TASKS
    queued_by_killed = AuditVerification.objects.filter(pk__in=killed_ids, finished_at__isnull=False).count()
    assert 50 <= queued_by_killed < KILLED_PRODUCERS_TASKS
    print(
        f"\n{TASKS} tasks from {PRODUCERS} producers, {PADDING:,}-byte messages, and {queued_by_killed} "
        f"queued by a producer killed mid-way: all run, worker alive ({took:.1f} s)"
    )


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc, as `pgrep -P` reads it)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_a_killed_demo_worker_is_restarted_by_its_supervisor_and_runs_what_was_queued(
    demo_env: dict[str, str], tmp_path: Path
) -> None:
    log_path = tmp_path / "supervised.log"
    command = [str(ROOT / "scripts" / "supervise.sh"), sys.executable, "-m", "celery", "-A", "config"]
    command += ["worker", "--pool=solo", "--concurrency=1", "--without-gossip", "--without-mingle"]
    with log_path.open("wb") as log:
        supervisor = subprocess.Popen(
            [*command, "--loglevel=INFO"], cwd=ROOT, env=demo_env, stdout=log, stderr=subprocess.STDOUT
        )
    fleet = Fleet(env=demo_env, logs_dir=tmp_path)  # only for its waiting, with the log in errors

    def log_text() -> str:
        return log_path.read_text(errors="replace")

    try:
        fleet.wait_for(
            lambda: " ready." in log_text(), timeout=60, what="the supervised worker ready", detail=log_text
        )
        [first] = _children(supervisor.pid)
        os.kill(first, signal.SIGKILL)
        ids = [
            v.pk
            for v in AuditVerification.objects.bulk_create(
                AuditVerification(requested_at=timezone.now()) for _ in range(20)
            )
        ]
        subprocess.run(
            [sys.executable, "-c", PRODUCE, ",".join(map(str, ids))], cwd=ROOT, env=demo_env, check=True
        )

        fleet.wait_for(
            lambda: not AuditVerification.objects.filter(pk__in=ids, finished_at__isnull=True).exists(),
            timeout=120,
            what="the tasks queued after the kill run by the restarted worker",
            detail=log_text,
        )
        assert "exited with status 137; restarting" in log_text()
        [second] = _children(supervisor.pid)
        assert second != first
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=60)
    # Stopping the supervisor stops its worker: nothing is left behind.
    assert supervisor.returncode == 0
    assert not Path(f"/proc/{second}").exists()
