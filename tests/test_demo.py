"""The demo's embedded default end to end: migrate, demo users, the sandbox, and half-finished
runs seeded by replaying tickets whose runners are SIGKILLed — all on SQLite in WAL mode."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import requests

from tests.support.processes import manage_py, running_sandbox


def _manage(*args: str, db: Path, sandbox_url: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": f"sqlite:///{db}",
        "SEAM_SANDBOX_URL": sandbox_url,
    }
    env.pop("SEAM_TOOL_MODULES", None)
    return manage_py(*args, env=env, timeout=300, check=True)


def test_demo_seeds_killed_runs_on_sqlite_in_wal_mode(tmp_path: Path) -> None:
    db = tmp_path / "demo.sqlite3"
    _manage("migrate", "--noinput", db=db)
    users = _manage("create_demo_users", db=db).stdout
    with running_sandbox(f"sqlite:///{db}") as (sandbox_url, _process):
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
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT count(*) FROM handover_run").fetchone() == (6,)
        bench = dict(
            conn.execute(
                "SELECT i.tool, i.status FROM handover_intent i JOIN handover_run r ON r.id = i.run_id "
                "WHERE r.ticket_id = 'T-40912'"
            ).fetchall()
        )
        effects = conn.execute("SELECT count(*) FROM sandbox_effect").fetchone()[0]
    # Died mid-sequence: the return started and the bench reserved; the refund never happened.
    assert bench == {"start_return": "performed", "offer_replacement": "performed"}
    assert in_doubt == [("issue_refund",), ("reship",)]
    assert effects >= 2 + 2 + 1 + 1 + 1

    # What the demo sets up past the kills meets reconciliation: payments cannot say whether
    # T-41518's refund happened (a person decides), and T-41207's undo finds the credit already
    # reversed by hand at the accounting desk (a dead letter with an owner).
    assert "T-41207: the accounting desk reversed credit memo" in seeded
    assert armed == {("payments", "lookup", "unknown_lookup", 1)}  # armed once, not on the re-run
    assert left == set()
    with sqlite3.connect(db) as conn:
        unknown = conn.execute(
            "SELECT r.status, r.outcome_reason, i.tool, i.status FROM handover_intent i "
            "JOIN handover_run r ON r.id = i.run_id WHERE r.ticket_id = 'T-41518' AND i.status = 'unknown'"
        ).fetchall()
        dead_letters = conn.execute(
            "SELECT i.tool, c.status, u.username, r.outcome_reason, d.error_class, d.error "
            "FROM compensations_deadletter d "
            "JOIN compensations_compensation c ON c.id = d.compensation_id "
            "JOIN handover_intent i ON i.id = c.original_id JOIN handover_run r ON r.id = i.run_id "
            "JOIN auth_user u ON u.id = d.owner_id WHERE r.ticket_id = 'T-41207'"
        ).fetchall()
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


def _a_minute_later(db: Path) -> None:
    """Move the open intents a minute back (reconciliation leaves alone a call that may still be
    in flight, whatever --older-than says)."""
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE handover_intent SET intended_at = strftime('%Y-%m-%d %H:%M:%f', intended_at, '-1 minute') "
            "WHERE status = 'intended'"
        )


def _open_intents(db: Path) -> list[tuple[str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT tool FROM handover_intent WHERE status = 'intended' ORDER BY tool"
        ).fetchall()


def _fault_rules(sandbox_url: str) -> set[tuple[str, str, str, int]]:
    rules = requests.get(f"{sandbox_url}/sandbox/api/faults/", timeout=5).json()["rules"]
    return {(r["provider"], r["operation"], r["fault"], r["remaining"]) for r in rules}
