"""The demo's settings end to end on a database of their own: migrate, demo users, the sandbox,
and half-finished runs seeded by replaying tickets whose runners are SIGKILLed, with the demo's
broker (Kombu's SQLAlchemy transport) on that same database. (tests/test_demo_fresh.py starts
the demo's embedded server itself, as `make demo` does.)"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import requests
from django.conf import settings

from devtools.processes import manage_py, running_sandbox


@pytest.fixture
def db() -> Iterator[str]:
    """A new, empty PostgreSQL database on the suite's server, dropped afterwards."""
    default = settings.DATABASES["default"]
    name = f"seam_demo_{uuid.uuid4().hex[:8]}"
    admin = f"host={default['HOST']} port={default['PORT']} user={default['USER']} dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgres://{default['USER']}@{default['HOST']}:{default['PORT']}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _manage(*args: str, db: str, sandbox_url: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": db,
        "SEAM_SANDBOX_URL": sandbox_url,
    }
    for name in ("SEAM_APPS", "CELERY_BROKER_URL"):
        env.pop(name, None)
    return manage_py(*args, env=env, timeout=300, check=True)


def _rows(db: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db) as conn:
        return conn.execute(sql).fetchall()  # type: ignore[arg-type]


def test_demo_seeds_killed_runs_on_a_database_of_its_own(db: str) -> None:
    _manage("migrate", "--noinput", db=db)
    users = _manage("create_demo_users", db=db).stdout
    with running_sandbox(db) as (sandbox_url, _process):
        seeded = _manage("seed_demo", db=db, sandbox_url=sandbox_url).stdout
        _manage("seed_demo", db=db, sandbox_url=sandbox_url)  # running it again adds nothing
        armed = _fault_rules(sandbox_url)
        in_doubt = _open_intents(db)
        # One sweep, as the demo's worker makes a minute later: by then no call is in flight.
        _a_minute_later(db)
        _manage("reconcile", "--older-than", "0", "--decide", db=db, sandbox_url=sandbox_url)
        left = _fault_rules(sandbox_url)

    assert "support" in users and "outsider" in users
    assert "T-40912: the runner was killed (SIGKILL)" in seeded
    assert "VIOLATION" not in seeded
    assert _rows(db, "SELECT count(*) FROM journal_run") == [(6,)]
    bench = dict(
        _rows(
            db,
            "SELECT i.tool, i.status FROM journal_intent i JOIN journal_run r ON r.id = i.run_id "
            "WHERE r.ticket_id = 'T-40912'",
        )
    )
    [(effects,)] = _rows(db, "SELECT count(*) FROM sandbox_effect")
    # Died mid-sequence: the return started and the bench reserved; the refund never happened.
    assert bench == {"start_return": "performed", "offer_replacement": "performed"}
    assert in_doubt == [("issue_refund",), ("reship",)]
    assert effects >= 2 + 2 + 1 + 1 + 1

    # What the demo sets up past the kills meets reconciliation: payments cannot say whether
    # T-41518's refund happened (a person decides), and T-41207's undo finds the credit already
    # reversed by hand at the accounting desk (a dead letter with an owner).
    assert "T-41207: the accounting desk reversed credit memo" in seeded
    assert armed == {  # armed once, not on the re-run
        ("payments", "lookup", "unknown_lookup", 1),
        ("payments", "refund", "key_conflict", 1),
    }
    assert left == set()
    unknown = _rows(
        db,
        "SELECT r.status, r.outcome_reason, i.tool, i.status FROM journal_intent i "
        "JOIN journal_run r ON r.id = i.run_id WHERE r.ticket_id = 'T-41518' AND i.status = 'unknown'",
    )
    dead_letters = _rows(
        db,
        "SELECT i.tool, c.status, u.username, r.outcome_reason, d.error_class, d.error "
        "FROM compensations_deadletter d "
        "JOIN compensations_compensation c ON c.id = d.compensation_id "
        "JOIN journal_intent i ON i.id = c.original_id JOIN journal_run r ON r.id = i.run_id "
        "JOIN auth_user u ON u.id = d.owner_id WHERE r.ticket_id = 'T-41207'",
    )
    assert unknown == [("escalated", "unknown_outcome", "issue_refund", "unknown")]
    [(tool, status, owner, reason, error_class, error)] = dead_letters
    assert (tool, status, owner, reason, error_class) == (
        "issue_credit",
        "dead_lettered",
        "lead",
        "compensation_failed",
        "conflict",
    )
    assert "already reversed" in error


def _a_minute_later(db: str) -> None:
    """Move the open intents a minute back (reconciliation leaves alone a call that may still be
    in flight, whatever --older-than says)."""
    with psycopg.connect(db) as conn:
        conn.execute(
            "UPDATE journal_intent SET intended_at = intended_at - interval '1 minute' WHERE status = 'intended'"
        )


def _open_intents(db: str) -> list[tuple[Any, ...]]:
    return _rows(db, "SELECT tool FROM journal_intent WHERE status = 'intended' ORDER BY tool")


def _fault_rules(sandbox_url: str) -> set[tuple[str, str, str, int]]:
    rules = requests.get(f"{sandbox_url}/sandbox/api/faults/", timeout=5).json()["rules"]
    return {(r["provider"], r["operation"], r["fault"], r["remaining"]) for r in rules}
