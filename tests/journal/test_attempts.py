"""The error taxonomy's responses at the boundary (journal.attempts): after a failed call, what
the agent may send next with that tool is decided by the failure's class, each refusal a typed
code over the REST API as in process, and a run that keeps being refused goes to a person as
looping. A bug answer stops the run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from handover import handover_for
from handover.why_words import run_why_words
from insights.errors import errors_per_task_type
from insights.selectors import InsightsFilters
from journal import services
from journal.attempts import AttemptCode, AttemptRefused, attempt_allow
from journal.models import Escalation, IntentStatus, JournalEvent, Run, RunStatus
from journal.why import RunWhy
from tests.agent_api.test_api_journal import new_agent_client

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = services.Actor.agent("bot")
PERSON = services.Actor.system("lead")
REFUND = {"order_id": "SO-1", "amount": "9.99"}
BUDGETS = {"repairs": 2, "retries": 2, "retry_spacing_seconds": 0.0, "loop_refusals": 50, "loop_minutes": 10}


# A call made again is a new intent: the same tool and arguments at a new turn carry the next
# occurrence (the client derives it), so its own key. The same key again is a replay.
def _failed(run: Run, turn: int, error_class: str, args: dict[str, Any] = REFUND) -> None:
    intent = services.intent_record(
        run=run, tool="issue_refund", args=args, turn=turn, occurrence=turn, actor=AGENT
    ).intent
    services.outcome_record(intent=intent, ok=False, summary="refused", error_class=error_class, actor=AGENT)


def _next(run: Run, turn: int, args: dict[str, Any] = REFUND) -> Any:
    return services.intent_record(
        run=run, tool="issue_refund", args=args, turn=turn, occurrence=turn, actor=AGENT
    )


@override_settings(SEAM_ERROR_BUDGETS={"*": BUDGETS})
def test_after_a_permanent_failure_the_same_call_is_refused_and_a_changed_one_admitted(
    make_run: Callable[..., Run],
) -> None:
    run = make_run()
    _failed(run, 1, "permanent")

    with pytest.raises(AttemptRefused) as refused:
        _next(run, 2)
    changed = _next(run, 3, {**REFUND, "amount": "5.00"})

    assert (refused.value.code, refused.value.status_code) == (AttemptCode.PERMANENT_REPEATED, 409)
    assert changed.created and changed.intent.status == IntentStatus.INTENDED
    assert (
        JournalEvent.objects.filter(run=run, kind="attempt_refused", data__code="permanent_repeated").count()
        == 1
    )
    assert run.intents.count() == 2  # the refused call wrote no intent


@override_settings(SEAM_ERROR_BUDGETS={"*": BUDGETS})
def test_invalid_input_is_repaired_within_its_budget(make_run: Callable[..., Run]) -> None:
    run = make_run()
    _failed(run, 1, "invalid_input", {**REFUND, "amount": "a"})
    with pytest.raises(AttemptRefused) as same:
        _next(run, 2, {**REFUND, "amount": "a"})
    _failed(run, 3, "invalid_input", {**REFUND, "amount": "b"})  # repair 1
    _failed(run, 4, "invalid_input", {**REFUND, "amount": "c"})  # repair 2: the budget's last
    with pytest.raises(AttemptRefused) as spent:
        _next(run, 5, {**REFUND, "amount": "1.00"})

    assert (same.value.code, spent.value.code) == (AttemptCode.INVALID_REPEATED, AttemptCode.REPAIRS_SPENT)


@override_settings(SEAM_ERROR_BUDGETS={"*": {**BUDGETS, "retry_spacing_seconds": 60.0}})
def test_a_transient_retry_that_comes_too_soon_is_told_when_to_come_back(
    make_run: Callable[..., Run],
) -> None:
    run = make_run()
    _failed(run, 1, "transient")

    with pytest.raises(AttemptRefused) as refused:
        _next(run, 2)

    assert refused.value.code == AttemptCode.RETRY_TOO_SOON
    assert refused.value.retry_after is not None and 55 < refused.value.retry_after <= 60


@override_settings(SEAM_ERROR_BUDGETS={"*": BUDGETS})
def test_transient_retries_are_bounded(make_run: Callable[..., Run]) -> None:
    run = make_run()
    for turn in (1, 2, 3):  # the call, and its two retries
        _failed(run, turn, "transient")
    with pytest.raises(AttemptRefused) as refused:
        _next(run, 4)
    assert refused.value.code == AttemptCode.RETRIES_SPENT


@override_settings(SEAM_ERROR_BUDGETS={"*": {**BUDGETS, "loop_refusals": 3}})
def test_a_run_that_keeps_repeating_a_permanent_failure_goes_to_a_person_as_looping(
    make_run: Callable[..., Run],
) -> None:
    run = make_run()
    _failed(run, 1, "permanent")
    for turn in (2, 3, 4):
        with pytest.raises(AttemptRefused):
            _next(run, turn)

    run.refresh_from_db()
    assert (run.status, run.awaiting_person, run.outcome_why["code"]) == (
        RunStatus.ESCALATED,
        True,
        RunWhy.LOOPING,
    )
    assert run.outcome_why["calls"] == [{"tool": "issue_refund", "error_class": "permanent", "attempts": 1}]
    assert run_why_words(run.outcome_why).startswith("looping on a permanent error: 3 calls refused in 10")
    assert Escalation.objects.filter(run=run, resolved_at__isnull=True).count() == 1
    with pytest.raises(services.Conflict):  # the run admits nothing more
        _next(run, 5, {**REFUND, "amount": "1.00"})
    # Shown where people look: the handover's counts and flag, the page, and insights.
    handover = handover_for(Run.objects.select_related("tenant").get(pk=run.pk))
    assert handover.attempts.looping and handover.reason_detail.startswith("looping on a permanent error")
    today = timezone.localdate()
    panel = errors_per_task_type(tenant=run.tenant, filters=InsightsFilters(since=today, until=today))
    [(row_label, values)] = [(row.label, row.values) for row in panel.rows]
    loops = [c.key for c in panel.columns].index("loops")
    assert (row_label, values[loops]) == (run.task_type, 1)


@override_settings(SEAM_ERROR_BUDGETS={"*": {**BUDGETS, "retry_spacing_seconds": 60.0, "loop_refusals": 2}})
def test_a_retry_storm_is_refused_but_not_called_a_permanent_loop(make_run: Callable[..., Run]) -> None:
    run = make_run()
    _failed(run, 1, "transient")
    for _ in range(3):
        with pytest.raises(AttemptRefused) as refused:
            _next(run, 2)
        assert refused.value.code == AttemptCode.RETRY_TOO_SOON

    run.refresh_from_db()
    assert (run.status, run.awaiting_person) == (RunStatus.RUNNING, False)
    assert JournalEvent.objects.filter(run=run, kind="attempt_refused").count() == 3


def test_a_bug_answer_stops_the_run_with_the_evidence(make_run: Callable[..., Run]) -> None:
    run = make_run()
    intent = services.intent_record(run=run, tool="issue_refund", args=REFUND, turn=1, actor=AGENT).intent
    services.outcome_record(
        intent=intent, ok=False, summary="KeyError: 'refund_id'", error_class="bug", actor=AGENT
    )

    run.refresh_from_db()
    assert (run.status, run.outcome_why["code"], run.outcome_why["message"]) == (
        RunStatus.ESCALATED,
        RunWhy.BUG_ANSWER,
        "KeyError: 'refund_id'",
    )


@override_settings(SEAM_ERROR_BUDGETS={"*": {**BUDGETS, "retry_spacing_seconds": 60.0}})
def test_the_rest_api_answers_each_refusal_with_its_code(make_run: Callable[..., Run], tenant: Any) -> None:
    run = make_run(tenant=tenant)
    api = new_agent_client(tenant, "runtime")
    url = f"/api/v1/runs/{run.pk}/intents/"
    first = api.post(url, {"tool": "issue_refund", "args": REFUND, "turn": 1}, format="json")
    step = first.json()["step_id"]
    failed = api.post(
        f"/api/v1/runs/{run.pk}/intents/{step}/outcome/",
        {"ok": False, "summary": "503", "error_class": "transient"},
        format="json",
    )
    again = api.post(url, {"tool": "issue_refund", "args": REFUND, "turn": 2, "occurrence": 1}, format="json")

    assert (first.status_code, failed.status_code, again.status_code) == (201, 200, 409)
    body = again.json()
    assert body["code"] == "retry_too_soon" and 55 < body["retry_after"] <= 60
    assert "tool" in body and again["Retry-After"] in {"59", "60"}


@override_settings(SEAM_ERROR_BUDGETS={"*": {**BUDGETS, "repairs": 1, "retries": 1}})
@pytest.mark.parametrize(
    ("classes", "calls", "code"),
    [
        (["permanent"], [REFUND, REFUND], "permanent_repeated"),
        (["invalid_input"], [REFUND, REFUND], "invalid_input_repeated"),
        (["invalid_input", "invalid_input"], [REFUND, {"amount": "1"}, {"amount": "2"}], "repairs_spent"),
        (["transient", "transient"], [REFUND, REFUND, REFUND], "retries_spent"),
    ],
    ids=["permanent", "invalid-input", "repairs", "retries"],
)
def test_the_rest_api_refuses_each_repeat_with_its_code(
    make_run: Callable[..., Run], tenant: Any, classes: list[str], calls: list[dict[str, Any]], code: str
) -> None:
    run = make_run(tenant=tenant)
    api = new_agent_client(tenant, "runtime")
    url = f"/api/v1/runs/{run.pk}/intents/"
    for turn, error_class in enumerate(classes, start=1):
        body = {"tool": "issue_refund", "args": calls[turn - 1], "turn": turn, "occurrence": turn}
        step = api.post(url, body, format="json").json()["step_id"]
        api.post(
            f"{url}{step}/outcome/", {"ok": False, "summary": "no", "error_class": error_class}, format="json"
        )
    last = len(calls)
    refused = api.post(
        url, {"tool": "issue_refund", "args": calls[-1], "turn": last, "occurrence": last}, format="json"
    )

    assert (refused.status_code, refused.json()["code"]) == (409, code)
    assert run.intents.count() == len(classes)
    # One refusal, one event: the agent lane answers it without the view recording it again.
    assert JournalEvent.objects.filter(run=run, kind="attempt_refused").count() == 1


# --- a person allows a refused call again --------------------------------------------------------


def _allow(run: Run, turn: int) -> AttemptCode | None:
    """attempt_allow as the console calls it: under the run's row lock, in its transaction."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        intent = locked.intents.get(turn=turn)
        return attempt_allow(run=locked, intent=intent, actor=PERSON)


@override_settings(SEAM_ERROR_BUDGETS={"*": BUDGETS})
@pytest.mark.parametrize(
    ("error_class", "code"),
    [("permanent", AttemptCode.PERMANENT_REPEATED), ("invalid_input", AttemptCode.INVALID_REPEATED)],
)
def test_a_call_a_person_allowed_is_admitted_once_and_refused_after_its_next_failure(
    make_run: Callable[..., Run], error_class: str, code: AttemptCode
) -> None:
    run = make_run()
    _failed(run, 1, error_class)
    with pytest.raises(AttemptRefused):
        _next(run, 2)

    assert _allow(run, 1) == code
    admitted = _next(run, 3)
    with pytest.raises(AttemptRefused) as while_open:  # spent by the call it admitted
        _next(run, 4)
    services.outcome_record(
        intent=admitted.intent, ok=False, summary="refused", error_class=error_class, actor=AGENT
    )
    with pytest.raises(AttemptRefused) as after:
        _next(run, 5)

    assert admitted.created and admitted.intent.status == IntentStatus.INTENDED
    assert (while_open.value.code, after.value.code) == (code, code)
    [allowed] = JournalEvent.objects.filter(run=run, kind="attempt_allowed")
    assert (allowed.intent_id, allowed.data) == (
        run.intents.get(turn=1).pk,
        {"tool": "issue_refund", "intent": run.intents.get(turn=1).pk, "code": str(code)},
    )


@override_settings(SEAM_ERROR_BUDGETS={"*": BUDGETS})
def test_a_call_the_taxonomy_does_not_refuse_is_not_allowed_and_nothing_is_written(
    make_run: Callable[..., Run],
) -> None:
    run = make_run()
    _failed(run, 1, "transient")  # retried within its budget: not refused
    _failed(run, 2, "permanent", {**REFUND, "amount": "1.00"})
    _failed(run, 3, "permanent", {**REFUND, "amount": "2.00"})

    assert _allow(run, 1) is None
    assert _allow(run, 2) == AttemptCode.PERMANENT_REPEATED
    assert _allow(run, 2) is None  # allowed already: the call is admitted, nothing to lift
    assert JournalEvent.objects.filter(run=run, kind="attempt_allowed").count() == 1
    with pytest.raises(AttemptRefused):  # the other call's refusal stands
        _next(run, 4, {**REFUND, "amount": "2.00"})


@override_settings(SEAM_ERROR_BUDGETS={"*": {**BUDGETS, "loop_refusals": 3}})
def test_refusals_before_an_allowance_no_longer_count_toward_a_loop(make_run: Callable[..., Run]) -> None:
    run = make_run()
    _failed(run, 1, "permanent")
    for turn in (2, 3):
        with pytest.raises(AttemptRefused):
            _next(run, turn)
    _allow(run, 1)
    _failed(run, 4, "permanent")  # the allowed call, failed again
    for turn in (5, 6):
        with pytest.raises(AttemptRefused):
            _next(run, turn)

    run.refresh_from_db()
    assert (run.status, run.awaiting_person) == (RunStatus.RUNNING, False)  # 2 since, not 4
    with pytest.raises(AttemptRefused):
        _next(run, 7)
    run.refresh_from_db()
    assert (run.status, run.outcome_why["code"]) == (RunStatus.ESCALATED, RunWhy.LOOPING)
