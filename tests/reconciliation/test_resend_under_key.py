"""Settling a call no lookup can settle by sending it again under its key, against the sandbox's
provider, which really deduplicates by key (sandbox.ledger): the world's own ledger shows one
effect whatever happened before, and a resend is made only inside the key's lifetime, never for
a tool that does not honour its key, and never again once the provider refuses the key."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.utils import timezone

from handover import handover_for
from journal import services as journal
from journal.models import Intent, IntentStatus, Run
from journal.why import CallVerdict
from reconciliation.services import ReconcileOutcome, intent_reconcile
from tools import services as tool_services
from tools.registry import get_tool

pytestmark = pytest.mark.django_db(transaction=True)

REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}
SWEEPER = journal.Actor.system("test-sweeper")


def _record(run: Run) -> Intent:
    return journal.intent_record(
        run=run, tool="issue_refund", args=REFUND, turn=1, actor=journal.Actor.agent("bot")
    ).intent


def _aged(intent: Intent, ago: timedelta) -> None:
    Intent.objects.filter(pk=intent.pk).update(intended_at=timezone.now() - ago)


def _fault(sandbox: str, **rule: Any) -> None:
    response = requests.post(f"{sandbox}/sandbox/api/faults/", json=rule, timeout=5)
    assert response.status_code == 201, response.text


def _lookup_cannot_say(sandbox: str) -> None:
    _fault(sandbox, provider="payments", operation="lookup", fault="unknown_lookup", remaining=1)


@pytest.mark.parametrize("provider_acted", [True, False], ids=["acted-before-the-crash", "never-reached"])
def test_a_call_no_lookup_can_settle_is_sent_again_under_its_key_and_acts_once(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any, provider_acted: bool
) -> None:
    intent = _record(make_run())
    if provider_acted:
        # The agent's call reached the provider; the agent died before recording the outcome.
        get_tool("issue_refund").get_connector().perform(REFUND, intent.idempotency_key)
    _lookup_cannot_say(sandbox_tools)

    result = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    intent.refresh_from_db()
    (effect,) = ledger.filter(idempotency_key=intent.idempotency_key)
    assert (result.outcome, intent.status) == (ReconcileOutcome.PERFORMED, IntentStatus.PERFORMED)
    assert intent.receipt == effect.receipt
    assert intent.verdict["code"] == CallVerdict.RESENT_UNDER_KEY
    assert intent.verdict["lookup"]["code"] == CallVerdict.DOWNSTREAM_CANNOT_SAY


def test_past_the_keys_lifetime_it_is_never_sent_again(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any
) -> None:
    intent = _record(make_run())
    _aged(intent, timedelta(seconds=get_tool("issue_refund").key_lifetime + 60))
    _lookup_cannot_say(sandbox_tools)

    result = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    intent.refresh_from_db()
    assert (result.outcome, intent.verdict["code"]) == (
        ReconcileOutcome.UNKNOWN,
        CallVerdict.DOWNSTREAM_CANNOT_SAY,
    )
    assert not ledger.filter(idempotency_key=intent.idempotency_key).exists()


def test_a_tool_that_does_not_honour_its_key_is_only_asked_about(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = dataclasses.replace(get_tool("issue_refund"), honours_key=False)
    monkeypatch.setattr(tool_services, "find_tool", lambda name: spec)
    intent = _record(make_run())
    _lookup_cannot_say(sandbox_tools)

    assert intent_reconcile(intent_id=intent.pk, actor=SWEEPER).outcome == ReconcileOutcome.UNKNOWN
    assert not ledger.filter(idempotency_key=intent.idempotency_key).exists()


def test_a_refused_key_is_evidence_for_a_person_and_never_a_second_send(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any
) -> None:
    run = make_run()
    intent = _record(run)
    _lookup_cannot_say(sandbox_tools)
    _fault(sandbox_tools, provider="payments", operation="refund", fault="key_conflict", remaining=1)

    intent_reconcile(intent_id=intent.pk, actor=SWEEPER)
    again = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)  # not open: nothing sent again

    intent.refresh_from_db()
    assert (intent.status, intent.verdict["code"], intent.verdict["error_class"]) == (
        IntentStatus.UNKNOWN,
        CallVerdict.KEY_REFUSED,
        "conflict",
    )
    assert again.outcome == ReconcileOutcome.SKIPPED
    assert not ledger.filter(idempotency_key=intent.idempotency_key).exists()
    answer = requests.get(
        f"{sandbox_tools}/sandbox/api/calls/",
        params={"provider": "payments", "operation": "refund"},
        timeout=5,
    )
    assert len(answer.json()["calls"]) == 1  # the one resend, refused
    [uncertain] = handover_for(Run.objects.get(pk=run.pk)).uncertain
    assert "refused the key" in uncertain.why


def test_a_resend_that_fails_for_now_is_asked_again_and_then_settles(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any
) -> None:
    intent = _record(make_run())
    _fault(sandbox_tools, provider="payments", operation="lookup", fault="unknown_lookup", remaining=2)
    _fault(sandbox_tools, provider="payments", operation="refund", fault="fail_before", remaining=1)

    first = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)
    Intent.objects.filter(pk=intent.pk).update(next_lookup_at=None)  # the backoff has passed
    second = intent_reconcile(intent_id=intent.pk, actor=SWEEPER)

    assert (first.outcome, second.outcome) == (ReconcileOutcome.RETRY_LATER, ReconcileOutcome.PERFORMED)
    assert ledger.filter(idempotency_key=intent.idempotency_key).count() == 1


class _Died(BaseException):
    """The worker's death between the provider's answer and the settle's commit."""


def test_a_sweeper_that_dies_after_resending_leaves_one_effect_for_the_next(
    sandbox_tools: str, make_run: Callable[..., Run], ledger: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    intent = _record(make_run())
    _fault(sandbox_tools, provider="payments", operation="lookup", fault="unknown_lookup", remaining=2)
    resend = tool_services.intent_resend_under_key

    def resend_then_die(*, intent: Intent) -> Any:
        resend(intent=intent)
        raise _Died

    monkeypatch.setattr(tool_services, "intent_resend_under_key", resend_then_die)
    with pytest.raises(_Died):
        intent_reconcile(intent_id=intent.pk, actor=SWEEPER)
    assert Intent.objects.get(pk=intent.pk).status == IntentStatus.INTENDED
    monkeypatch.setattr(tool_services, "intent_resend_under_key", resend)
    Intent.objects.filter(pk=intent.pk).update(next_lookup_at=None)  # its lease lapsed

    assert intent_reconcile(intent_id=intent.pk, actor=SWEEPER).outcome == ReconcileOutcome.PERFORMED
    (effect,) = ledger.filter(idempotency_key=intent.idempotency_key)
    assert Intent.objects.get(pk=intent.pk).receipt == effect.receipt
