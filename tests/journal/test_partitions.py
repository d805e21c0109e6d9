"""journal.partitions: the intent and event tables partitioned by their run's month, the hot path
writing the month's partitions by name, and months made and dropped only as the rules allow."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime
from typing import Any

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection

from journal import partitions, services, transitions
from journal import sql as journal_sql
from journal.models import Intent, IntentStatus, JournalEvent, Run
from journal.services import Actor, DispatchResult

pytestmark = pytest.mark.django_db(transaction=True)


def _tables_holding(model: type[Intent] | type[JournalEvent], run: Run) -> set[str]:
    """The partitions (PostgreSQL's own tableoid) that hold the run's rows of `model`."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT tableoid::regclass::text FROM {model._meta.db_table} WHERE run_id = %s",  # noqa: S608
            [run.pk],
        )
        return {name for (name,) in cursor.fetchall()}


def _perform(run: Run, actor: Actor, turn: int = 1) -> Intent:
    return services.perform(
        run=run,
        tool="start_return",
        args={"order_id": f"SU-{turn}"},
        dispatch=lambda args, key: DispatchResult(summary="ok", receipt={"label": "RL-1"}),
        turn=turn,
        actor=actor,
    ).intent


def test_a_runs_rows_lie_in_its_months_partitions_and_the_hot_statements_name_them(
    make_run: Any, agent_actor: Actor
) -> None:
    run = make_run()
    intent = _perform(run, agent_actor)
    month = partitions.month_tables(partitions.month_of(run.created_at))
    assert month.intent == f"journal_intent_{run.created_at.astimezone(UTC):%Y_%m}"
    assert _tables_holding(Intent, run) == {month.intent}
    assert _tables_holding(JournalEvent, run) == {month.event}
    stored = Intent.objects.get(pk=intent.pk)
    assert stored.run_created_at == run.created_at and stored.status == IntentStatus.PERFORMED
    assert set(JournalEvent.objects.filter(run=run).values_list("run_created_at", flat=True)) == {
        run.created_at
    }
    # What the journal ran: its statements name the month's partitions, not the parents.
    assert partitions.run_tables(run.created_at) == month
    statement = journal_sql.insert_intent_statement(month, as_caller=False)
    assert f"INSERT INTO {month.intent} " in statement and f"INSERT INTO {month.event} " in statement
    assert f"UPDATE {month.intent}" in journal_sql.settle_intent_statement(month)
    # And ran them: the statements this session prepared (the journal's cursor shares Django's
    # connection) are those naming the partitions.
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [text for (text,) in cursor.fetchall()]
    assert any(f"INSERT INTO {month.intent} " in text for text in prepared), prepared
    assert any(f"UPDATE {month.intent}" in text for text in prepared), prepared
    assert not any("INSERT INTO journal_intent " in text for text in prepared), prepared


def test_a_replay_is_the_same_call_in_its_month_and_a_step_taken_is_refused(
    make_run: Any, agent_actor: Actor
) -> None:
    run = make_run()
    first = _perform(run, agent_actor)
    again = services.intent_record(
        run=run, tool="start_return", args={"order_id": "SU-1"}, turn=1, actor=agent_actor
    )
    assert again.created is False and again.intent.pk == first.pk
    with pytest.raises(services.StepTaken):
        services.intent_record(
            run=run, tool="start_return", args={"order_id": "SU-2"}, turn=1, actor=agent_actor
        )
    assert Intent.objects.filter(run=run).count() == 1


def test_a_row_of_a_month_without_partitions_lands_in_the_default_partition_through_the_parents(
    make_run: Any, agent_actor: Actor
) -> None:
    run = make_run()
    created_month = partitions.month_tables(partitions.month_of(run.created_at))
    long_ago = datetime(2001, 3, 14, 9, 0, tzinfo=UTC)  # no month partition so far back
    Run.objects.filter(pk=run.pk).update(created_at=long_ago)
    run.refresh_from_db()
    assert partitions.run_tables(run.created_at) == partitions.PARENTS
    intent = _perform(run, agent_actor)
    assert _tables_holding(Intent, run) == {"journal_intent_default"}
    # (Its run_created event was written before the test moved the run back in time.)
    assert _tables_holding(JournalEvent, run) == {"journal_journalevent_default", created_month.event}
    assert Intent.objects.get(pk=intent.pk).status == IntentStatus.PERFORMED
    assert partitions.default_rows() == 3  # the intent and its two events
    # Its month cannot be made while its rows lie in the default partition: PostgreSQL refuses.
    with pytest.raises(Exception, match="default partition"):
        partitions.create_months(ahead=0, now=long_ago)


def test_a_statement_that_names_another_months_partition_is_refused(make_run: Any) -> None:
    run = make_run()
    elsewhere = partitions.month_tables(partitions.months_after(partitions.month_of(run.created_at), 1)[-1])
    params = journal_sql.insert_intent_params(
        run_id=run.pk,
        step_id=f"{run.pk}:1:start_return",
        turn=1,
        tool="start_return",
        args_json="{}",
        occurrence=0,
        key="k" * 64,
        now=run.created_at,
        actor_kind="agent",
        actor_name="bot",
        user_id=None,
        compensation=False,
        max_intents=0,
    )
    with psycopg.connect(_dsn(), autocommit=True) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(journal_sql.insert_intent_statement(elsewhere, as_caller=False), params)
    assert not Intent.objects.filter(run=run).exists()


def _dsn() -> str:
    settings = connection.settings_dict
    return f"host={settings['HOST'] or '127.0.0.1'} port={settings['PORT'] or 5432} dbname={settings['NAME']} user={settings['USER']}"


def test_months_are_made_ahead_once_and_listed_with_their_size() -> None:
    now = datetime.now(UTC)
    ahead = partitions.months_after(partitions.month_of(now), 4)
    made = partitions.create_months(ahead=4, now=now)
    assert made == ahead[3:]  # the migration made this month and the next two
    assert partitions.create_months(ahead=4, now=now) == []
    kept = {row.month: row for row in partitions.existing_months()}
    assert set(ahead) <= set(kept)
    assert kept[ahead[4]].intents == f"journal_intent_{ahead[4]:%Y_%m}" and kept[ahead[4]].bytes > 0
    out = io.StringIO()
    call_command("journal_months", ahead=4, stdout=out)
    assert f"{ahead[4]:%Y-%m}" in out.getvalue() and "made" not in out.getvalue()
    for month in made:
        partitions.detach_month(month)
        partitions.discard_month(month)


def test_a_month_is_dropped_only_when_every_run_of_it_is_archived(make_run: Any, agent_actor: Actor) -> None:
    now = datetime.now(UTC)
    month = partitions.months_after(partitions.month_of(now), 5)[-1]
    partitions.create_months(ahead=5, now=now)
    runs = [make_run(), make_run()]
    in_month = datetime(month.year, month.month, 2, tzinfo=UTC)
    Run.objects.filter(pk__in=[run.pk for run in runs]).update(created_at=in_month)
    for n, run in enumerate(runs):
        run.refresh_from_db()
        _perform(run, agent_actor, turn=n + 1)
    tables = partitions.month_tables(month)
    assert _tables_holding(Intent, runs[0]) == {tables.intent}
    Run.objects.filter(pk=runs[0].pk).update(archived_at=now)
    with pytest.raises(Exception, match="still has 1 runs not archived"):
        partitions.detach_month(month)
    assert Intent.objects.filter(run__in=runs).count() == 2
    Run.objects.filter(pk=runs[1].pk).update(archived_at=now)
    assert partitions.detach_month(month) is True
    assert partitions.discard_month(month) is True
    assert partitions.detach_month(month) is False  # already gone
    assert month not in {row.month for row in partitions.existing_months()}
    assert not Intent.objects.filter(run__in=runs).exists()
    # (The runs' run_created events were written before the test moved them to that month.)
    assert not JournalEvent.objects.filter(run__in=runs, intent__isnull=False).exists()
    # The runs themselves stay, findable, and this month's partitions are untouched.
    assert Run.objects.filter(pk__in=[run.pk for run in runs]).count() == 2
    assert partitions.month_of(now) in {row.month for row in partitions.existing_months()}


def test_a_detached_month_is_discarded_while_the_journal_is_in_use(make_run: Any, agent_actor: Actor) -> None:
    """The detach takes the month out of the journal; freeing its files (the discard) waits for
    nothing the journal holds: here another session holds the journal's tables and the runs as
    their writers do, and the discard still finishes within a lock timeout a DROP of the
    attached partition would have run into."""
    now = datetime.now(UTC)
    month = partitions.months_after(partitions.month_of(now), 5)[-1]
    partitions.create_months(ahead=5, now=now)
    run = make_run()
    Run.objects.filter(pk=run.pk).update(created_at=datetime(month.year, month.month, 2, tzinfo=UTC))
    run.refresh_from_db()
    _perform(run, agent_actor)
    Run.objects.filter(pk=run.pk).update(archived_at=now)
    tables = partitions.month_tables(month)

    assert partitions.detach_month(month) is True
    assert month not in {row.month for row in partitions.existing_months()}
    assert partitions.detached_months() == [month]
    assert partitions.run_tables(run.created_at) == partitions.PARENTS
    assert not Intent.objects.filter(run=run).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, relispartition, (SELECT count(*) FROM pg_constraint WHERE conrelid = pg_class.oid "
            "AND contype = 'f') FROM pg_class WHERE relname IN (%s, %s, %s, %s) ORDER BY relname",
            [tables.intent, tables.event, f"{tables.intent}_detached", f"{tables.event}_detached"],
        )
        assert cursor.fetchall() == [
            (f"{tables.intent}_detached", False, 0),
            (f"{tables.event}_detached", False, 0),
        ]
        cursor.execute(f"SELECT count(*) FROM {tables.intent}_detached")  # noqa: S608
        assert cursor.fetchone() == (1,)

    with psycopg.connect(_dsn(), autocommit=True) as journal_in_use:
        journal_in_use.execute("BEGIN")
        journal_in_use.execute(
            "LOCK TABLE journal_intent, journal_journalevent, journal_run IN ROW EXCLUSIVE MODE"
        )
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        try:
            assert partitions.discard_month(month) is True
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        journal_in_use.execute("COMMIT")

    assert partitions.detached_months() == []
    assert partitions.discard_month(month) is False
    assert partitions.detach_month(month) is False
    assert Run.objects.filter(pk=run.pk).exists()


def test_retention_discards_a_month_left_detached(make_run: Any, agent_actor: Actor) -> None:
    """A process that died between the two steps leaves the detached tables; the next retention
    run frees them before anything else."""
    from retention.services import drop_archived_months

    now = datetime.now(UTC)
    month = partitions.months_after(partitions.month_of(now), 5)[-1]
    partitions.create_months(ahead=5, now=now)
    assert partitions.detach_month(month) is True
    assert partitions.detached_months() == [month]

    assert drop_archived_months(now) == []

    assert partitions.detached_months() == []
    assert partitions.discard_month(month) is False


def test_the_months_are_named_by_their_first_day_in_utc() -> None:
    late = datetime.fromisoformat("2026-12-31T23:30:00-05:00")  # already January in UTC
    assert partitions.month_of(late) == date(2027, 1, 1)
    assert partitions.months_after(date(2026, 11, 1), 3) == [
        date(2026, 11, 1),
        date(2026, 12, 1),
        date(2027, 1, 1),
        date(2027, 2, 1),
    ]


def test_a_batch_of_outcomes_settles_the_rows_of_every_month_it_holds(
    make_run: Any, agent_actor: Actor
) -> None:
    now = datetime.now(UTC)
    later = partitions.months_after(partitions.month_of(now), 4)[-1]
    partitions.create_months(ahead=4, now=now)
    runs = [make_run(), make_run()]
    Run.objects.filter(pk=runs[1].pk).update(created_at=datetime(later.year, later.month, 3, tzinfo=UTC))
    opened = []
    for run in runs:
        run.refresh_from_db()
        opened.append(
            services.intent_record(
                run=run, tool="start_return", args={"order_id": "SU-7"}, turn=1, actor=agent_actor
            ).intent
        )
    moves = [
        transitions.IntentMove(
            intent=intent,
            target=IntentStatus.NOT_PERFORMED,
            event=JournalEvent.Kind.INTENT_RECONCILED,
            data={"status": "not_performed"},
            changes={"settled_at": now},
        )
        for intent in opened
    ]
    moved = transitions.intents_transition(
        moves=moves, source=IntentStatus.INTENDED, actor=Actor.system("reconciliation"), at=now
    )
    assert moved == [True, True]
    assert set(Intent.objects.filter(pk__in=[i.pk for i in opened]).values_list("status", flat=True)) == {
        IntentStatus.NOT_PERFORMED
    }
    assert {
        JournalEvent.objects.get(intent_id=intent.pk, kind=JournalEvent.Kind.INTENT_RECONCILED).run_created_at
        for intent in opened
    } == {run.created_at for run in runs}
    # The same batch again moves nothing: the rows are no longer open.
    assert transitions.intents_transition(
        moves=moves, source=IntentStatus.INTENDED, actor=Actor.system("reconciliation"), at=now
    ) == [False, False]
