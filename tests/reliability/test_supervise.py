"""scripts/supervise.sh, which keeps the demo's worker alive (scripts/serve-demo.sh): a TERM or a
Ctrl-C stops it and its command, within SEAM_SUPERVISE_GRACE seconds even when the command is
still busy (a worker's warm shutdown waits for the task in hand), so `make demo` always ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from devtools.processes import ROOT, as_a_terminal_starts_it

SUPERVISE = str(ROOT / "scripts" / "supervise.sh")
# A command that says when it is ready and then ignores TERM, as a worker busy with a task does.
DEAF = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(300)"
# One that ends at once on TERM.
PROMPT = "import time; print('ready', flush=True); time.sleep(300)"


def _supervised(source: str, tmp_path: Path) -> tuple[subprocess.Popen[str], psutil.Process]:
    supervisor = subprocess.Popen(
        as_a_terminal_starts_it([SUPERVISE, sys.executable, "-c", source]),
        env={**os.environ, "SEAM_SUPERVISE_GRACE": "2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert supervisor.stdout is not None
    assert supervisor.stdout.readline().strip() == "ready"
    [command] = psutil.Process(supervisor.pid).children()
    return supervisor, command


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_a_command_still_busy_after_the_grace_is_killed_and_the_supervisor_ends(
    how: signal.Signals, tmp_path: Path
) -> None:
    supervisor, command = _supervised(DEAF, tmp_path)
    sent = time.monotonic()
    supervisor.send_signal(how)

    assert supervisor.wait(timeout=10) == 0
    assert 2 <= time.monotonic() - sent < 6
    assert not command.is_running() or command.status() == psutil.STATUS_ZOMBIE
    assert "still running 2 s after TERM; killed" in (supervisor.stderr.read() if supervisor.stderr else "")


def test_a_command_that_stops_on_term_is_not_waited_for_nor_killed(tmp_path: Path) -> None:
    supervisor, command = _supervised(PROMPT, tmp_path)
    sent = time.monotonic()
    supervisor.send_signal(signal.SIGTERM)

    assert supervisor.wait(timeout=10) == 0
    assert time.monotonic() - sent < 1.5
    assert not command.is_running() or command.status() == psutil.STATUS_ZOMBIE
    assert "killed" not in (supervisor.stderr.read() if supervisor.stderr else "")
