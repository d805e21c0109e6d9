"""Runs in each state retention must tell apart, made through the journal's and the console's own
services (tests/factories.py's rule), and the archive store in a temporary directory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from compensations.models import Compensation, CompensationStatus, DeadLetter
from console import actions
from handover import run_state_token
from journal import services as journal
from journal import transitions
from journal.models import Escalation, Intent, IntentStatus, JournalEvent, OutcomeReason, Run, Tenant
from journal.tool_errors import DispatchResult
from journal.why import RunWhy, why

AGENT = journal.Actor.agent("returns-bot")
SWEEPER = journal.Actor.system("test-sweeper")


@pytest.fixture(autouse=True)
def archive_dir(tmp_path: Path) -> Iterator[Path]:
    store = tmp_path / "archive"
    with override_settings(SEAM_ARCHIVE_DIR=store):
        yield store


def past_retention(tenant: Tenant) -> datetime:
    """A moment when a run that ended now is past its tenant's retention."""
    return timezone.now() + timedelta(days=tenant.retention_days, hours=1)


def performed(run: Run, turn: int) -> Intent:
    return journal.perform(
        run=run,
        tool="issue_refund",
        args={"amount": f"{turn}.00"},
        turn=turn,
        actor=AGENT,
        dispatch=lambda args, key: DispatchResult(summary="refunded", receipt={"refund_id": key[:8]}),
    ).intent


def escalate(run: Run) -> None:
    with transaction.atomic():
        journal.run_hand_over(
            run=run,
            reason=OutcomeReason.POLICY,
            why=why(RunWhy.NO_POLICY, task_type="returns"),
            actor=SWEEPER,
        )


def resolve(run: Run, lead: Any) -> Run:
    """A person closes the run's escalation from the console: its audit row is the run's."""
    run = Run.objects.get(pk=run.pk)
    ctx = actions.StaffContext(user=lead, tenant=run.tenant, request_id="req-retention")
    return actions.run_resolve(ctx, run_id=run.pk, note="refunded by phone", state=run_state_token(run))


@pytest.fixture
def lead(persona: Callable[..., Any], tenant: Tenant) -> Any:
    return persona("team_lead", tenant)


@pytest.fixture
def completed_run(make_run: Callable[..., Run]) -> Callable[[str], Run]:
    def make(ticket: str) -> Run:
        run = make_run(ticket_id=ticket)
        performed(run, 1)
        performed(run, 2)
        return journal.run_complete(run=run, actor=AGENT)

    return make


@pytest.fixture
def resolved_run(make_run: Callable[..., Run], lead: Any) -> Callable[[str], Run]:
    """Escalated after one call, then resolved by a person: it has audit rows."""

    def make(ticket: str) -> Run:
        run = make_run(ticket_id=ticket)
        performed(run, 1)
        escalate(run)
        return resolve(run, lead)

    return make


@pytest.fixture
def runs_in_every_state(
    make_run: Callable[..., Run], completed_run: Callable[[str], Run], lead: Any
) -> dict[str, Run]:
    """One run per reason a run is not archivable, each otherwise ended long enough ago."""
    running = make_run(ticket_id="T-RUNNING")
    awaiting = make_run(ticket_id="T-AWAITING")
    performed(awaiting, 1)
    escalate(awaiting)

    unknown = make_run(ticket_id="T-UNKNOWN")
    call = journal.intent_record(
        run=unknown, tool="issue_refund", args={"amount": "1.00"}, turn=1, actor=AGENT
    )
    with transaction.atomic():
        transitions.intent_transition(
            intent=Intent.objects.get(pk=call.intent.pk),
            source=IntentStatus.INTENDED,
            target=IntentStatus.UNKNOWN,
            actor=SWEEPER,
            event=JournalEvent.Kind.INTENT_RECONCILED,
            changes={"unknown_reason": "the downstream cannot say"},
        )
    escalate(unknown)
    resolve(unknown, lead)

    escalation = completed_run("T-ESCALATION")
    # An escalation left open on a run that ended otherwise (opened by an earlier hand-over
    # whose run a person resumed and the agent finished): the journal's own row, kept open.
    Escalation.objects.create(run=escalation, reason=OutcomeReason.POLICY, created_at=timezone.now())

    dead_letter = completed_run("T-DEAD-LETTER")
    compensation = Compensation.objects.create(
        original=dead_letter.intents.first(), status=CompensationStatus.DEAD_LETTERED
    )
    DeadLetter.objects.create(
        compensation=compensation, error_class="permanent", error="the provider refused the undo", attempts=5
    )
    return {
        "running": running,
        "awaiting_person": awaiting,
        "unknown_intent": unknown,
        "open_escalation": escalation,
        "open_dead_letter": dead_letter,
    }
