"""The queue's counts say why each run waits now, as its handover does, and read only what that
needs: each escalated run's stated reason is checked by lookups on the run's own indexes, the
open call only where no unknown one answered it already, the dead letters by their
compensation's copy of the run (bench/pages.py: the counts were most of the queue page's time at
1,000,000 runs)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from compensations.models import Compensation, CompensationStatus, DeadLetter
from console import selectors
from handover import handover_for
from journal import services
from journal.models import Intent, IntentStatus, OutcomeReason, Run, RunStatus
from journal.services import Actor
from journal.why import RunWhy, why

pytestmark = pytest.mark.django_db(transaction=True)

SWEEPER = Actor.system("test-sweep")


def _call(run: Run, n: int, actor: Actor, *, status: str) -> Intent:
    """A call of `run` left in `status`: performed through the journal, or open, or unknown."""
    intent = services.intent_record(
        run=run, tool="start_return", args={"order_id": f"Q-{n}"}, turn=n, actor=actor
    ).intent
    if status == IntentStatus.PERFORMED:
        services.outcome_record(intent=intent, ok=True, receipt={"label": f"RL-{n}"}, actor=actor)
    elif status == IntentStatus.UNKNOWN:
        Intent.objects.filter(pk=intent.pk).update(status=IntentStatus.UNKNOWN)
    return Intent.objects.get(pk=intent.pk)


def _waiting(make_run: Callable[..., Run], ticket: str, reason: str, calls: list[str], actor: Actor) -> Run:
    """A run with calls in the statuses `calls` names, then handed to a person for `reason`."""
    run = make_run(ticket_id=ticket)
    for n, status in enumerate(calls, start=1):
        _call(run, n, actor, status=status)
    reasons = {
        OutcomeReason.UNKNOWN_OUTCOME: why(RunWhy.CALLS_UNKNOWN, calls=[]),
        OutcomeReason.COMPENSATION_FAILED: why(
            RunWhy.UNDO_FAILED, tool="start_return", error_class="permanent", error="refused"
        ),
    }
    with transaction.atomic():
        services.run_hand_over(run=run, reason=reason, why=reasons[reason], actor=SWEEPER)
    return Run.objects.select_related("tenant").get(pk=run.pk)


def _dead_letter(run: Run, *, resolved: bool) -> None:
    performed = run.intents.filter(status=IntentStatus.PERFORMED).first()
    assert performed is not None
    compensation = Compensation.objects.create(original=performed, status=CompensationStatus.DEAD_LETTERED)
    DeadLetter.objects.create(
        compensation=compensation,
        error_class="permanent",
        error="refused",
        attempts=3,
        resolved_at=timezone.now() if resolved else None,
    )


@pytest.fixture
def waiting(make_run: Callable[..., Run], agent_actor: Actor) -> Iterator[dict[str, Run]]:
    unknown, failed = OutcomeReason.UNKNOWN_OUTCOME, OutcomeReason.COMPENSATION_FAILED
    performed, open_, uncertain = IntentStatus.PERFORMED, IntentStatus.INTENDED, IntentStatus.UNKNOWN
    runs = {
        "unknown call": _waiting(make_run, "T-UNKNOWN", unknown, [performed, uncertain], agent_actor),
        "unknown settled": _waiting(make_run, "T-SETTLED", unknown, [performed, performed], agent_actor),
        "open call": _waiting(make_run, "T-OPEN", unknown, [performed, open_], agent_actor),
        "dead letter open": _waiting(make_run, "T-LETTER", failed, [performed], agent_actor),
        "dead letter resolved": _waiting(make_run, "T-RESOLVED", failed, [performed], agent_actor),
    }
    _dead_letter(runs["dead letter open"], resolved=False)
    _dead_letter(runs["dead letter resolved"], resolved=True)
    yield runs


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _subplans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [node for node in _nodes(plan) if node.get("Parent Relationship") == "SubPlan"]


def _relations(plan: dict[str, Any]) -> set[str]:
    return {node["Relation Name"] for node in _nodes(plan) if "Relation Name" in node}


def test_the_counts_say_why_each_run_waits_as_its_handover_does(
    waiting: dict[str, Run], persona: Any
) -> None:
    tenant = waiting["unknown call"].tenant
    expected = Counter(
        run.outcome_reason if handover_for(run).reason_holds else selectors.ANSWERED
        for run in waiting.values()
    )
    assert expected == Counter(
        {OutcomeReason.UNKNOWN_OUTCOME: 2, OutcomeReason.COMPENSATION_FAILED: 1, selectors.ANSWERED: 2}
    )

    counts = selectors.queue_counts(tenant=tenant, user_id=None, now=timezone.now())

    assert counts.by_reason == dict(expected)
    # A page of the queue says the same of each run, with the "?" badge on the unknown call.
    user = persona("support_staff", tenant)
    page = selectors.queue_runs(
        tenant=tenant, user=user, filters=selectors.QueueFilters(), now=timezone.now()
    )
    shown = {run.ticket_id: run for run in selectors.queue_rows(page)}
    for run in waiting.values():
        reason = run.outcome_reason if handover_for(run).reason_holds else selectors.ANSWERED
        assert shown[run.ticket_id].queue_reason == reason, run.ticket_id
        assert shown[run.ticket_id].has_unknown is (run.ticket_id == "T-UNKNOWN")


def test_the_counts_look_for_an_open_call_only_where_no_unknown_one_answered_and_never_through_intents_for_dead_letters(
    waiting: dict[str, Run],
) -> None:
    tenant = waiting["unknown call"].tenant
    with CaptureQueriesContext(connection) as read:
        selectors.queue_counts(tenant=tenant, user_id=None, now=timezone.now())
    (counting,) = read.captured_queries
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + counting["sql"])
        (document,) = cursor.fetchone()
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]
    subplans = _subplans(plan)
    # Three per-run lookups: the unknown call, the open call, the open dead letter.
    assert len(subplans) == 3, [node["Subplan Name"] for node in subplans]
    looked_for = {
        ("dead letter" if "compensations_deadletter" in _relations(node) else "call"): node
        for node in subplans
    }
    letters = looked_for["dead letter"]
    # By the compensation's run: no intent is read to find a run's dead letters.
    assert _relations(letters) == {"compensations_deadletter", "compensations_compensation"}
    assert letters["Actual Loops"] == 2  # the two runs whose undo failed
    calls = sorted((node for node in subplans if node is not letters), key=lambda node: node["Actual Loops"])
    # The unknown call is looked for on the three runs said to have one; the open call only on
    # the two of them where none was found (the settled one and the open one).
    assert [node["Actual Loops"] for node in calls] == [2, 3]
    assert all(relation.startswith("journal_intent") for node in calls for relation in _relations(node))
    assert RunStatus.RUNNING not in {run.status for run in waiting.values()}
