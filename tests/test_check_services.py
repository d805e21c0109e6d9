"""scripts/check_services.py: a missing service stops the suite with a message naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check_services.py"


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT)], env={**os.environ, **env}, capture_output=True, text=True, check=False
    )


def test_the_machines_services_are_found() -> None:
    assert _run({}).returncode == 0


def test_a_missing_redis_fails_naming_it() -> None:
    result = _run({"CELERY_BROKER_URL": "redis://127.0.0.1:1/0"})
    assert result.returncode == 1
    assert "Redis is not reachable at 127.0.0.1:1" in result.stderr
    assert "PostgreSQL" not in result.stderr


def test_a_missing_postgresql_fails_naming_it() -> None:
    result = _run({"DATABASE_URL": "postgres://postgres@127.0.0.1:1/test"})
    assert result.returncode == 1
    assert "PostgreSQL is not reachable" in result.stderr
