"""The giftdesk example under test: its provider as a real process with its own state file, the
example's app installed (its seam.py discovered), and a replay of its ticket in a child process."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from django.db import connection

from devtools.processes import ROOT, ProcessFailed, database_url, free_port, manage_py
from journal.models import Run

# The example's Django app: installing it is all an integrator does to turn its plug-ins on.
APP = "examples.giftdesk"
START_TIMEOUT = 15.0


@dataclass(frozen=True)
class Provider:
    url: str
    state_file: Path

    def state(self) -> dict[str, Any]:
        """The provider's own record of what it did (its state file, as it wrote it)."""
        state: dict[str, Any] = json.loads(self.state_file.read_text())
        return state


@contextlib.contextmanager
def running_provider(state_file: Path) -> Iterator[Provider]:
    """`python -m examples.giftdesk.provider` on a free port, stopped on the way out."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "examples.giftdesk.provider", "--port", str(port), "--state", str(state_file)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                log = process.stderr.read().decode() if process.stderr else ""
                raise ProcessFailed(f"the giftdesk provider exited: {log[-2000:]}")
            try:
                requests.get(f"{url}/state", timeout=1).raise_for_status()
                break
            except requests.RequestException:
                if time.monotonic() > deadline:
                    raise ProcessFailed("the giftdesk provider did not answer in time") from None
                time.sleep(0.05)
        yield Provider(url=url, state_file=state_file)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def child_env(provider: Provider) -> dict[str, str]:
    """The environment of a manage.py child working on the test database and the example."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": database_url(connection.settings_dict),
        "GIFTDESK_URL": provider.url,
        "SEAM_APPS": APP,
    }


def replay_in_child(ticket_id: str, provider: Provider, *flags: str) -> tuple[int, Run | None]:
    external_id = f"gd-{uuid.uuid4().hex[:10]}"
    child = manage_py(
        "replay_ticket",
        ticket_id,
        "--child",
        "--external-id",
        external_id,
        *flags,
        env=child_env(provider),
        timeout=120,
    )
    if child.returncode not in (0, -9):
        raise AssertionError(f"runner failed ({child.returncode}):\n{child.stderr[-3000:]}")
    return child.returncode, Run.objects.filter(external_id=external_id).first()
