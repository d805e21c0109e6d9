"""The recovery figure's classification (tests/support/recovery_figure): which hand-overs to a
person were needless, on hand-made rows and on runs reconciliation's own decision handed over."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from journal import services as journal
from journal.models import Intent, IntentStatus, Run
from journal.why import RunWhy
from reconciliation import decisions
from sandbox.catalogue import catalogue_seed_defaults
from scenarios.flows import FLOWS
from scenarios.policies import policies_seed_defaults
from tests.security import figures
from tests.support import recovery_figure, worker_figures
from tests.support.recovery_figure import (
    MACHINE,
    OPEN,
    PERSON,
    AttemptTotals,
    Baseline,
    Figure,
    Row,
    attempts_table,
    is_needless,
    load_baseline,
    split_violations,
    table,
    tool_knowable,
)
from tools.connectors import HttpConnector, LookupQuery, LookupResult, NotPerformed
from tools.registry import ToolSpec

NOW = timezone.now()
SCHEMA: dict[str, Any] = {"type": "object"}


class SearchConnector(HttpConnector):
    """A provider asked by business id: no lookup_path, a lookup of its own."""

    def lookup(self, query: LookupQuery) -> LookupResult:
        return NotPerformed()


def spec(name: str, **fields: Any) -> ToolSpec:
    return ToolSpec(name=name, kind="write", args_schema=SCHEMA, **fields)


WITH_LOOKUP = spec("refund", connector=HttpConnector(base_url="http://x", path="r", lookup_path="r/{key}"))
AGENTS_OWN = spec("post_note")  # no connector: its agent runs it
AGENTS_OWN_KEYED = spec("post_keyed_note", honours_key=True)  # its agent sends it again
KEYED_ONLY = spec("book", connector=HttpConnector(base_url="http://x", path="b"), honours_key=True)
SEARCHED = spec("adjust", connector=SearchConnector(base_url="http://x", path="a"))
NO_WAY = spec("ping", connector=HttpConnector(base_url="http://x", path="p"))
SPECS = {s.name: s for s in (WITH_LOOKUP, AGENTS_OWN, AGENTS_OWN_KEYED, KEYED_ONLY, SEARCHED, NO_WAY)}


def knowable(call: Mapping[str, Any]) -> bool:
    return tool_knowable(SPECS.get(call["tool"]), intended_at=NOW, now=NOW)


def calls_unknown(*tools: str) -> dict[str, Any]:
    return {"code": RunWhy.CALLS_UNKNOWN, "calls": [{"tool": t, "key": f"k-{t}"} for t in tools]}


def test_a_tool_is_knowable_by_a_lookup_or_a_resend_inside_the_keys_lifetime() -> None:
    assert [name for name, s in SPECS.items() if tool_knowable(s, intended_at=NOW, now=NOW)] == [
        "refund",
        "post_keyed_note",
        "book",
        "adjust",
    ]
    assert not tool_knowable(KEYED_ONLY, intended_at=NOW - timedelta(days=2), now=NOW)
    assert not tool_knowable(None, intended_at=NOW, now=NOW)  # not a registered tool


@pytest.mark.parametrize(
    ("why", "ended", "resume", "needless"),
    [
        # Every call in doubt could have been asked about, or sent again: needless.
        (calls_unknown("refund"), PERSON, True, True),
        (calls_unknown("refund", "book", "adjust"), PERSON, True, True),
        # A call nobody can ask about nor send again is a person's.
        (calls_unknown("post_note"), PERSON, True, False),
        (calls_unknown("refund", "ping"), PERSON, True, False),
        (calls_unknown("post_keyed_note"), PERSON, True, True),
        # The policy chose the person: never needless.
        ({"code": RunWhy.ENTERED_PHASE, "phase": "act"}, PERSON, False, False),
        ({"code": RunWhy.POLICY_ALWAYS_COMPENSATES}, PERSON, False, False),
        (calls_unknown("refund"), PERSON, False, False),
        # The policy said resume and the resumption failed: a machine's failure.
        ({"code": RunWhy.RESUME_FAILED, "tool": "refund"}, PERSON, True, True),
        # Finished by machine, or not decided yet: nothing handed over.
        ({}, MACHINE, True, False),
        (calls_unknown("refund"), OPEN, True, False),
    ],
)
def test_a_hand_over_is_needless_when_a_machine_could_have_finished(
    why: dict[str, Any], ended: str, resume: bool, needless: bool
) -> None:
    assert is_needless(why, ended=ended, policy_says_resume=resume, knowable=knowable) is needless


def test_the_recovered_checks_violations_split_into_doubles_and_false_statements() -> None:
    doubled, false = split_violations(
        [
            "effect performed twice: k-1",
            "orphan write: erp.adjust_stock without key, ref T-1",
            "the handover lists s2 as completed but the world has no such effect",
            "s3 happened in the world but the handover does not list it as completed",
            "s4 was settled 2 times (admitted 1)",
        ]
    )
    assert len(doubled) == 3 and len(false) == 2
    assert all("handover" in line for line in false)


def test_the_table_counts_each_matrix_and_the_total() -> None:
    figure = Figure(
        [
            Row("flows", "a", MACHINE),
            Row("flows", "b", PERSON, why="calls_unknown", needless=True),
            Row("mcp", "c", PERSON, why="no_policy", doubled_or_lost=("x twice",), false_statements=("y",)),
            Row("mcp", "d", OPEN),
        ]
    )
    header, _, flows, mcp, _, total = table(figure)
    assert header.split()[:3] == ["matrix", "kill", "points"]
    assert flows.split() == ["flows", "2", "1", "-", "1", "1", "0", "0", "0"]
    assert mcp.split() == ["mcp", "2", "0", "-", "1", "0", "1", "1", "1"]
    assert total.split() == ["total", "4", "1", "-", "2", "1", "1", "1", "1"]


def test_before_counts_the_same_kill_points_finished_by_machine_at_the_baselines_commit() -> None:
    figure = Figure(
        [
            Row("flows", "a", MACHINE, test="t::a"),
            Row("flows", "b", MACHINE, test="t::b"),
            Row("mcp", "c", MACHINE, test="t::c"),
            Row("mcp", "d", OPEN, test="t::d"),  # a point the baseline did not measure
        ]
    )
    baseline = Baseline(commit="03e6b2c8df", points={"t::a": PERSON, "t::b": MACHINE, "t::c": OPEN})

    header, _, flows, mcp, _, total = table(figure, baseline)

    assert "before (03e6b2c)" in header
    assert flows.split()[:4] == ["flows", "2", "2", "1"]
    assert mcp.split()[:6] == ["mcp", "2", "1", "0", "of", "1"]
    assert total.split()[:6] == ["total", "4", "3", "1", "of", "3"]


def test_the_stored_baseline_names_its_commit_and_only_known_endings() -> None:
    baseline = load_baseline()
    assert len(baseline.commit) == 40 and baseline.points
    assert set(baseline.points.values()) <= {MACHINE, PERSON, OPEN}


def test_the_attempts_table_sums_each_matrixs_counts_and_its_loops() -> None:
    def counts(retries: int, looping: bool = False) -> AttemptTotals:
        return AttemptTotals(
            retries=retries, repairs=1, replans=0, reflections=2, escalations=0, looping=looping
        )

    figure = Figure(
        [
            Row("flows", "a", MACHINE, attempts=counts(1)),
            Row("flows", "b", PERSON, attempts=counts(3, looping=True)),
            Row("mcp", "c", OPEN),  # recorded without counts: not summed
        ]
    )

    header, _, flows, mcp, _, total = attempts_table(figure)

    assert header.split() == [
        *["matrix", "runs", "retries", "repairs", "replans", "reflections", "escalations"],
        "loops",
        "caught",
    ]
    assert flows.split() == ["flows", "2", "4", "2", "0", "4", "0", "1"]
    assert mcp.split() == ["mcp", "0", "0", "0", "0", "0", "0", "0"]
    assert total.split() == ["total", "2", "4", "2", "0", "4", "0", "1"]


# --- runs the decision itself handed over ---------------------------------------------------------


@pytest.fixture
def figure(db: None, monkeypatch: pytest.MonkeyPatch, settings: Any) -> Figure:
    """A figure of this test's own, leaving the session's alone; the sandbox's tools declared
    (nothing listens there: no test here asks them anything)."""
    settings.SEAM_SANDBOX_URL = "http://127.0.0.1:9"
    own = Figure()
    monkeypatch.setattr(recovery_figure, "FIGURE", own)
    policies_seed_defaults()
    catalogue_seed_defaults()
    return own


def dead_refund_run(make_run: Any, **fields: Any) -> Run:
    run = make_run(
        task_type="expedited_fee_refund", versions=FLOWS["expedited_fee_refund"].run_versions(), **fields
    )
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    return run


REFUND = {"order_id": "SO-1001", "amount": "9.99", "currency": "USD"}


def decided_with_an_unknown_refund(run: Run) -> Run:
    actor = journal.Actor.agent("returns-bot")
    intent = journal.intent_record(run=run, tool="issue_refund", args=REFUND, turn=1, actor=actor)
    Intent.objects.filter(pk=intent.intent.pk).update(
        status=IntentStatus.UNKNOWN, unknown_reason="cannot say"
    )
    decisions.run_decide(run=run, actor=journal.Actor.system("test-sweeper"))
    return run


def test_an_unknown_call_of_a_tool_with_a_lookup_under_a_resume_policy_is_needless(
    figure: Figure, make_run: Any
) -> None:
    run = decided_with_an_unknown_refund(dead_refund_run(make_run))

    row = recovery_figure.record("unit", run, point="unknown refund")

    assert (row.ended, row.why, row.needless) == (PERSON, "calls_unknown", True)
    assert figure.needless() == [row]


def test_a_hand_over_the_policy_chose_is_not_needless(figure: Figure, make_run: Any) -> None:
    late = dead_refund_run(make_run, deadline=timezone.now() - timedelta(minutes=1), plan=[])
    decisions.run_decide(run=late, actor=journal.Actor.system("test-sweeper"))
    policyless = make_run(task_type="mystery", plan=[])
    Run.objects.filter(pk=policyless.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    decisions.run_decide(run=policyless, actor=journal.Actor.system("test-sweeper"))

    rows = [recovery_figure.record("unit", run) for run in (late, policyless)]

    assert [(r.ended, r.why, r.needless) for r in rows] == [
        (PERSON, "deadline_passed", False),
        (PERSON, "no_policy", False),
    ]
    assert figure.needless() == []


def test_a_hand_over_the_person_asked_for_is_not_needless(figure: Figure, make_run: Any) -> None:
    run = decided_with_an_unknown_refund(dead_refund_run(make_run))

    assert recovery_figure.record("unit", run, person_asked=True).needless is False


def test_under_ci_a_needless_hand_over_fails_the_session(
    figure: Figure, make_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    session: Any = type("Session", (), {"exitstatus": 0})()
    recovery_figure.pytest_sessionfinish(session, 0)
    assert session.exitstatus == 0  # nothing recorded yet

    recovery_figure.record("unit", decided_with_an_unknown_refund(dead_refund_run(make_run)))
    monkeypatch.delenv("CI", raising=False)
    recovery_figure.pytest_sessionfinish(session, 0)
    assert session.exitstatus == 0  # outside CI: printed, not failed

    monkeypatch.setenv("CI", "true")
    recovery_figure.pytest_sessionfinish(session, 0)
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED


FRESH_FIGURES: dict[str, Callable[[], Any]] = {
    "FUZZ_TRIED": Counter,
    "FUZZ_REFUSED": Counter,
    "MATRIX": dict,
    "PAGE_FUZZ": dict,
    "ADMIN_FUZZ": dict,
    "OUTBOUND_FUZZ": dict,
}


def test_a_workers_needless_hand_over_reaches_the_summary_and_fails_it_under_ci(
    figure: Figure, make_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under pytest-xdist the kill matrices record in a worker; the controlling process prints
    the figure and gives the verdict from what the workers sent (tests/support/worker_figures)."""
    recovery_figure.record("unit", decided_with_an_unknown_refund(dead_refund_run(make_run)))
    for name, fresh in FRESH_FIGURES.items():  # this test's own figures, the session's left alone
        monkeypatch.setattr(figures, name, fresh())
    figures.FUZZ_TRIED["POST /unit/"] += 3
    worker_config: Any = type("Config", (), {"workeroutput": {}})()
    worker_figures.pytest_sessionfinish(type("Session", (), {"config": worker_config})())
    sent = worker_config.workeroutput
    # What the controller holds before any worker goes down: nothing of its own.
    monkeypatch.setattr(recovery_figure, "FIGURE", Figure())
    for name, fresh in FRESH_FIGURES.items():
        monkeypatch.setattr(figures, name, fresh())

    worker_figures.pytest_testnodedown(type("Node", (), {"workeroutput": sent})(), None)

    assert recovery_figure.FIGURE.rows == figure.rows
    assert recovery_figure.FIGURE.rows[0].attempts is not None
    assert figures.FUZZ_TRIED == {"POST /unit/": 3}
    session: Any = type("Session", (), {"exitstatus": 0})()
    monkeypatch.setenv("CI", "true")
    recovery_figure.pytest_sessionfinish(session, 0)
    assert session.exitstatus == pytest.ExitCode.TESTS_FAILED
