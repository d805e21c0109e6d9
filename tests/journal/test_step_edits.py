"""journal.step_edits: a person's correction of a not-done step's arguments. The plan's step is
rewritten with the arguments the tool's schema accepts, under a key derived from them (never the
old one), with an event holding both; a run not waiting for a person, a step already sent, bad
arguments and a key already used are refused, and nothing is written then."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from journal.errors import InvalidInput, NotFound
from journal.keys import idempotency_key
from journal.models import Intent, IntentStatus, JournalEvent, Run
from journal.selectors import plan_with_keys
from journal.services import Actor
from journal.step_edits import StepNotEditable, step_args_edit
from tests.support.stuck_runs import escalated_run, sandbox_tools_declared

pytestmark = pytest.mark.django_db

PERSON = Actor(kind="user", name="support")
NEW_REFUND = {"order_id": "SU-90317", "amount": "9.95", "currency": "USD"}


@pytest.fixture(autouse=True)
def sandbox_schemas() -> Iterator[None]:
    with sandbox_tools_declared():
        yield


@pytest.fixture
def run(make_run: Callable[..., Run]) -> Run:
    return escalated_run(make_run, task_type="no-policy")


def _key(run: Run, tool: str) -> str:
    return next(step["key"] for step in plan_with_keys(run) if step["tool"] == tool)


def _edit(run: Run, tool: str, args: Any) -> Any:
    with transaction.atomic():
        locked = Run.objects.select_for_update().select_related("tenant").get(pk=run.pk)
        return step_args_edit(run=locked, step_key=_key(run, tool), args=args, actor=PERSON)


def _intent(run: Run, tool: str, status: str, *, key: str = "", error_class: str = "") -> Intent:
    args = next(step["args"] for step in run.plan if step["tool"] == tool)
    return Intent.objects.create(
        run=run,
        step_id=f"{run.pk}:9:{tool}",
        turn=9,
        tool=tool,
        args=args,
        idempotency_key=key or _key(run, tool),
        status=status,
        error_class=error_class,
        intended_at=timezone.now(),
    )


def test_an_edit_rewrites_the_step_under_a_key_derived_from_the_new_arguments(run: Run) -> None:
    old_key = _key(run, "issue_refund")
    version = run.version

    edited = _edit(run, "issue_refund", {"currency": "USD", "amount": "9.95", "order_id": "SU-90317"})

    run.refresh_from_db()
    [step] = [s for s in plan_with_keys(run) if s["tool"] == "issue_refund"]
    assert step["args"] == NEW_REFUND
    assert run.version == version + 1
    expected = idempotency_key(
        key_namespace=run.tenant.key_namespace,
        run_id=str(run.pk),
        tool="issue_refund",
        args=NEW_REFUND,
        policy_version=run.policy_version,
    )
    assert step["key"] == edited.new_key == expected != old_key
    # Stable: the same arguments give the same key on every read (a resumption's replay).
    assert _key(Run.objects.get(pk=run.pk), "issue_refund") == expected
    [event] = JournalEvent.objects.filter(run=run, kind=JournalEvent.Kind.STEP_ARGS_EDITED)
    assert event.data == {
        "index": 2,
        "tool": "issue_refund",
        "old_args": {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"},
        "new_args": NEW_REFUND,
        "old_key": old_key,
        "new_key": expected,
    }
    assert (event.actor_kind, event.actor_name, event.intent_id) == ("user", "support", None)
    # The other steps keep their arguments and keys.
    assert [s["tool"] for s in run.plan] == [
        "start_return",
        "offer_replacement",
        "issue_refund",
        "notify_seller",
    ]
    assert run.plan[0]["args"] == {"order_id": "SU-90317"}


def test_a_failed_step_is_edited_and_its_failed_call_keeps_the_old_key(run: Run) -> None:
    failed = _intent(run, "issue_refund", IntentStatus.FAILED, error_class="invalid_input")

    edited = _edit(run, "issue_refund", NEW_REFUND)

    assert edited.event.intent_id == failed.pk
    failed.refresh_from_db()
    assert failed.idempotency_key == edited.old_key != edited.new_key
    assert not Intent.objects.filter(idempotency_key=edited.new_key).exists()


def _nothing_written(run: Run, version: int) -> None:
    fresh = Run.objects.get(pk=run.pk)
    assert fresh.version == version
    assert fresh.plan == run.plan
    assert not JournalEvent.objects.filter(run=run, kind=JournalEvent.Kind.STEP_ARGS_EDITED).exists()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"order_id": "SU-90317", "amount": "nine", "currency": "USD"}, "args.amount"),
        ({"order_id": "SU-90317", "amount": "9.95", "currency": "XXX"}, "args.currency"),
        ({"order_id": "SU-90317", "amount": "9.95"}, "args"),  # currency is required
        ({"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}, "args"),  # unchanged
        ("not an object", "args"),
    ],
)
def test_arguments_the_schema_refuses_are_refused_naming_the_field(run: Run, args: Any, field: str) -> None:
    version = run.version
    with pytest.raises(InvalidInput) as refused:
        _edit(run, "issue_refund", args)
    assert refused.value.field == field
    assert refused.value.status_code == 400
    _nothing_written(run, version)


@pytest.mark.parametrize("status", [IntentStatus.PERFORMED, IntentStatus.INTENDED, IntentStatus.UNKNOWN])
def test_a_step_already_sent_is_not_edited(run: Run, status: str) -> None:
    _intent(run, "issue_refund", status)
    version = run.version
    with pytest.raises(StepNotEditable) as refused:
        _edit(run, "issue_refund", NEW_REFUND)
    assert refused.value.status_code == 409 and refused.value.field == "step"
    _nothing_written(run, version)


def test_a_run_nobody_waits_on_is_not_edited(make_run: Callable[..., Run]) -> None:
    running = make_run()
    with pytest.raises(StepNotEditable):
        _edit(running, "issue_refund", NEW_REFUND)
    _nothing_written(running, running.version)


def test_a_key_already_used_is_never_reused_for_the_new_arguments(run: Run) -> None:
    """Arguments whose key a call of this run already carries (here: edited away from, then
    back to, a step whose call failed) are refused: that key belongs to the earlier call."""
    _intent(run, "issue_refund", IntentStatus.FAILED)
    old_args = next(step["args"] for step in run.plan if step["tool"] == "issue_refund")
    _edit(run, "issue_refund", NEW_REFUND)
    run.refresh_from_db()
    version = run.version

    with pytest.raises(StepNotEditable) as refused:
        _edit(run, "issue_refund", old_args)
    assert refused.value.field == "args"
    assert Run.objects.get(pk=run.pk).version == version


def test_an_unknown_step_is_not_found(run: Run) -> None:
    with transaction.atomic(), pytest.raises(NotFound):
        step_args_edit(run=Run.objects.get(pk=run.pk), step_key="0" * 64, args=NEW_REFUND, actor=PERSON)


def test_the_edit_runs_only_inside_the_transaction_that_locks_the_run(run: Run) -> None:
    # pytest-django's test transaction is not the caller's: without one of its own, refused.
    with pytest.raises(RuntimeError):
        step_args_edit(run=run, step_key=_key(run, "issue_refund"), args=NEW_REFUND, actor=PERSON)
