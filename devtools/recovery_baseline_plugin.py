"""A pytest plugin that measures how the kill matrices' runs ended at any commit, even one from
before tests/support/recovery_figure existed: the "before" column of the recovery figure (issue
30) is this plugin's measurement at the commit before issue 30's work, stored in
tests/support/recovery_baseline.json by devtools/measure_recovery_baseline.py.

It relies only on what every commit since the kill matrices has: the tests' names (mapped below
to the figure's matrices) and the journal's Run and Escalation rows. Loaded with `-p
devtools.recovery_baseline_plugin`, it deselects every test that is not a kill matrix's, and
after each one's call, before its database is flushed, reads how the run it killed ended —
by the figure's own rule (tests/support/recovery_figure.how_ended): with a person if the run
awaits one or has an escalation, left open if it is still running, by machine otherwise — and
appends one JSON line per run to $RECOVERY_BASELINE_LINES."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Generator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps

# (file, test function) -> the figure's matrix name, from the test's parameters (callspec id).
MATRICES: dict[tuple[str, str], Callable[[str], str]] = {
    (
        "tests/reliability/test_kill_matrix.py",
        "test_a_rest_runtime_killed_anywhere_is_recovered_by_a_fresh_process",
    ): lambda _: "built-in flows",
    (
        "tests/reliability/test_kill_matrix.py",
        "test_a_compensation_killed_mid_way_undoes_each_step_once_after_recovery",
    ): lambda _: "built-in flows: compensation killed",
    (
        "tests/reliability/test_kill_matrix.py",
        "test_a_recovery_killed_mid_way_is_finished_by_the_next_with_each_write_once",
    ): lambda _: "built-in flows: recovery killed",
    (
        "tests/clients/test_framework_adapters.py",
        "test_an_agent_killed_after_the_ledger_booked_is_reconciled_handed_over_and_replayed",
    ): lambda params: (
        "adapter: " + next(name for name in ("langgraph", "openai", "pydantic") if name in params)
    ),
    (
        "tests/clients/test_langchain_adapter.py",
        "test_an_async_tool_agent_killed_after_the_ledger_booked_is_reconciled_and_replayed",
    ): lambda _: "adapter: langgraph",
    (
        "tests/clients/test_mcp_proxy.py",
        "test_a_proxy_killed_after_the_server_accepted_is_reconciled_by_its_key_and_handed_over",
    ): lambda _: "MCP proxy",
    (
        "tests/clients/test_mcp_real_servers.py",
        "test_a_proxy_killed_mid_commit_leaves_it_uncertain_and_git_holds_it_once",
    ): lambda _: "MCP proxy",
    (
        "tests/examples/test_giftdesk_kill_points.py",
        "test_the_policy_then_finishes_or_undoes_the_run_with_each_effect_once",
    ): lambda _: "giftdesk example",
}
OUTCOME_KEY = pytest.StashKey[str]()
# Models by name, not imported: pytest loads this plugin before pytest-django sets Django up, and
# the measured commit's models are whatever it has. RunStatus.RUNNING's value at every commit.
RUNNING = "running"


def matrix_of(nodeid: str) -> str | None:
    path, _, name = nodeid.partition("::")
    function, _, params = name.partition("[")
    name_of = MATRICES.get((path, function))
    return name_of(params) if name_of else None


def pytest_sessionstart(session: pytest.Session) -> None:
    """Measure the commit checked out at the rootdir, not an installed copy of another."""
    journal = find_spec("journal")
    origin = Path(journal.origin if journal and journal.origin else "?").resolve()
    if session.config.rootpath not in origin.parents:
        raise pytest.UsageError(
            f"journal is imported from {origin}, not {session.config.rootpath}: "
            "put the checkout first on PYTHONPATH"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept = [item for item in items if matrix_of(item.nodeid)]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    report = (yield).get_result()
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        item.stash[OUTCOME_KEY] = report.outcome


def how_ended(run: Any) -> str:
    if run.awaiting_person or apps.get_model("journal", "Escalation").objects.filter(run=run).exists():
        return "person"
    return "open" if run.status == RUNNING else "machine"


def killed_runs() -> list[Any]:
    """The runs a kill point leaves: the test's run, or where it has bystanders (runs without a
    call), each run with a call. A run killed before its first call has none."""
    runs = list(apps.get_model("journal", "Run").objects.order_by("pk"))
    with_calls = [run for run in runs if run.intents.exists()]
    return with_calls if len(runs) > 1 and with_calls else runs


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    matrix = matrix_of(item.nodeid)
    if matrix and "django_db_blocker" in getattr(item, "fixturenames", ()):
        blocker = item._request.getfixturevalue("django_db_blocker")  # type: ignore[attr-defined]
        with blocker.unblock():
            lines = [
                {
                    "nodeid": item.nodeid,
                    "matrix": matrix,
                    "test": item.stash.get(OUTCOME_KEY, "?"),
                    "ended": how_ended(run),
                    "status": run.status,
                    "reason": run.outcome_reason or "",
                    "runs": len(runs),
                }
                for runs in [killed_runs()]
                for run in runs
            ] or [
                {
                    "nodeid": item.nodeid,
                    "matrix": matrix,
                    "test": item.stash.get(OUTCOME_KEY, "?"),
                    "ended": "none",
                    "runs": 0,
                }
            ]
        with open(os.environ["RECOVERY_BASELINE_LINES"], "a") as out:
            out.writelines(json.dumps(line, sort_keys=True) + "\n" for line in lines)
    yield
