"""handover.attempts on hand-made rows: each tool's calls by how they ended, and retries, repairs,
replans, reflections and escalations counted apart, derived from the calls where the agent
reported nothing and the larger number where it did, with the loop flag."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from handover import handover_build, handover_rows
from handover.attempts import Call, attempts_of, run_attempts
from journal.models import Intent, IntentStatus, Run
from tests import factories

# A run stopped for looping, with the facts its reason carries (journal.why's looping).
LOOPING_WHY = {
    "code": "looping",
    "refusals": 5,
    "minutes": 10,
    "calls": [{"tool": "refund", "error_class": "permanent", "attempts": 3}],
}
NOTHING_REPORTED = {"retries": 0, "repairs": 0, "replans": 0, "reflections": 0, "escalations": 0}
OK, FAILED = IntentStatus.PERFORMED, IntentStatus.FAILED


def counts(calls: list[Call], **reported: int) -> Any:
    return attempts_of(calls, reported={**NOTHING_REPORTED, **reported}, looping=False)


def test_a_call_repeated_after_a_403_is_a_retry_each_time() -> None:
    calls = [Call("refund", {"n": 1}, FAILED, "permanent") for _ in range(7)]
    got = counts(calls)
    assert (got.attempts, got.retries, got.repairs, got.replans) == (7, 6, 0, 0)
    assert got.derived == {"retries": 6, "repairs": 0, "replans": 0}
    assert got.error_classes == {"permanent": 7}
    assert [(t.tool, t.attempts, t.outcomes) for t in got.by_tool] == [("refund", 7, {"permanent": 7})]


def test_a_transient_failure_then_success_is_one_retry_and_one_ok() -> None:
    got = counts([Call("refund", {"n": 1}, FAILED, "transient"), Call("refund", {"n": 1}, OK)])
    assert (got.attempts, got.retries, got.repairs, got.replans) == (2, 1, 0, 0)
    assert got.by_tool[0].outcomes == {"transient": 1, "ok": 1}


def test_changed_arguments_after_invalid_input_are_a_repair_not_a_retry() -> None:
    got = counts(
        [
            Call("credit", {"amount": -1}, FAILED, "invalid_input"),
            Call("credit", {"amount": "x"}, FAILED, "invalid_input"),
            Call("credit", {"amount": 5}, OK),
        ]
    )
    assert (got.retries, got.repairs, got.replans) == (0, 2, 0)
    assert got.error_classes == {"invalid_input": 2}


def test_changed_arguments_after_a_permanent_failure_are_neither_retry_nor_repair() -> None:
    got = counts([Call("credit", {"a": 1}, FAILED, "permanent"), Call("credit", {"a": 2}, OK)])
    assert (got.retries, got.repairs, got.replans) == (0, 0, 0)


def test_another_call_after_a_conflict_is_one_replan() -> None:
    got = counts(
        [
            Call("reserve", {"sku": "A"}, FAILED, "conflict"),
            Call("reserve", {"sku": "A"}, FAILED, "conflict"),  # the same call: a retry
            Call("read_stock", {"sku": "A"}, OK),  # the replan
            Call("reserve", {"sku": "B"}, OK),  # after the replan: nothing more
        ]
    )
    assert (got.attempts, got.retries, got.repairs, got.replans) == (4, 1, 0, 1)
    assert [t.tool for t in got.by_tool] == ["reserve", "read_stock"]
    assert got.by_tool[0].outcomes == {"conflict": 2, "ok": 1}


def test_other_statuses_are_counted_by_status_and_not_as_errors() -> None:
    got = counts(
        [
            Call("ship", {}, IntentStatus.UNKNOWN),
            Call("ship", {"x": 1}, IntentStatus.INTENDED),
            Call("ship", {"x": 2}, FAILED, ""),
        ]
    )
    assert got.by_tool[0].outcomes == {"unknown": 1, "intended": 1, "failed": 1}
    assert got.error_classes == {}
    assert got.retries == 0


def test_the_larger_of_derived_and_reported_is_the_count_and_both_are_kept() -> None:
    calls = [Call("refund", {"n": 1}, FAILED, "transient"), Call("refund", {"n": 1}, OK)]
    got = counts(calls, retries=3, repairs=0, replans=2, reflections=4, escalations=1)
    assert (got.retries, got.repairs, got.replans, got.reflections, got.escalations) == (3, 0, 2, 4, 1)
    assert got.derived == {"retries": 1, "repairs": 0, "replans": 0}
    assert got.reported == {"retries": 3, "repairs": 0, "replans": 2, "reflections": 4, "escalations": 1}


def test_a_step_read_without_its_arguments_is_judged_by_the_failure_before_it() -> None:
    got = counts(
        [
            Call("refund", {"n": 1}, FAILED, "transient"),
            Call("refund", None, OK),  # the same call is the response to a transient failure
            Call("credit", {"n": 1}, FAILED, "invalid_input"),
            Call("credit", None, OK),  # the journal refuses the same call: it was repaired
        ]
    )
    assert (got.retries, got.repairs) == (1, 1)


# --- over a handover's rows -----------------------------------------------------------------------

_moments = itertools.count()


def _intent(run: Run, tool: str, args: dict[str, Any], status: str, error_class: str = "") -> Intent:
    n = next(_moments)
    at = datetime(2026, 11, 3, tzinfo=UTC) + timedelta(seconds=n)
    return factories.call_row(run, tool, args, status, n=n, at=at, error_class=error_class)


@pytest.mark.django_db
def test_the_handover_carries_the_counts_of_its_rows_and_the_loop_flag(make_run: Callable[..., Run]) -> None:
    run = make_run()
    for _ in range(3):
        _intent(run, "refund", {"n": 1}, FAILED, "permanent")
    _intent(run, "credit", {"a": -1}, FAILED, "invalid_input")
    _intent(run, "credit", {"a": 5}, OK)
    Run.objects.filter(pk=run.pk).update(reflections=4, outcome_why=LOOPING_WHY)
    run.refresh_from_db()

    got = handover_build(handover_rows(run)).attempts

    assert (got.attempts, got.retries, got.repairs, got.replans) == (5, 2, 1, 0)
    assert (got.reflections, got.escalations, got.looping) == (4, 0, True)
    assert got.error_classes == {"permanent": 3, "invalid_input": 1}
    assert run_attempts(handover_rows(run)) == got


@pytest.mark.django_db
def test_a_run_without_the_loop_code_is_not_flagged(make_run: Callable[..., Run]) -> None:
    run = make_run()
    _intent(run, "refund", {"n": 1}, OK)
    got = run_attempts(handover_rows(run))
    assert (got.attempts, got.looping, got.by_tool[0].outcomes) == (1, False, {"ok": 1})
