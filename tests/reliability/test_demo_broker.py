"""The demo's embedded broker (Kombu's filesystem transport, as config/filesystem_broker.py
makes it safe) under load: several producer processes queue hundreds of tasks at once while the
demo's worker (`--pool=solo --concurrency=1`, as scripts/serve-demo.sh starts it) consumes them.
Every task runs and the worker is alive at the end.

Kombu's own `_put` creates a message file and then writes it: a worker listing the folder in
between, or a producer killed in between (the demo's seeding kills processes on purpose), leaves
it an empty message, and Kombu's worker dies on its JSON (`JSONDecodeError`), as the demo's did.
Here messages appear whole, and an empty one left over from such a producer is set aside."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from time import monotonic

import pytest
from django.db import connection
from django.utils import timezone

from handover.models import AuditVerification
from tests.support.processes import ROOT, Fleet, database_url

# Hundreds of tasks from concurrent producers and a killed worker: in `make chaos` (CI runs it after `make test`).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.chaos]

PRODUCERS = 4
TASKS = 600
# Each message carries this much in a header the task ignores: big enough that serialising it
# takes a moment, which is when a worker could find the message's file already there but empty.
PADDING = 200_000

PRODUCE = """
import os, sys
import django
django.setup()
from handover.tasks import verify_audit_chain
padding = "x" * int(os.environ["PADDING"])
for verification_id in sys.argv[1].split(","):
    verify_audit_chain.apply_async((int(verification_id),), headers={"padding": padding})
"""


@pytest.fixture
def demo_env(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "celery"
    for name in ("out", "processed", "control"):
        (folder / name).mkdir(parents=True)
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(connection.settings_dict),
        "DJANGO_CONN_MAX_AGE": "0",
        "CELERY_BROKER_URL": "filesystem://",
        "SEAM_CELERY_DIR": str(folder),
        "PADDING": str(PADDING),
        "PYTHONUNBUFFERED": "1",
    }


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
    folder = Path(demo_env["SEAM_CELERY_DIR"])
    # What a producer killed between Kombu creating a message's file and writing it leaves.
    (folder / "out" / f"{round(monotonic() * 1000)}_{uuid.uuid4()}.celery.msg").touch()
    now = timezone.now()
    ids = [
        v.pk
        for v in AuditVerification.objects.bulk_create(
            AuditVerification(requested_at=now) for _ in range(TASKS)
        )
    ]
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
    for producer in producers:
        output, _ = producer.communicate(timeout=300)
        assert producer.returncode == 0, output.decode(errors="replace")

    def pending() -> int:
        return AuditVerification.objects.filter(finished_at__isnull=True).count()

    took = demo_worker.wait_for(
        lambda: pending() == 0,
        timeout=300,
        what=f"all {TASKS} tasks run",
        detail=lambda: f"{pending()} pending",
    )
    demo_worker.check_alive()
    assert AuditVerification.objects.filter(pk__in=ids, finished_at__isnull=False, checked=0).count() == TASKS
    assert not list((folder / "out").iterdir()), "messages left in the queue"
    assert len(list((folder / "processed").glob("*.unreadable"))) == 1, "the empty message set aside"
    print(
        f"\n{TASKS} tasks from {PRODUCERS} producers, {PADDING:,}-byte messages: all run, worker alive ({took:.1f} s)"
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
