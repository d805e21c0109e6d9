"""devtools.warm_manage, which the kill-point matrices start their children with: each command
runs in a real child process of its own, sees exactly the environment it was given, and reports
a SIGKILL as `subprocess` does; calls that differ only in what pytest sets per test share one
warm parent, so the matrices pay Django's start-up once, not once per test."""

from __future__ import annotations

import os

from devtools import warm_manage
from devtools.warm_manage import warm_manage_py

ENV = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
PRINT_PID_AND_TEST = "import os; print(os.getpid(), os.environ['PYTEST_CURRENT_TEST'])"


def test_children_share_one_parent_and_each_sees_its_own_environment() -> None:
    first = warm_manage_py(
        "shell", "--no-imports", "-c", PRINT_PID_AND_TEST, env={**ENV, "PYTEST_CURRENT_TEST": "one"}
    )
    assert warm_manage._parent is not None
    parent = warm_manage._parent[1].process.pid
    second = warm_manage_py(
        "shell", "--no-imports", "-c", PRINT_PID_AND_TEST, env={**ENV, "PYTEST_CURRENT_TEST": "two"}
    )

    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    first_pid, first_test = first.stdout.split()
    second_pid, second_test = second.stdout.split()
    assert (first_test, second_test) == ("one", "two")
    assert len({first_pid, second_pid, str(parent), str(os.getpid())}) == 4  # a new process each
    assert warm_manage._parent[1].process.pid == parent


def test_a_child_killed_by_sigkill_reports_minus_nine_and_the_next_one_runs() -> None:
    killed = warm_manage_py(
        "shell",
        "--no-imports",
        "-c",
        "import os, signal; print('before', flush=True); os.kill(os.getpid(), signal.SIGKILL)",
        env=ENV,
    )
    assert (killed.returncode, killed.stdout.strip()) == (-9, "before")
    assert warm_manage_py("shell", "--no-imports", "-c", "print('after')", env=ENV).stdout.strip() == "after"


def test_another_environment_replaces_the_parent() -> None:
    warm_manage_py("shell", "--no-imports", "-c", "pass", env=ENV)
    assert warm_manage._parent is not None
    old = warm_manage._parent[1].process
    changed = warm_manage_py(
        "shell",
        "--no-imports",
        "--no-imports",
        "-c",
        "import os; print(os.environ['SEAM_PROBE'])",
        env={**ENV, "SEAM_PROBE": "x"},
    )
    assert changed.stdout.strip() == "x"
    assert old.poll() is not None  # stopped, not left beside the new one
