"""/metrics: the gauges are read from the rows at scrape time (whichever process wrote them), the
counters move with the code paths, the token is enforced when set, and a scrape stays a fixed,
small number of index-backed statements however large the journal grows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client, override_settings
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from compensations.models import Compensation, CompensationStatus, DeadLetter
from journal import services as journal
from journal.models import Intent, IntentStatus, OutcomeReason, Run
from journal.selectors import stuck_runs
from journal.tool_errors import DispatchResult
from journal.why import RunWhy, why
from monitoring import metrics
from observability import counters
from reconciliation.services import ReconcileOutcome, intent_reconcile

AGENT = journal.Actor.agent("returns-bot")
SWEEPER = journal.Actor.system("test-sweeper")


def _scrape(client: Client, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def _performed(run: Run, turn: int = 1) -> Intent:
    return journal.perform(
        run=run,
        tool="issue_refund",
        args={"amount": f"{turn}.00"},
        turn=turn,
        actor=AGENT,
        dispatch=lambda args, key: DispatchResult(receipt={"refund_id": key[:8]}),
    ).intent


def _go_quiet(run: Run, *, ago: timedelta) -> None:
    then = timezone.now() - ago
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=then)
    Intent.objects.filter(run=run).update(intended_at=then)


def _dead_letter(original: Intent, *, resolved: bool) -> DeadLetter:
    compensation = Compensation.objects.create(original=original, status=CompensationStatus.DEAD_LETTERED)
    return DeadLetter.objects.create(
        compensation=compensation,
        error_class="permanent",
        error="the provider refused the undo",
        attempts=5,
        resolved_at=timezone.now() if resolved else None,
    )


@pytest.mark.django_db
def test_the_gauges_count_stuck_runs_awaiting_runs_and_dead_letters(make_run: Callable[..., Run]) -> None:
    client = Client()
    before = _scrape(client)
    assert _value(before, "seam_stuck_runs") == 0
    assert _value(before, "seam_open_dead_letters") == 0
    assert _value(before, "seam_metrics_database_error") == 0

    stuck = [make_run(ticket_id=f"T-{n}") for n in range(3)]
    for run in stuck:
        _go_quiet(run, ago=timedelta(minutes=10))
    make_run(ticket_id="T-alive")  # heartbeating now: not stuck
    escalated = make_run(ticket_id="T-escalated")
    with transaction.atomic():
        journal.run_hand_over(
            run=escalated,
            reason=OutcomeReason.POLICY,
            why=why(RunWhy.NO_POLICY, task_type="returns"),
            actor=SWEEPER,
        )
    done = make_run(ticket_id="T-undo")
    _dead_letter(_performed(done, turn=1), resolved=False)
    _dead_letter(_performed(done, turn=2), resolved=True)

    after = _scrape(client)
    assert _value(after, "seam_stuck_runs") == 3
    assert _value(after, "seam_runs_awaiting_person", reason="policy") == 1
    # Every reason is present, at zero, so a series does not vanish when its queue empties.
    assert _value(after, "seam_runs_awaiting_person", reason="unknown_outcome") == 0
    assert _value(after, "seam_open_dead_letters") == 1
    assert _value(after, "seam_compensation_failures_total") == 2


@pytest.mark.django_db
def test_the_sweep_lag_is_how_long_the_most_overdue_stale_intent_has_waited(
    make_run: Callable[..., Run],
) -> None:
    client = Client()
    run = make_run()
    journal.intent_record(run=run, tool="issue_refund", args={"amount": "1"}, turn=1, actor=AGENT)
    assert _value(_scrape(client), "seam_sweep_lag_seconds") == 0  # fresh: not due yet

    _go_quiet(run, ago=timedelta(minutes=5))
    with override_settings(SEAM_STALE_AFTER_SECONDS=60):
        lag = _value(_scrape(client), "seam_sweep_lag_seconds")
    assert 235 <= lag <= 250  # 5 minutes quiet, due after 1


@pytest.mark.django_db(transaction=True)
def test_unknown_outcomes_and_the_process_counters_follow_the_journal(
    make_run: Callable[..., Run],
) -> None:
    client = Client()
    recorded = counters.INTENTS_RECORDED._value.get()
    performed = counters.INTENTS_SETTLED.labels(status="performed")._value.get()
    reconciled_unknown = counters.RECONCILE_OUTCOMES.labels(outcome="unknown")._value.get()

    run = make_run()
    _performed(run, turn=1)
    # No connector is registered for this tool, so reconciliation can only say "unknown".
    open_row = journal.intent_record(run=run, tool="send_fax", args={"to": "+44"}, turn=2, actor=AGENT).intent
    _go_quiet(run, ago=timedelta(minutes=5))
    assert intent_reconcile(intent_id=open_row.pk, actor=SWEEPER).outcome == ReconcileOutcome.UNKNOWN

    samples = _scrape(client)
    assert _value(samples, "seam_unknown_outcomes") == 1
    assert Intent.objects.filter(status=IntentStatus.UNKNOWN).count() == 1
    assert _value(samples, "seam_intents_recorded_total") == recorded + 2
    assert _value(samples, "seam_intents_settled_total", status="performed") == performed + 1
    assert _value(samples, "seam_reconcile_outcomes_total", outcome="unknown") == reconciled_unknown + 1


@pytest.mark.django_db
def test_a_metrics_token_when_set_is_required_as_a_bearer_token() -> None:
    client = Client()
    with override_settings(SEAM_METRICS_TOKEN="s3cret-scrape-token"):
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert (
            client.get("/metrics", headers={"Authorization": "Basic s3cret-scrape-token"}).status_code == 401
        )
        response = client.get("/metrics", headers={"Authorization": "Bearer s3cret-scrape-token"})
        assert response.status_code == 200
        assert b"seam_stuck_runs" in response.content
    # Unset: open (no session needed either way).
    assert client.get("/metrics").status_code == 200


@pytest.mark.django_db
def test_a_scrape_is_a_fixed_number_of_statements_however_many_rows(
    make_run: Callable[..., Run], django_assert_max_num_queries: Any
) -> None:
    client = Client()
    # SAVEPOINT, SET LOCAL statement_timeout, six gauges, RELEASE.
    with django_assert_max_num_queries(9):
        _scrape(client)
    for n in range(15):
        run = make_run(ticket_id=f"T-{n}")
        journal.intent_record(run=run, tool="issue_refund", args={"amount": "1"}, turn=1, actor=AGENT)
        _go_quiet(run, ago=timedelta(minutes=10))
        with transaction.atomic():
            journal.run_hand_over(
                run=run, reason=OutcomeReason.POLICY, why=why(RunWhy.NO_POLICY, task_type="x"), actor=SWEEPER
            )
    with django_assert_max_num_queries(9):
        _scrape(client)


def _plan(queryset: Any) -> str:
    with connection.cursor() as cursor:
        # With sequential scans priced out, a Seq Scan left in the plan means no index can serve.
        cursor.execute("SET LOCAL enable_seqscan = off")
    return str(queryset.explain())


@pytest.mark.django_db
def test_the_gauges_on_the_journal_tables_are_served_by_partial_indexes() -> None:
    now = timezone.now()
    plans = {
        "stuck runs": (_plan(stuck_runs(now=now)), "run_running_idx"),
        "awaiting a person": (_plan(metrics.awaiting_person()), "run_awaiting_idx"),
        "sweep lag": (_plan(metrics.sweep_candidates(now)), "intent_open_idx"),
        "unknown outcomes": (_plan(metrics.unknown_outcomes()), "intent_unknown_idx"),
    }
    for gauge, (plan, index) in plans.items():
        assert index in plan, (gauge, plan)
        assert "Seq Scan on journal_run" not in plan, (gauge, plan)
        assert "Seq Scan on journal_intent" not in plan, (gauge, plan)
