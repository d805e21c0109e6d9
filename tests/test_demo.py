"""The demo's embedded default: migrate and seed on SQLite (WAL), through the portable journal path."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _manage(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.local", "DATABASE_URL": f"sqlite:///{db}"}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )


def test_demo_seeds_half_finished_runs_on_sqlite_in_wal_mode(tmp_path: Path) -> None:
    db = tmp_path / "demo.sqlite3"
    _manage("migrate", "--noinput", db=db)
    users = _manage("create_demo_users", db=db).stdout
    _manage("seed_demo", db=db)
    _manage("seed_demo", db=db)  # running it again adds nothing

    assert "support" in users and "outsider" in users
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT count(*) FROM handover_run").fetchone() == (3,)
        statuses = dict(conn.execute("SELECT tool, status FROM handover_intent").fetchall())
        events = conn.execute("SELECT count(*) FROM handover_journalevent").fetchone()[0]
    assert statuses == {
        "start_return": "performed",
        "offer_replacement": "performed",
        "issue_credit": "failed",
        "reship": "intended",
    }
    assert events >= 3 + 4 + 3  # runs created, intents recorded, outcomes recorded
