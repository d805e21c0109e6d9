"""One tenant's audit metadata stays its own, and the journal's events refuse TRUNCATE as the
audit trail does.

A tenant's check of the chain walks the whole chain (its links run through every tenant's rows)
but counts and names only the tenant's rows; its page and CSV number its rows from 1; twenty
requests for a check while one is waiting queue that one. TRUNCATE, DELETE and UPDATE of
journal_journalevent are refused to the tables' owner (the suite's own superuser connection),
directly and through CASCADE; the suite's flush, which transactional tests run between cases,
still empties them (the last test here is transactional, and so is the one after it)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.urls import reverse

from audit import tasks
from audit.chain import audit_record, audit_verify
from audit.models import AuditAction, AuditEntry, AuditResult, AuditVerification
from journal import services
from journal.models import JournalEvent, Run, Tenant
from tests import factories


def _write(user: Any, tenant: Tenant, note: str) -> AuditEntry:
    with transaction.atomic():
        return audit_record(user=user, tenant=tenant, action=AuditAction.ASSIGN, note=note)


@pytest.fixture
def two_tenants(tenant: Tenant, other_tenant: Tenant, persona: Any) -> dict[str, Any]:
    """Sundry's three rows among Acme's five, interleaved."""
    lead, theirs = persona("team_lead", tenant), persona("team_lead", other_tenant)
    for i in range(5):
        _write(theirs, other_tenant, f"acme {i}")
        if i < 3:
            _write(lead, tenant, f"sundry {i}")
    return {"lead": lead, "theirs": theirs}


def _sql(statement: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(statement)


@pytest.mark.django_db
def test_a_tenants_check_counts_and_names_its_own_rows_only(
    two_tenants: dict[str, Any], tenant: Tenant, other_tenant: Tenant
) -> None:
    assert audit_verify().checked == 8  # the whole chain, for an operator
    assert audit_verify(tenant).checked == 3
    assert audit_verify(other_tenant).checked == 5
    assert list(
        AuditEntry.objects.filter(tenant=tenant).order_by("seq").values_list("tenant_seq", flat=True)
    ) == [
        1,
        2,
        3,
    ]

    # Acme's fourth row (the chain's row #6) is rewritten behind the guards.
    acme_fourth = AuditEntry.objects.get(tenant=other_tenant, tenant_seq=4)
    _sql("ALTER TABLE audit_auditentry DISABLE TRIGGER audit_auditentry_append_only")
    _sql(f"UPDATE audit_auditentry SET note = 'forged' WHERE id = {acme_fourth.pk}")  # noqa: S608
    whole = audit_verify()
    assert (whole.result, whole.broken_at) == (AuditResult.BROKEN, acme_fourth.seq)
    ours = audit_verify(tenant)
    # Sundry learns the shared trail is broken after its three rows, not where in Acme's.
    assert (ours.result, ours.checked, ours.broken_at) == (AuditResult.BROKEN, 3, 4)
    assert f"#{acme_fourth.seq}" not in ours.problem and "not yours" in ours.problem
    theirs = audit_verify(other_tenant)
    assert (theirs.checked, theirs.broken_at) == (3, 4)
    assert theirs.problem == "row #4 was altered: its content no longer matches its hash"


@pytest.mark.django_db
def test_the_page_and_the_csv_show_a_tenants_numbers_and_checks_only(
    two_tenants: dict[str, Any],
    tenant: Tenant,
    other_tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    queued: list[int] = []
    monkeypatch.setattr(tasks.verify_audit_chain, "delay", queued.append)
    ours, theirs = Client(), Client()
    ours.force_login(two_tenants["lead"])
    theirs.force_login(two_tenants["theirs"])

    with django_capture_on_commit_callbacks(execute=True):
        assert ours.post(reverse("handover:audit_verify")).status_code == 302
    tasks.verify_audit_chain(queued[-1])
    verification = AuditVerification.objects.get()
    # Sundry's three rows and the audited request for the check itself: never Acme's five.
    assert (verification.tenant, verification.checked, verification.result) == (tenant, 4, AuditResult.INTACT)
    page = ours.get(reverse("handover:audit")).content.decode()
    assert "The chain is intact: <strong>4</strong> rows checked" in page
    # Acme's page shows no check of Sundry's: it has asked for none.
    assert "The chain has not been checked yet." in theirs.get(reverse("handover:audit")).content.decode()

    # Acme's rows are numbered from 1 in its export, though they began the chain.
    response: Any = theirs.get(reverse("handover:audit_csv"))
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))[1:]
    assert sorted(int(row[0]) for row in rows) == [1, 2, 3, 4, 5]
    response = ours.get(reverse("handover:audit_csv"))
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))[1:]
    # Sundry's three rows and its request for the check, numbered 1 to 4.
    assert sorted(int(row[0]) for row in rows) == [1, 2, 3, 4]


@pytest.mark.django_db
def test_twenty_requests_while_a_check_waits_queue_one(
    two_tenants: dict[str, Any],
    tenant: Tenant,
    other_tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    queued: list[int] = []
    monkeypatch.setattr(tasks.verify_audit_chain, "delay", queued.append)
    client = Client()
    client.force_login(two_tenants["lead"])
    for _ in range(20):
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(reverse("handover:audit_verify"), headers={"HX-Request": "true"})
        assert response.status_code == 200 and "Checking the chain again" in response.content.decode()
    assert len(queued) == 1
    assert AuditVerification.objects.filter(tenant=tenant).count() == 1
    assert AuditEntry.objects.filter(action=AuditAction.AUDIT_VERIFY).count() == 1

    # Another tenant's request is its own; once the first check is done, a new one queues.
    other = Client()
    other.force_login(two_tenants["theirs"])
    with django_capture_on_commit_callbacks(execute=True):
        other.post(reverse("handover:audit_verify"))
    assert len(queued) == 2
    tasks.verify_audit_chain(queued[0])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("handover:audit_verify"))
    assert len(queued) == 3
    assert AuditVerification.objects.filter(tenant=tenant).count() == 2


def _refused(statement: str) -> str:
    with pytest.raises(DatabaseError) as refusal, transaction.atomic():
        _sql(statement)
    return str(refusal.value)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "statement",
    [
        "TRUNCATE journal_journalevent",
        "TRUNCATE journal_journalevent CASCADE",
        "TRUNCATE journal_run CASCADE",
        "DELETE FROM journal_journalevent",
        "UPDATE journal_journalevent SET actor_name = 'someone else'",
    ],
)
def test_the_journals_events_refuse_change_to_the_tables_owner(tenant: Tenant, statement: str) -> None:
    run = factories.run_via_service(tenant=tenant, actor=services.Actor.agent("returns-bot"))
    events = JournalEvent.objects.filter(run=run).count()
    assert events > 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone() == (True,)  # stronger than the owner: the guard holds for it too
    refusal = _refused(statement)
    # Through CASCADE from the runs, the audit rows' guard may answer first: either refuses.
    assert "journal_journalevent is append-only" in refusal or (
        "CASCADE" in statement and "is append-only" in refusal
    )
    assert JournalEvent.objects.filter(run=run).count() == events
    assert Run.objects.filter(pk=run.pk).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", ["first", "second"])
def test_transactional_cases_still_start_empty_after_the_flush(
    tenant: Tenant, persona: Any, case: str
) -> None:
    """Each case commits events and audit rows; the flush between them empties both past the
    guards (tests/support/postgresql), so each starts from an empty journal and a fresh chain."""
    assert not JournalEvent.objects.exists() and not AuditEntry.objects.exists()
    run = factories.run_via_service(tenant=tenant, actor=services.Actor.agent("returns-bot"))
    _write(persona("team_lead", tenant), tenant, case)
    assert JournalEvent.objects.filter(run=run).exists()
    assert audit_verify().ok and AuditEntry.objects.get().tenant_seq == 1
