"""journal.services: intent before the call, outcome after, durably and exactly once."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from journal import services
from journal.events import Caller
from journal.keys import idempotency_key
from journal.models import AgentToken, Intent, IntentStatus, JournalEvent, RunStatus
from journal.services import Actor, DispatchResult, ToolError

pytestmark = pytest.mark.django_db(transaction=True)


def _dsn() -> str:
    db = settings.DATABASES["default"]
    return f"host={db['HOST']} port={db['PORT']} dbname={connection.settings_dict['NAME']} user={db['USER']}"


def test_intent_is_committed_before_the_dispatch_leaves(make_run: Any, agent_actor: Actor) -> None:
    run = make_run()
    seen_from_outside: list[tuple[str, str]] = []

    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        # A second connection sees only committed rows: this is what survives a crash right now.
        with psycopg.connect(_dsn(), autocommit=True) as other:
            row = other.execute(
                "SELECT status, idempotency_key FROM journal_intent WHERE idempotency_key = %s", (key,)
            ).fetchone()
        assert row is not None, "the intent row was not committed when the call left"
        seen_from_outside.append(row)
        return DispatchResult(summary="label RL-7734", receipt={"label": "RL-7734"})

    result = services.perform(
        run=run,
        tool="start_return",
        args={"order_id": "SU-90317"},
        dispatch=dispatch,
        turn=1,
        actor=agent_actor,
    )

    assert seen_from_outside == [("intended", result.intent.idempotency_key)]
    stored = Intent.objects.get(pk=result.intent.pk)
    assert stored.status == IntentStatus.PERFORMED
    assert stored.receipt == {"label": "RL-7734"}
    assert stored.settled_at is not None
    kinds = list(JournalEvent.objects.filter(intent=stored).values_list("kind", flat=True))
    assert kinds == ["intent_recorded", "outcome_recorded"]


def test_recording_inside_an_open_transaction_is_refused_and_writes_nothing(
    make_run: Any, agent_actor: Actor
) -> None:
    run = make_run()
    calls: list[str] = []
    with pytest.raises(services.OpenTransactionRefused), transaction.atomic():
        services.perform(
            run=run,
            tool="issue_refund",
            args={"amount": "14.95"},
            dispatch=lambda args, key: calls.append(key) or DispatchResult(),
            turn=1,
            actor=agent_actor,
        )
    assert calls == []
    assert not Intent.objects.filter(run=run).exists()


def test_when_the_intent_cannot_be_committed_the_dispatch_never_happens(
    make_run: Any, agent_actor: Actor
) -> None:
    run = make_run()
    calls: list[str] = []
    # Another session holds the run row locked, and ours gives up waiting: the database really
    # refuses the intent, as it would when it is restarting or out of connections.
    with psycopg.connect(_dsn()) as blocker:
        blocker.execute("SELECT id FROM journal_run WHERE id = %s FOR UPDATE", (run.pk,))
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '200ms'")
        try:
            # The agent is told in words that the call was not made, with the database's reason.
            with pytest.raises(services.JournalUnavailable, match="could not be recorded") as refused:
                services.perform(
                    run=run,
                    tool="issue_refund",
                    args={"amount": "14.95"},
                    dispatch=lambda args, key: calls.append(key) or DispatchResult(),
                    turn=1,
                    actor=agent_actor,
                )
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        blocker.rollback()
    assert "the call was not made" in refused.value.message
    assert isinstance(refused.value.__cause__, OperationalError)
    assert calls == []
    assert not Intent.objects.filter(run=run).exists()


def test_a_settled_intent_is_replayed_not_resent(make_run: Any, agent_actor: Actor) -> None:
    run = make_run()
    calls: list[str] = []

    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        calls.append(key)
        return DispatchResult(receipt={"refund_id": "re_1"})

    first = services.perform(
        run=run, tool="issue_refund", args={"amount": "14.95"}, dispatch=dispatch, turn=2, actor=agent_actor
    )
    # The agent restarted and replays turn 3 with the same intent: the refund is not sent twice.
    again = services.perform(
        run=run, tool="issue_refund", args={"amount": "14.95"}, dispatch=dispatch, turn=3, actor=agent_actor
    )
    assert len(calls) == 1
    assert again.replayed is True
    assert again.intent.pk == first.intent.pk
    assert again.intent.receipt == {"refund_id": "re_1"}


def test_an_open_intent_found_again_is_not_resent(make_run: Any, agent_actor: Actor) -> None:
    run = make_run()
    services.intent_record(run=run, tool="issue_refund", args={"amount": "14.95"}, turn=2, actor=agent_actor)
    calls: list[str] = []
    with pytest.raises(services.IntentInDoubt):
        services.perform(
            run=run,
            tool="issue_refund",
            args={"amount": "14.95"},
            dispatch=lambda args, key: calls.append(key) or DispatchResult(),
            turn=2,
            actor=agent_actor,
        )
    assert calls == []


def test_a_classified_failure_settles_the_row_as_failed(make_run: Any, agent_actor: Actor) -> None:
    run = make_run()

    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        raise ToolError("permanent", "403 refund not allowed for this merchant", request_id="req-9")

    with pytest.raises(ToolError):
        services.perform(
            run=run,
            tool="issue_refund",
            args={"amount": "14.95"},
            dispatch=dispatch,
            turn=1,
            actor=agent_actor,
        )
    row = Intent.objects.get(run=run)
    assert (row.status, row.error_class, row.request_id) == ("failed", "permanent", "req-9")


@pytest.mark.parametrize(
    "raised", [ToolError("ambiguous", "timeout after sending"), ConnectionResetError("reset")]
)
def test_an_ambiguous_dispatch_leaves_the_intent_open_with_evidence(
    make_run: Any, agent_actor: Actor, raised: Exception
) -> None:
    run = make_run()

    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        raise raised

    with pytest.raises(type(raised)):
        services.perform(
            run=run,
            tool="issue_refund",
            args={"amount": "14.95"},
            dispatch=dispatch,
            turn=1,
            actor=agent_actor,
        )
    row = Intent.objects.get(run=run)
    assert row.status == IntentStatus.INTENDED
    event = JournalEvent.objects.get(intent=row, kind="dispatch_ambiguous")
    assert event.data["error_class"] == "ambiguous"


def test_the_same_outcome_twice_is_harmless_and_a_different_one_conflicts(
    make_run: Any, agent_actor: Actor
) -> None:
    run = make_run()
    intent = services.intent_record(
        run=run, tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=agent_actor
    ).intent
    first = services.outcome_record(
        intent=intent, ok=True, summary="label", receipt={"label": "RL-1"}, actor=agent_actor
    )
    again = services.outcome_record(
        intent=intent, ok=True, summary="label", receipt={"label": "RL-1"}, actor=agent_actor
    )
    assert (first.changed, again.changed) == (True, False)
    with pytest.raises(services.Conflict):
        services.outcome_record(
            intent=intent, ok=False, summary="x", error_class="permanent", actor=agent_actor
        )
    assert JournalEvent.objects.filter(intent=intent, kind="outcome_recorded").count() == 1
    assert Intent.objects.get(pk=intent.pk).status == IntentStatus.PERFORMED


def test_concurrent_identical_intents_from_separate_connections_make_one_row(make_run: Any) -> None:
    run = make_run()
    results: list[services.IntentRecorded] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def record(n: int) -> None:
        try:
            barrier.wait()
            results.append(
                services.intent_record(
                    run=run,
                    tool="issue_refund",
                    args={"amount": "14.95", "order_id": "SU-90317"},
                    turn=2,
                    actor=Actor.agent(f"agent-{n}"),
                )
            )
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=record, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    assert Intent.objects.filter(run=run).count() == 1
    assert sum(r.created for r in results) == 1
    assert len({r.intent.pk for r in results}) == 1
    assert JournalEvent.objects.filter(run=run, kind="intent_recorded").count() == 1


def test_a_different_intent_in_a_taken_step_is_a_conflict(make_run: Any, agent_actor: Actor) -> None:
    run = make_run()
    services.intent_record(run=run, tool="issue_refund", args={"amount": "14.95"}, turn=2, actor=agent_actor)
    with pytest.raises(services.Conflict) as refused:
        services.intent_record(
            run=run, tool="issue_refund", args={"amount": "99.00"}, turn=2, actor=agent_actor
        )
    assert refused.value.field == "args"
    assert Intent.objects.filter(run=run).count() == 1


def test_a_repeated_identical_effect_needs_its_own_occurrence(make_run: Any, agent_actor: Actor) -> None:
    run = make_run()
    first = services.intent_record(
        run=run, tool="notify_customer", args={"template": "update"}, turn=1, actor=agent_actor
    )
    second = services.intent_record(
        run=run, tool="notify_customer", args={"template": "update"}, turn=4, occurrence=1, actor=agent_actor
    )
    assert second.created and first.intent.idempotency_key != second.intent.idempotency_key


def test_complete_refuses_while_a_call_is_in_doubt(make_run: Any, agent_actor: Actor) -> None:
    run = make_run()
    intent = services.intent_record(run=run, tool="start_return", args={}, turn=1, actor=agent_actor).intent
    with pytest.raises(services.Conflict):
        services.run_complete(run=run, actor=agent_actor)
    services.outcome_record(intent=intent, ok=True, actor=agent_actor)
    assert services.run_complete(run=run, actor=agent_actor).status == RunStatus.COMPLETED
    with pytest.raises(services.Conflict):
        services.intent_record(run=run, tool="issue_refund", args={}, turn=2, actor=agent_actor)


def test_run_create_with_the_same_external_id_returns_the_first_run(tenant: Any, agent_actor: Actor) -> None:
    from tests.factories import run_via_service

    first = services.run_create(
        tenant=tenant,
        task_type="returns",
        versions={"schema": "1", "flow": "1", "policy": "1", "capability": "1"},
        external_id="rt-77",
        actor=agent_actor,
    )
    again = services.run_create(
        tenant=tenant,
        task_type="returns",
        versions={"schema": "1", "flow": "1", "policy": "1", "capability": "1"},
        external_id="rt-77",
        actor=agent_actor,
    )
    assert first.created and not again.created and first.run.pk == again.run.pk
    assert run_via_service is not None


def test_journal_events_cannot_be_updated_or_deleted_in_the_database(make_run: Any) -> None:
    run = make_run()
    from django.db.utils import DatabaseError

    with pytest.raises(DatabaseError, match="append-only"):
        JournalEvent.objects.filter(run=run).update(actor_name="someone else")
    with pytest.raises(DatabaseError, match="append-only"):
        JournalEvent.objects.filter(run=run).delete()
    assert JournalEvent.objects.get(run=run).actor_name == "returns-bot"


def test_the_statements_write_the_events_and_return_the_stored_row(make_run: Any, agent_actor: Actor) -> None:
    """The single statements build the events' data in SQL, and perform builds its Intent without
    reading it back: the events must say what the journal's events say, and the Intent must be
    what a read returns."""
    run = make_run()
    result = services.perform(
        run=run,
        tool="start_return",
        args={"order_id": "SU-90317"},
        dispatch=lambda args, key: DispatchResult(
            summary="label RL-7734", receipt={"label": "RL-7734"}, request_id="req-1"
        ),
        turn=1,
        actor=agent_actor,
    )
    compensation = services.intent_record(
        run=run, tool="cancel_pickup", args={"label": "RL-7734"}, turn=2, actor=agent_actor, compensation=True
    ).intent

    events = {
        (e.intent_id, e.kind): (e.data, e.actor_kind, e.actor_name, e.user_id)
        for e in JournalEvent.objects.filter(run=run, intent__isnull=False)
    }
    intent = result.intent
    assert events == {
        (intent.pk, "intent_recorded"): (
            {"step_id": intent.step_id, "tool": "start_return", "idempotency_key": intent.idempotency_key},
            "agent",
            agent_actor.name,
            None,
        ),
        (intent.pk, "outcome_recorded"): (
            {"status": "performed", "error_class": "", "receipt": {"label": "RL-7734"}},
            "agent",
            agent_actor.name,
            None,
        ),
        (compensation.pk, "intent_recorded"): (
            {
                "step_id": compensation.step_id,
                "tool": "cancel_pickup",
                "idempotency_key": compensation.idempotency_key,
                "compensation": True,
            },
            "agent",
            agent_actor.name,
            None,
        ),
    }
    stored = Intent.objects.get(pk=intent.pk)
    fields = [f.attname for f in Intent._meta.concrete_fields]
    assert {f: getattr(intent, f) for f in fields} == {f: getattr(stored, f) for f in fields}
    # Built without Model.__init__ (journal.orm_rows): the same attributes as a loaded row.
    assert set(vars(intent)) == set(vars(stored))
    assert intent.run is run
    assert (
        (intent._state.adding, intent._state.db)
        == (False, "default")
        == (stored._state.adding, stored._state.db)
    )
    # And a working instance: it saves, and reads itself back.
    intent.outcome_summary = "label RL-7734 (checked)"
    intent.save(update_fields=["outcome_summary"])
    intent.refresh_from_db()
    assert (
        Intent.objects.get(pk=intent.pk).outcome_summary
        == intent.outcome_summary
        == "label RL-7734 (checked)"
    )


def test_perform_sends_model_init_signals_when_something_listens(make_run: Any, agent_actor: Actor) -> None:
    """perform builds its Intent without Model.__init__ only while nothing listens to pre_init or
    post_init for Intent; a listener gets its signal for the returned instance."""
    from django.db.models.signals import post_init

    seen: list[Intent] = []

    def listener(sender: type[Intent], instance: Intent, **kwargs: Any) -> None:
        seen.append(instance)

    post_init.connect(listener, sender=Intent)
    try:
        result = services.perform(
            run=make_run(),
            tool="start_return",
            args={"order_id": "SU-90318"},
            dispatch=lambda args, key: DispatchResult(summary="ok"),
            turn=1,
            actor=agent_actor,
        )
    finally:
        post_init.disconnect(listener, sender=Intent)
    assert any(instance is result.intent for instance in seen)
    assert result.intent.status == "performed" and result.intent._state.adding is False


@pytest.mark.parametrize("same_outcome", [True, False])
def test_an_intent_settled_by_someone_else_during_the_call(
    make_run: Any, agent_actor: Actor, same_outcome: bool
) -> None:
    """While the call is out, reconciliation (or a person) may settle its row first. The same
    outcome is then the row as stored; a different one is a conflict. Either way one transition
    and one outcome event are recorded."""
    run = make_run()
    worker = Actor.system("reconciliation")

    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        intent = Intent.objects.get(idempotency_key=key)
        services.outcome_record(
            intent=intent,
            ok=True,
            summary="label RL-7734" if same_outcome else "found by lookup",
            receipt={"label": "RL-7734"},
            actor=worker,
        )
        return DispatchResult(summary="label RL-7734", receipt={"label": "RL-7734"})

    kwargs = {"run": run, "tool": "start_return", "args": {"order_id": "SU-90317"}, "turn": 1}
    if same_outcome:
        result = services.perform(dispatch=dispatch, actor=agent_actor, **kwargs)
        assert not result.replayed
        stored = Intent.objects.get(pk=result.intent.pk)
        assert (result.intent.status, result.intent.settled_at) == (stored.status, stored.settled_at)
    else:
        with pytest.raises(services.Conflict):
            services.perform(dispatch=dispatch, actor=agent_actor, **kwargs)
        stored = Intent.objects.get(run=run)
    assert stored.status == IntentStatus.PERFORMED
    assert stored.outcome_summary == ("label RL-7734" if same_outcome else "found by lookup")
    outcomes = JournalEvent.objects.filter(intent=stored, kind="outcome_recorded")
    assert list(outcomes.values_list("actor_name", flat=True)) == ["reconciliation"]


# --- an agent's Caller: one statement that asserts who calls ---------------------------------


def _caller_of(run: Any, token: AgentToken, **changes: Any) -> Caller:
    known = {
        "digest": token.digest,
        "token_name": token.name,
        "key_namespace": run.tenant.key_namespace,
        "run_pk": run.pk,
        "policy_version": run.policy_version,
        "run_created_at": run.created_at,
    }
    return Caller(**{**known, **changes})


def _columns(intent: Intent) -> dict[str, Any]:
    return {field.attname: getattr(intent, field.attname) for field in Intent._meta.concrete_fields}


def test_a_caller_records_and_settles_what_the_rows_then_hold(make_run: Any) -> None:
    """As a Caller, an intent and its outcome are written with their events under the token's
    name, and the intents returned are the rows as stored."""
    run = make_run()
    token = AgentToken.objects.create(
        tenant=run.tenant, name="runtime", digest=AgentToken.digest_of("s3cret")
    )
    caller = _caller_of(run, token)

    intent = services.intent_record_as_caller(
        caller=caller, tool="start_return", args={"order_id": "SU-1"}, turn=1
    )
    assert intent is not None
    assert _columns(intent) == _columns(Intent.objects.get(pk=intent.pk))
    assert intent.idempotency_key == idempotency_key(
        key_namespace=run.tenant.key_namespace,
        run_id=str(run.pk),
        tool="start_return",
        args={"order_id": "SU-1"},
        policy_version=run.policy_version,
    )
    settled = services.outcome_record_as_caller(
        caller=caller, step_id=intent.step_id, ok=True, summary="label sent", receipt={"label": "RL-1"}
    )
    assert settled is not None and settled.status == IntentStatus.PERFORMED
    assert _columns(settled) == _columns(Intent.objects.get(pk=intent.pk))
    events = JournalEvent.objects.filter(intent=intent.pk).order_by("pk")
    assert [(e.kind, e.actor_kind, e.actor_name) for e in events] == [
        ("intent_recorded", "agent", "runtime"),
        ("outcome_recorded", "agent", "runtime"),
    ]


@pytest.mark.parametrize("stale", ["revoked", "renamed", "another_tenant", "another_token"])
def test_a_caller_whose_token_is_no_longer_so_writes_nothing(
    make_run: Any, other_tenant: Any, stale: str
) -> None:
    run = make_run()
    token = AgentToken.objects.create(
        tenant=run.tenant, name="runtime", digest=AgentToken.digest_of("s3cret")
    )
    open_intent = services.intent_record(
        run=run, tool="start_return", args={"order_id": "SU-1"}, turn=1, actor=Actor.agent("runtime")
    ).intent
    caller = _caller_of(run, token)
    if stale == "revoked":
        AgentToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    elif stale == "renamed":
        AgentToken.objects.filter(pk=token.pk).update(name="renamed")
    elif stale == "another_tenant":
        AgentToken.objects.filter(pk=token.pk).update(tenant=other_tenant)
    else:
        caller = _caller_of(run, token, digest=AgentToken.digest_of("another secret"))
    events = JournalEvent.objects.count()

    assert (
        services.intent_record_as_caller(caller=caller, tool="issue_refund", args={"amount": "1"}, turn=2)
        is None
    )
    assert services.outcome_record_as_caller(caller=caller, step_id=open_intent.step_id, ok=True) is None

    assert list(Intent.objects.filter(run=run).values_list("pk", "status")) == [
        (open_intent.pk, IntentStatus.INTENDED)
    ]
    assert JournalEvent.objects.count() == events


@pytest.mark.parametrize("stale", ["key_namespace", "policy_version"])
def test_a_caller_with_other_key_inputs_records_no_intent(make_run: Any, stale: str) -> None:
    """The tenant's key namespace and the run's policy version make a new intent's key: a caller that
    remembers others records nothing, as the key it made is not the run's. An outcome settles
    a step by its stored key, so those two do not bear on it."""
    run = make_run()
    token = AgentToken.objects.create(
        tenant=run.tenant, name="runtime", digest=AgentToken.digest_of("s3cret")
    )
    caller = _caller_of(run, token, **{stale: "not-the-run's"})

    assert (
        services.intent_record_as_caller(caller=caller, tool="issue_refund", args={"amount": "1"}, turn=2)
        is None
    )
    assert not Intent.objects.filter(run=run).exists()
