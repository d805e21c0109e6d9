"""Reconciliation works in batches (settings.SEAM_RECONCILE_BATCH_SIZE): a batch is claimed in one
transaction and settled in one, its events written in one INSERT, and each row keeps its own
outcome. A row the database refuses to settle holds back no other row of its batch."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from journal import services as journal
from journal.models import Intent, IntentStatus, JournalEvent, Run
from reconciliation import services as reconciliation
from reconciliation.services import SKIP_LEASE_LAPSED, ReconcileOutcome, intents_reconcile, reconcile_sweep
from tools.connectors import NotPerformed, Performed

pytestmark = pytest.mark.django_db(transaction=True)

SWEEPER = journal.Actor.system("test-sweeper")


def _stale_run(make_run: Callable[..., Run], rows: int) -> list[Intent]:
    run = make_run()
    intents = [
        journal.intent_record(
            run=run,
            tool="issue_refund",
            args={"order_id": f"SU-{n}", "amount": "1.00", "currency": "USD"},
            turn=n + 1,
            actor=journal.Actor.agent("bot"),
        ).intent
        for n in range(rows)
    ]
    then = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=then)
    Intent.objects.filter(run=run).update(intended_at=then)
    return intents


def _answers(monkeypatch: pytest.MonkeyPatch, answer: Callable[[Intent], Any]) -> None:
    """The downstream's answer for each row, without a network: what is measured is Seam's part."""
    monkeypatch.setattr(reconciliation.tools, "intent_lookup", lambda *, intent: answer(intent))


@override_settings(SEAM_RECONCILE_BATCH_SIZE=20)
def test_a_sweep_settles_each_batch_in_a_bounded_number_of_statements(
    make_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    intents = _stale_run(make_run, 45)
    performed = {i.pk for i in intents[::3]}
    _answers(
        monkeypatch,
        lambda intent: (
            Performed(receipt={"refund_id": f"re_{intent.pk}"}) if intent.pk in performed else NotPerformed()
        ),
    )

    with CaptureQueriesContext(connection) as queries:
        report = reconcile_sweep(run_id=intents[0].run_id, older_than=timedelta(0), actor=SWEEPER)

    assert report.counts["performed"] == 15 and report.counts["not_performed"] == 30
    # One read of the calls held back as maybe in flight; then per batch of 20 (the last one short,
    # which ends the sweep): one transaction to claim (its SELECT and UPDATE), one to settle (one
    # compare-and-swap of every row that writes the same columns, one INSERT of the events). One
    # row at a time, it was two transactions and five statements per row.
    statements = [q["sql"] for q in queries.captured_queries]
    assert statements.count("COMMIT") == 2 * 3
    assert sum(s.startswith('INSERT INTO "journal_journalevent"') for s in statements) == 3
    # The settle names the runs' month's partition, under the parent's name.
    settles = [
        s for s in statements if re.match(r'UPDATE "journal_intent_\d{4}_\d{2}" AS "journal_intent" SET', s)
    ]
    assert len(settles) == 3 and all('SET "next_lookup_at" = v.' in s for s in settles)
    assert len(statements) == 1 + 3 * 8, "\n".join(s[:90] for s in statements)
    assert Intent.objects.filter(pk__in=performed, status=IntentStatus.PERFORMED).count() == 15
    assert Intent.objects.filter(run_id=intents[0].run_id, status=IntentStatus.NOT_PERFORMED).count() == 30
    for intent in Intent.objects.filter(pk__in=performed):
        assert intent.receipt == {"refund_id": f"re_{intent.pk}"} and intent.next_lookup_at is None
    events = JournalEvent.objects.filter(run_id=intents[0].run_id, kind=JournalEvent.Kind.INTENT_RECONCILED)
    assert sorted(events.values_list("intent_id", flat=True)) == sorted(i.pk for i in intents)


@override_settings(SEAM_RECONCILE_BATCH_SIZE=10)
def test_a_row_the_database_refuses_holds_back_no_other_row_of_its_batch(
    make_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    intents = _stale_run(make_run, 10)
    poisoned = intents[4]
    # PostgreSQL's jsonb refuses a NUL character: the batch's settle fails as a whole.
    _answers(
        monkeypatch,
        lambda intent: Performed(receipt={"refund_id": "re\u0000" if intent.pk == poisoned.pk else "re_ok"}),
    )

    results = intents_reconcile(intent_ids=[i.pk for i in intents], actor=SWEEPER)

    assert [r.intent_id for r in results] == [i.pk for i in intents]
    outcomes = {r.intent_id: r.outcome for r in results}
    assert outcomes.pop(poisoned.pk) == ReconcileOutcome.SKIPPED
    assert set(outcomes.values()) == {ReconcileOutcome.PERFORMED}
    assert Intent.objects.filter(run_id=poisoned.run_id, status=IntentStatus.PERFORMED).count() == 9
    poisoned.refresh_from_db()
    # Still open, under its lease: asked again once the lease lapses.
    assert poisoned.status == IntentStatus.INTENDED and poisoned.next_lookup_at > timezone.now()
    assert not JournalEvent.objects.filter(intent=poisoned, kind=JournalEvent.Kind.INTENT_RECONCILED).exists()


# One row at a time (one lookup thread), so the later rows' turn comes after the lease: the
# second row's turn comes at 0.6 s, the third's at 1.2 s, against a lease of 1 s. The margin
# before the second row's turn (0.4 s) holds under the suite's parallel load, where the claim
# and the first lookup's setup took more than the 0.08 s a 0.2 s lease left.
@override_settings(SEAM_RECONCILE_BATCH_SIZE=5, SEAM_LOOKUP_LEASE_SECONDS=1.0, SEAM_LOOKUP_THREADS=1)
def test_a_row_whose_lease_lapsed_before_its_turn_is_left_to_the_next_sweep(
    make_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    intents = _stale_run(make_run, 5)

    def slow(intent: Intent) -> NotPerformed:
        time.sleep(0.6)
        return NotPerformed()

    _answers(monkeypatch, slow)
    results = intents_reconcile(intent_ids=[i.pk for i in intents], actor=SWEEPER)

    outcomes = [r.outcome for r in results]
    assert outcomes[:2] == [ReconcileOutcome.NOT_PERFORMED] * 2
    assert outcomes[2:] == [ReconcileOutcome.SKIPPED] * 3
    assert {r.detail for r in results[2:]} == {SKIP_LEASE_LAPSED}
    assert (
        Intent.objects.filter(pk__in=[i.pk for i in intents[2:]], status=IntentStatus.INTENDED).count() == 3
    )


@override_settings(SEAM_RECONCILE_BATCH_SIZE=10, SEAM_LOOKUP_MAX_ATTEMPTS=5)
def test_a_batch_mixing_settled_rows_and_failed_lookups_writes_each_rows_own_columns(
    make_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    from journal.models import ErrorClass
    from journal.tool_errors import ToolError

    intents = _stale_run(make_run, 6)
    failing = {i.pk for i in intents[1::2]}
    Intent.objects.filter(pk=intents[1].pk).update(lookup_attempts=2)

    def answer(intent: Intent) -> Performed:
        if intent.pk in failing:
            raise ToolError(ErrorClass.TRANSIENT, "the provider timed out")
        return Performed(receipt={"refund_id": f"re_{intent.pk}"})

    _answers(monkeypatch, answer)
    with CaptureQueriesContext(connection) as queries:
        results = intents_reconcile(intent_ids=[i.pk for i in intents], actor=SWEEPER)

    assert [r.outcome for r in results] == [ReconcileOutcome.PERFORMED, ReconcileOutcome.RETRY_LATER] * 3
    # Two groups of columns (settled rows; failed lookups, whose counter is the database's own
    # arithmetic): two UPDATEs for the batch, not one per row.
    updates = [
        q["sql"]
        for q in queries.captured_queries
        if re.match(r'UPDATE "journal_intent(_\d{4}_\d{2}" AS "journal_intent)?"', q["sql"])
    ]
    assert len(updates) == 1 + 2, updates
    rows = {i.pk: i for i in Intent.objects.filter(run_id=intents[0].run_id)}
    for pk in failing:
        row = rows[pk]
        assert row.status == IntentStatus.INTENDED and row.next_lookup_at > timezone.now()
        assert row.last_lookup_error == "transient: the provider timed out" and row.receipt == {}
    assert [rows[i.pk].lookup_attempts for i in intents[1::2]] == [3, 1, 1]
    for intent in intents[::2]:
        row = rows[intent.pk]
        assert row.status == IntentStatus.PERFORMED and row.receipt == {"refund_id": f"re_{intent.pk}"}
        assert row.lookup_attempts == 0 and row.next_lookup_at is None and row.settled_at is not None
    kinds = dict(JournalEvent.objects.filter(run_id=intents[0].run_id).values_list("intent_id", "kind"))
    assert {kinds[pk] for pk in failing} == {JournalEvent.Kind.LOOKUP_FAILED}
    assert {kinds[i.pk] for i in intents[::2]} == {JournalEvent.Kind.INTENT_RECONCILED}


@override_settings(SEAM_RECONCILE_BATCH_SIZE=5)
def test_two_sweepers_at_once_claim_different_batches(
    make_run: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextvars
    import threading

    # Which sweeper asks: lookups run on the sweeper's pool threads, which carry its context.
    sweeper: contextvars.ContextVar[str] = contextvars.ContextVar("sweeper", default="")
    intents = _stale_run(make_run, 10)
    run_id = intents[0].run_id
    asked: list[int] = []
    first_asked, second_done = threading.Event(), threading.Event()

    def answer(intent: Intent) -> NotPerformed:
        asked.append(intent.pk)
        if sweeper.get() == "first":
            first_asked.set()
            assert second_done.wait(20)
        return NotPerformed()

    _answers(monkeypatch, answer)
    reports: dict[str, Any] = {}

    def sweep(name: str) -> None:
        sweeper.set(name)
        try:
            reports[name] = reconcile_sweep(run_id=run_id, older_than=timedelta(0), actor=SWEEPER)
        finally:
            connection.close()
            if name == "second":
                second_done.set()

    first = threading.Thread(target=sweep, args=("first",), name="first")
    first.start()
    assert first_asked.wait(20)
    # The first sweeper holds the oldest batch, mid-lookup: the second takes the next one.
    sweep("second")
    first.join(20)

    assert sorted(r.intent_id for r in reports["second"].results) == sorted(i.pk for i in intents[5:])
    assert sorted(r.intent_id for r in reports["first"].results) == sorted(i.pk for i in intents[:5])
    for report in reports.values():
        assert report.counts["not_performed"] == 5 and report.counts["skipped"] == 0
    assert sorted(asked) == sorted(i.pk for i in intents), "each row asked about once"
    assert Intent.objects.filter(run_id=run_id, status=IntentStatus.NOT_PERFORMED).count() == 10
