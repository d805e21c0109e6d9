"""Running `manage.py runsandbox` as a real subprocess for tests: on a free port the OS picks,
against the test database, always killed when the block exits (and at interpreter exit, should
the block never get the chance)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent.parent
READY = re.compile(r"Sandbox listening on (http://\S+)")
START_TIMEOUT = 30.0


def database_url(settings_dict: Mapping[str, Any]) -> str:
    """A DATABASE_URL naming the same PostgreSQL database as a Django connection's settings."""
    if not settings_dict["ENGINE"].endswith("postgresql"):
        raise RuntimeError("the sandbox subprocess needs the suite's PostgreSQL database")
    user = quote(settings_dict.get("USER") or "", safe="")
    password = quote(settings_dict.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or "5432"
    return f"postgres://{auth}{host}:{port}/{quote(settings_dict['NAME'], safe='')}"


@contextlib.contextmanager
def running_sandbox(db_url: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start runsandbox, wait until it listens, yield (base URL, process), then kill it."""
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DJANGO_CONN_MAX_AGE": "0",
        "PYTHONUNBUFFERED": "1",
    }
    with tempfile.NamedTemporaryFile(prefix="runsandbox-", suffix=".log", delete=False) as log:
        log_path = Path(log.name)
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runsandbox", "--host", "127.0.0.1", "--port", "0"],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    stop = functools.partial(_kill, process)
    atexit.register(stop)
    try:
        yield _wait_until_listening(process, log_path), process
    finally:
        stop()
        atexit.unregister(stop)
        log_path.unlink(missing_ok=True)


def _wait_until_listening(process: subprocess.Popen[bytes], log_path: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        output = log_path.read_text(errors="replace")
        match = READY.search(output)
        if match:
            return match.group(1)
        if process.poll() is not None:
            raise RuntimeError(f"runsandbox exited with {process.returncode}:\n{output}")
        time.sleep(0.05)
    raise RuntimeError(
        f"runsandbox did not listen within {START_TIMEOUT}s:\n{log_path.read_text(errors='replace')}"
    )


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
