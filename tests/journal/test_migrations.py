"""The journal's models moved from the handover app to the journal app with their tables: a
database holding rows in the schema from before the move migrates to the new one with every row,
reference, permission grant and admin history entry intact.

The database is a scratch PostgreSQL database of its own, migrated by `manage.py` in child
processes: first to the last migrations before the move, where rows are written through the
historical models of that schema, then forward to today's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
BEFORE_THE_MOVE = [
    ("handover", "0011_journal_event_references"),
    ("compensations", "0006_dead_letter_open_index"),
    ("fanout", "0001_initial"),
]

# Written through the historical models of the schema before the move (handover.Run and friends).
WRITE_OLD_ROWS = """
import datetime as dt, json
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
state = MigrationExecutor(connection).loader.project_state(TARGETS)
apps = state.apps
now = dt.datetime(2026, 11, 30, 14, 4, tzinfo=dt.UTC)
User = apps.get_model("auth", "User")
Group = apps.get_model("auth", "Group")
ContentType = apps.get_model("contenttypes", "ContentType")
Tenant = apps.get_model("handover", "Tenant")
Run = apps.get_model("handover", "Run")
Intent = apps.get_model("handover", "Intent")
Event = apps.get_model("handover", "JournalEvent")
Message = apps.get_model("handover", "CustomerMessage")
Escalation = apps.get_model("handover", "Escalation")
Membership = apps.get_model("handover", "Membership")
AuditEntry = apps.get_model("handover", "AuditEntry")
Compensation = apps.get_model("compensations", "Compensation")
FanOut = apps.get_model("fanout", "FanOut")
from django.contrib.admin.models import LogEntry  # unchanged by the move: today's model
user = User.objects.create(username="lead")
user.groups.add(Group.objects.get(name="support_staff"))
tenant = Tenant.objects.create(slug="sundry", name="Sundry")
Membership.objects.create(user=user, tenant=tenant)
run = Run.objects.create(
    tenant=tenant, task_type="returns", ticket_id="T-40912", order_id="SU-90317", status="escalated",
    schema_version="1", flow_version="1", policy_version="1", capability_version="1",
    plan=[{"tool": "start_return", "args": {"order_id": "SU-90317"}}], awaiting_person=True,
)
# The key as that release derived it, from the tenant's slug (spelled here as it was then).
import hashlib
material = json.dumps(
    ["seam-v1", "sundry", str(run.pk), "start_return", {"order_id": "SU-90317"}, "1", 0],
    sort_keys=True, separators=(",", ":"), ensure_ascii=False,
)
intent = Intent.objects.create(
    run=run, step_id=f"{run.pk}:1:start_return", turn=1, tool="start_return",
    args={"order_id": "SU-90317"}, idempotency_key=hashlib.sha256(material.encode()).hexdigest(),
    status="performed",
    receipt={"label": "RL-7734"}, intended_at=now, settled_at=now,
)
Event.objects.create(run=run, intent=intent, kind="intent_recorded", actor_kind="agent", actor_name="bot", at=now)
Message.objects.create(run=run, channel="email", body="Return label sent.", told_at=now)
Escalation.objects.create(run=run, reason="run_died_mid_sequence", created_at=now)
Compensation.objects.create(original=intent, status="pending")
FanOut.objects.create(run=run, turn=2, name="stock", deadline_ms=2000, started_at=now, deadline_at=now)
# Chained as that release chained it (plain SHA-256), so that the re-keying migration finds the
# chain intact and keys it.
import importlib
unkeyed = importlib.import_module("console.migrations.0013_audit_chain_keyed_and_verifications")._sha256
entry = AuditEntry(
    seq=1, tenant=tenant, at=now, user=user, username="lead", action="assign", run=run, prev_hash="0" * 64,
)
entry.hash = unkeyed("0" * 64, entry)
entry.save()
apps.get_model("handover", "AuditChainHead").objects.filter(pk=1).update(seq=1, hash=entry.hash)
LogEntry.objects.create(
    user_id=user.pk, content_type_id=ContentType.objects.get(app_label="handover", model="run").pk,
    object_id=str(run.pk), object_repr="returns T-40912", action_flag=2, action_time=now,
)
print(json.dumps({"run": str(run.pk), "intent": intent.pk}))
"""

# Read through today's models.
READ_NEW_ROWS = """
import json
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from journal.models import Run, Intent, JournalEvent
from compensations.models import Compensation
from audit.models import AuditEntry
from journal.selectors import plan_with_keys
run = Run.objects.get(ticket_id="T-40912")
intent = run.intents.get()
log = LogEntry.objects.get()
print(json.dumps({
    "run": str(run.pk),
    "tenant": run.tenant.slug,
    "intent": intent.pk,
    "receipt": intent.receipt,
    "key_derived_now": plan_with_keys(run)[0]["key"] == intent.idempotency_key,
    "events": list(JournalEvent.objects.filter(run=run).values_list("kind", flat=True)),
    "told": list(run.customer_messages.values_list("body", flat=True)),
    "escalations": run.escalation_records.count(),
    # Copied from the run and the original by journal 0018 and compensations 0011.
    "escalation_copies": [
        [e.tenant.slug, e.task_type] for e in run.escalation_records.all()
    ],
    "compensation_copies": [
        [c.tenant.slug, c.task_type, c.tool] for c in Compensation.objects.all()
    ],
    "compensation_of": Compensation.objects.get().original.step_id,
    "fanouts": run.fanouts.count(),
    "audit_run": str(AuditEntry.objects.get().run.pk),
    "member_of": User.objects.get(username="lead").membership.tenant.slug,
    "may_act": User.objects.get(username="lead").has_perm("handover.act_on_run"),
    "log_entry_model": log.content_type.model_class().__module__,
    "log_entry_object": str(log.get_edited_object().pk),
}))
"""


def _manage(database_url: str, *args: str) -> str:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _last_json(output: str) -> dict[str, object]:
    """The JSON line a shell script printed last (the shell may say other things before it)."""
    parsed: dict[str, object] = json.loads(output.strip().splitlines()[-1])
    return parsed


@pytest.fixture
def scratch_database() -> Iterator[str]:
    db = settings.DATABASES["default"]
    name = f"seam_migrate_{uuid.uuid4().hex[:8]}"
    admin = f"host={db['HOST']} port={db['PORT']} user={db['USER']} dbname=postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_database_with_rows_migrates_across_the_move_of_the_journal(scratch_database: str) -> None:
    for app, migration in BEFORE_THE_MOVE:
        _manage(scratch_database, "migrate", "--noinput", app, migration)
    # Only what existed before the move: every app the old rows need, none of the journal app.
    _manage(scratch_database, "migrate", "--noinput", "admin")
    _manage(scratch_database, "migrate", "--noinput", "auth")
    shown = _manage(scratch_database, "showmigrations", "journal")
    assert "[ ] 0001_initial" in shown

    written = _last_json(
        _manage(scratch_database, "shell", "-c", f"TARGETS = {BEFORE_THE_MOVE!r}\n" + WRITE_OLD_ROWS)
    )
    _manage(scratch_database, "migrate", "--noinput")
    read = _last_json(_manage(scratch_database, "shell", "-c", READ_NEW_ROWS))

    assert read == {
        "run": written["run"],
        "tenant": "sundry",
        "intent": written["intent"],
        "receipt": {"label": "RL-7734"},
        # The tenant keeps its slug as its key namespace: the key its agent sent is still derived.
        "key_derived_now": True,
        "events": ["intent_recorded"],
        "told": ["Return label sent."],
        "escalations": 1,
        "escalation_copies": [["sundry", "returns"]],
        "compensation_copies": [["sundry", "returns", "start_return"]],
        "compensation_of": f"{written['run']}:1:start_return",
        "fanouts": 1,
        "audit_run": written["run"],
        "member_of": "sundry",
        # The support role's grant of the console's permission survived its move to the console.
        "may_act": True,
        # Admin history follows the content type to the journal app.
        "log_entry_model": "journal.models",
        "log_entry_object": written["run"],
    }
    # Nothing is left to migrate, and the journal's tables now carry the journal's name.
    assert "No changes detected" in _manage(scratch_database, "makemigrations", "--check", "--dry-run")
    with psycopg.connect(scratch_database.replace("postgres://", "postgresql://")) as conn:
        tables = {
            row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        }
    assert {"journal_run", "journal_intent", "journal_journalevent", "audit_auditentry"} <= tables
    assert not tables & {f"handover_{model}" for model in JOURNAL_MODELS}


JOURNAL_MODELS = [
    "tenant",
    "membership",
    "agenttoken",
    "run",
    "intent",
    "customermessage",
    "journalevent",
    "escalation",
]
BEFORE_THE_RENAME = [("journal", "0007_run_queue_indexes")]

# Written through the historical models of journal 0007, whose tables are the console's names.
WRITE_BEFORE_THE_RENAME = """
import datetime as dt, json
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
apps = MigrationExecutor(connection).loader.project_state(TARGETS).apps
now = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
model = lambda name: apps.get_model("journal", name)
assert model("Run")._meta.db_table == "handover_run"
tenant = model("Tenant").objects.create(slug="sundry", name="Sundry")
user = apps.get_model("auth", "User").objects.create(username="lead")
model("Membership").objects.create(user=user, tenant=tenant)
model("AgentToken").objects.create(tenant=tenant, name="returns-bot", digest="d" * 64)
run = model("Run").objects.create(
    tenant=tenant, task_type="returns", ticket_id="T-51000", status="escalated", schema_version="1",
    flow_version="1", policy_version="1", capability_version="1", awaiting_person=True,
)
intent = model("Intent").objects.create(
    run=run, step_id=f"{run.pk}:1:start_return", turn=1, tool="start_return", args={"order_id": "SU-1"},
    idempotency_key="k" * 64, status="performed", receipt={"label": "RL-1"}, intended_at=now, settled_at=now,
)
model("JournalEvent").objects.create(
    run=run, intent=intent, kind="intent_recorded", actor_kind="agent", actor_name="returns-bot", at=now
)
model("CustomerMessage").objects.create(run=run, channel="email", body="Label sent.", told_at=now)
model("Escalation").objects.create(run=run, reason="run_died_mid_sequence", created_at=now)
print(json.dumps({"run": str(run.pk), "intent": intent.pk}))
"""

# Read through today's models, whose tables are the journal's names.
READ_AFTER_THE_RENAME = """
import json
from journal.models import AgentToken, CustomerMessage, Escalation, Intent, JournalEvent, Membership, Run, Tenant
run = Run.objects.get(ticket_id="T-51000")
print(json.dumps({
    "tables": sorted(model._meta.db_table for model in (
        AgentToken, CustomerMessage, Escalation, Intent, JournalEvent, Membership, Run, Tenant)),
    "run": str(run.pk),
    "tenant": run.tenant.slug,
    "member": Membership.objects.get().user.username,
    "token": AgentToken.objects.get().name,
    "intent": run.intents.get().pk,
    "receipt": run.intents.get().receipt,
    "events": list(JournalEvent.objects.filter(run=run).values_list("kind", flat=True)),
    "told": list(CustomerMessage.objects.filter(run=run).values_list("body", flat=True)),
    "escalations": Escalation.objects.filter(run=run).count(),
}))
"""


def _tables(database_url: str) -> set[str]:
    with psycopg.connect(database_url.replace("postgres://", "postgresql://")) as conn:
        return {row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


def test_the_journal_tables_take_the_journal_name_with_every_row(scratch_database: str) -> None:
    _manage(scratch_database, "migrate", "--noinput", *BEFORE_THE_RENAME[0])
    assert {f"handover_{model}" for model in JOURNAL_MODELS} <= _tables(scratch_database)
    written = _last_json(
        _manage(
            scratch_database, "shell", "-c", f"TARGETS = {BEFORE_THE_RENAME!r}\n" + WRITE_BEFORE_THE_RENAME
        )
    )

    _manage(scratch_database, "migrate", "--noinput")

    tables = _tables(scratch_database)
    assert {f"journal_{model}" for model in JOURNAL_MODELS} <= tables
    assert not tables & {f"handover_{model}" for model in JOURNAL_MODELS}
    read = _last_json(_manage(scratch_database, "shell", "-c", READ_AFTER_THE_RENAME))
    assert read == {
        "tables": sorted(f"journal_{model}" for model in JOURNAL_MODELS),
        "run": written["run"],
        "tenant": "sundry",
        "member": "lead",
        "token": "returns-bot",
        "intent": written["intent"],
        "receipt": {"label": "RL-1"},
        "events": ["intent_recorded"],
        "told": ["Label sent."],
        "escalations": 1,
    }
    # The journal stays append-only under its new name, and its trigger carries that name.
    with psycopg.connect(scratch_database.replace("postgres://", "postgresql://")) as conn:
        triggers = {
            row[0]
            for row in conn.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = 'journal_journalevent'::regclass AND NOT tgisinternal"
            )
        }
        # (TRUNCATE is refused by a statement trigger the audit app adds: audit 0004.)
        assert triggers == {"journal_journalevent_append_only", "journal_journalevent_no_truncate"}
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="journal_journalevent is append-only"):
            conn.execute("UPDATE journal_journalevent SET actor_name = 'someone else'")
        conn.rollback()
        # Journal 0021 copied every row into its run's month's partition, with its run's created_at.
        for table in ("journal_intent", "journal_journalevent"):
            in_its_month = (
                "copied.run_created_at = run.created_at AND copied.tableoid::regclass::text = "
                "%s || to_char(run.created_at AT TIME ZONE 'UTC', 'YYYY_MM')"
            )
            placed = conn.execute(
                f"SELECT count(*), count(*) FILTER (WHERE {in_its_month}) FROM {table} AS copied "  # noqa: S608
                "JOIN journal_run AS run ON run.id = copied.run_id",
                [f"{table}_"],
            ).fetchone()
            assert placed is not None and placed[0] > 0 and placed[0] == placed[1], (table, placed)
        # New rows number on from the old ones: the sequences followed their tables.
        new_run_events = conn.execute(
            "INSERT INTO journal_journalevent (run_id, kind, actor_kind, actor_name, data, at, run_created_at) "
            "SELECT run_id, 'customer_told', 'agent', 'returns-bot', '{}', now(), run_created_at "
            "FROM journal_journalevent "
            "RETURNING id"
        ).fetchall()
        assert new_run_events == [(2,)]
        conn.rollback()

    # And back: the console's names again, with the rows.
    _manage(scratch_database, "migrate", "--noinput", *BEFORE_THE_RENAME[0])
    tables = _tables(scratch_database)
    assert {f"handover_{model}" for model in JOURNAL_MODELS} <= tables
    assert not tables & {f"journal_{model}" for model in JOURNAL_MODELS}
