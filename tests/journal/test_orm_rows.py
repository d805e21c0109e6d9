"""journal.orm_rows: the one place the journal leans on how Django lays out a loaded instance and
compiles an update. Each test holds what the adapter builds to what the ORM itself builds, so an
upgrade of Django that changes either fails here rather than in the write path."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.models import F
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext

from journal.models import AgentToken, Intent, Run, Tenant
from journal.orm_rows import instance_of, intent_of_columns, model_columns, update_expression_sql
from journal.services import Actor, intent_record

pytestmark = pytest.mark.django_db(transaction=True)

FIELDS = [field.attname for field in Intent._meta.concrete_fields]


@pytest.fixture
def stored(make_run: Any, agent_actor: Actor) -> Intent:
    run = make_run()
    intent = intent_record(
        run=run, tool="start_return", args={"order": "O-1"}, turn=1, actor=agent_actor
    ).intent
    return Intent.objects.get(pk=intent.pk)


def _built(stored: Intent, run: Run | None) -> Intent:
    return intent_of_columns({name: getattr(stored, name) for name in FIELDS}, run)


def test_an_intent_built_from_its_columns_is_the_one_the_orm_loads(stored: Intent) -> None:
    built = _built(stored, None)
    assert type(built) is Intent
    assert {name: getattr(built, name) for name in FIELDS} == {name: getattr(stored, name) for name in FIELDS}
    assert set(vars(built)) == set(vars(stored))
    assert (
        (built._state.adding, built._state.db)
        == (stored._state.adding, stored._state.db)
        == (False, "default")
    )
    assert built == stored and hash(built) == hash(stored)


def test_a_built_intent_refreshes_saves_and_follows_its_run(stored: Intent) -> None:
    run = Run.objects.get(pk=stored.run_id)
    cached = _built(stored, run)
    assert cached.run is run  # the run given is cached: no query to reach it
    lazy = _built(stored, None)
    with CaptureQueriesContext(connection) as queries:
        assert lazy.run == run
        assert lazy.run.tenant.pk == run.tenant_id
    assert len(queries) == 2  # the run, then its tenant, read when asked for as for a loaded row

    lazy.outcome_summary = "checked"
    lazy.save(update_fields=["outcome_summary"])
    assert Intent.objects.get(pk=stored.pk).outcome_summary == "checked"
    Intent.objects.filter(pk=stored.pk).update(request_id="req-9")
    lazy.refresh_from_db()
    assert (lazy.request_id, lazy.outcome_summary) == ("req-9", "checked")
    assert not lazy._state.adding


def test_with_a_listener_the_built_intent_comes_through_model_init(stored: Intent) -> None:
    seen: list[Intent] = []

    def listener(sender: type[Intent], instance: Intent, **kwargs: Any) -> None:
        seen.append(instance)

    post_init.connect(listener, sender=Intent)
    try:
        built = _built(stored, Run.objects.get(pk=stored.run_id))
    finally:
        post_init.disconnect(listener, sender=Intent)
    assert seen == [built]
    assert {name: getattr(built, name) for name in FIELDS} == {name: getattr(stored, name) for name in FIELDS}
    assert (built._state.adding, built._state.db) == (False, "default")
    assert "run" in built._state.fields_cache


def test_rows_read_by_hand_load_as_the_orm_loads_them(tenant: Tenant, make_run: Any) -> None:
    AgentToken.objects.create(tenant=tenant, name="returns-bot", digest="d" * 64)
    run = Run.objects.get(pk=make_run().pk)
    parts = [model_columns(AgentToken, "token", connection), model_columns(Run, "run", connection)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {parts[0].sql}, {parts[1].sql} FROM {AgentToken._meta.db_table} AS token "  # noqa: S608
            f"JOIN {Run._meta.db_table} AS run ON run.tenant_id = token.tenant_id WHERE run.id = %s",
            [run.pk],
        )
        row = cursor.fetchone()
    width = len(parts[0].attnames)
    token, loaded = (
        instance_of(parts[0], row[:width], connection),
        instance_of(parts[1], row[width:], connection),
    )
    for model, built in ((AgentToken, token), (Run, loaded)):
        fetched = model.objects.get(pk=built.pk)
        names = [field.attname for field in model._meta.concrete_fields]
        assert {n: getattr(built, n) for n in names} == {n: getattr(fetched, n) for n in names}
        assert (built._state.adding, built._state.db) == (False, "default")
    assert loaded.plan == run.plan and isinstance(loaded.plan, list)  # JSON converted, not text


def test_an_expression_compiles_as_queryset_update_compiles_it(stored: Intent) -> None:
    sql, params = update_expression_sql(Intent, F("lookup_attempts") + 1, connection)
    with CaptureQueriesContext(connection) as queries:
        Intent.objects.filter(pk=stored.pk).update(lookup_attempts=F("lookup_attempts") + 1)
    assert f'SET "lookup_attempts" = {sql % tuple(params)}' in queries[0]["sql"]
    stored.refresh_from_db()
    assert stored.lookup_attempts == 1
