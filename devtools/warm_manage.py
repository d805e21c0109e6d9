"""`manage.py` commands in real child processes, without paying Django's start-up for each.

The kill-point matrices run a command in a child hundreds of times, and the child is SIGKILLed in
the middle of its work. A fresh `python manage.py` spends about 1.3 s importing Django, the apps
and their libraries before it does anything; the command itself takes a fraction of that. So a
warm parent process (`python -m devtools.warm_manage`, one per environment) sets Django up once,
then forks one child per command: the child is a real process of its own, with its own database
connections, killed by a real SIGKILL, and its exit status is reported exactly as `subprocess`
reports it (-9 for SIGKILL).

The parent never opens a database connection or starts a thread, so the fork copies nothing a
child could share with it. Its protocol is one JSON line per command on stdin, and one line per
finished command on stdout; each child's output goes to files the caller reads back."""

from __future__ import annotations

import atexit
import json
import os
import random
import select
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _serve() -> None:
    """The warm parent's loop: fork a child per request, wait for it, report its exit status."""
    import django

    django.setup()
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(request)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


def _run_child(request: Mapping[str, Any]) -> None:
    """In the forked child: the command, with its output in the caller's files; never returns."""
    code = 1
    try:
        random.seed()  # a fresh sequence per child, not the parent's
        os.environ.clear()
        os.environ.update(request["env"])
        with open(str(request["stdout"]), "w") as out, open(str(request["stderr"]), "w") as err:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            from django.core.management import execute_from_command_line

            try:
                execute_from_command_line(["manage.py", *map(str, request["args"])])
                code = 0
            except SystemExit as stopped:
                code = stopped.code if isinstance(stopped.code, int) else 1
            except BaseException:
                traceback.print_exc()
            sys.stdout.flush()
            sys.stderr.flush()
    finally:
        os._exit(code)


class _WarmParent:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "devtools.warm_manage"],
            cwd=ROOT,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def run(
        self, args: tuple[str, ...], env: Mapping[str, str], timeout: float | None
    ) -> subprocess.CompletedProcess[str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        with tempfile.TemporaryDirectory(prefix="seam-warm-") as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            request = {"args": list(args), "env": dict(env), "stdout": str(out), "stderr": str(err)}
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            ready, _, _ = select.select([self.process.stdout], [], [], timeout)
            if not ready:
                self.stop()
                raise subprocess.TimeoutExpired(["manage.py", *args], timeout or 0)
            answer = self.process.stdout.readline()
            if not answer:
                raise RuntimeError(f"the warm manage.py parent exited ({self.process.wait()})")
            returncode = json.loads(answer)["returncode"]
            return subprocess.CompletedProcess(
                ["manage.py", *args], returncode, out.read_text(), err.read_text()
            )

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


# Variables a child sees but Django's set-up does not read: a parent started under other values
# of these serves as well (pytest sets PYTEST_CURRENT_TEST afresh for every test).
PER_CHILD = frozenset({"PYTEST_CURRENT_TEST"})

_parent: tuple[tuple[tuple[str, str], ...], _WarmParent] | None = None


def warm_manage_py(
    *args: str, env: Mapping[str, str], timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    """`manage.py <args>` in a child process, with `env` as its whole environment, forked from a
    warm parent that set Django up under the same environment (one parent at a time: another
    environment replaces it); the same answer as `devtools.processes.manage_py` gives, about a
    second sooner."""
    global _parent
    key = tuple(sorted((name, value) for name, value in env.items() if name not in PER_CHILD))
    if _parent is None or _parent[0] != key or _parent[1].process.poll() is not None:
        _stop_parent()
        _parent = (key, _WarmParent(env))
    return _parent[1].run(args, env, timeout)


@atexit.register
def _stop_parent() -> None:
    if _parent is not None:
        _parent[1].stop()


if __name__ == "__main__":
    _serve()
