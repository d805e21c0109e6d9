"""The audit page for team leads: its Export link carries the filters applied on the page (also
after an htmx filter, which redraws only the entries); the chain's last verification is shown,
and a lead can ask for it again (kept, audited, queued for the worker after the commit); support
staff get the styled 403 page."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from audit import tasks
from audit.chain import audit_record
from audit.models import AuditAction, AuditEntry, AuditVerification
from journal.models import Tenant
from journal.services import inside_open_transaction

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def people(tenant: Tenant, persona: Any) -> dict[str, Any]:
    """Eight audited actions: five assignments by support, three customer messages by the lead."""
    support, lead = persona("support_staff", tenant), persona("team_lead", tenant)
    for user, action, count in ((support, AuditAction.ASSIGN, 5), (lead, AuditAction.CUSTOMER_TOLD, 3)):
        for _ in range(count):
            with transaction.atomic():
                audit_record(user=user, tenant=tenant, action=action)
    return {"support": support, "lead": lead}


def _csv_rows(client: Client, href: str) -> list[list[str]]:
    response: Any = client.get(href)
    assert response.status_code == 200
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))[1:]


def _export_href(html: str) -> str:
    match = re.search(r'<a class="button" id="audit-export" href="([^"]+)">Export CSV</a>', html)
    assert match, html
    return match.group(1).replace("&amp;", "&")


def test_the_export_link_carries_the_filters_applied_on_the_page(people: dict[str, Any]) -> None:
    client = _client(people["lead"])
    url = reverse("handover:audit")
    assert len(_csv_rows(client, _export_href(client.get(url).content.decode()))) == 8

    # Filtering redraws only the entries (htmx): the link drawn with them carries the filter.
    partial = client.get(url, {"action": "customer_told", "page": "1"}, headers=HTMX).content.decode()
    assert partial.lstrip().startswith('<div id="entries"')
    href = _export_href(partial)
    assert href == reverse("handover:audit_csv") + "?action=customer_told"
    rows = _csv_rows(client, href)
    assert len(rows) == 3
    assert {row[3] for row in rows} == {"customer_told"}

    # The same from a page loaded with the filters in its address.
    page = client.get(url, {"person": people["support"].username}).content.decode()
    assert len(_csv_rows(client, _export_href(page))) == 5


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool]]:
    """verify_audit_chain.delay calls, recorded instead of sent: (id, a transaction still open)."""
    calls: list[tuple[int, bool]] = []
    monkeypatch.setattr(
        tasks.verify_audit_chain, "delay", lambda pk: calls.append((pk, inside_open_transaction()))
    )
    return calls


def test_a_lead_reruns_the_verification_from_the_page_and_sees_its_result(
    people: dict[str, Any],
    queued: list[tuple[int, bool]],
    django_capture_on_commit_callbacks: Callable[..., Any],
) -> None:
    lead = people["lead"]
    client = _client(lead)
    page = client.get(reverse("handover:audit")).content.decode()
    assert "The chain has not been checked yet." in page

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("handover:audit_verify"), headers={**HTMX, "X-Request-ID": "req-verify"}
        )
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="verification"')
    assert "Checking the chain again" in body and 'hx-trigger="every 2s"' in body
    verification = AuditVerification.objects.get()
    assert (verification.requested_by, verification.finished_at) == (lead, None)
    entry = AuditEntry.objects.get(action=AuditAction.AUDIT_VERIFY)
    assert (entry.username, entry.new_state, entry.request_id) == (
        lead.username,
        {"verification": verification.pk},
        "req-verify",
    )
    assert queued == [(verification.pk, False)]  # queued once the request's transaction committed

    # The worker runs it: the page (and the poll of its section) shows the rows checked.
    tasks.verify_audit_chain(verification.pk)
    polled = client.get(
        reverse("handover:audit"), headers={**HTMX, "HX-Target": "verification"}
    ).content.decode()
    assert polled.lstrip().startswith('<section id="verification"') and "every 2s" not in polled
    assert re.search(r"The chain is intact: <strong>9</strong> rows checked", polled)

    # Someone rewrites a row behind the triggers; the next check, posted as a plain form, names it.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("ALTER TABLE audit_auditentry DISABLE TRIGGER audit_auditentry_append_only")
        cursor.execute("UPDATE audit_auditentry SET note = 'forged' WHERE seq = 4")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("handover:audit_verify"))
    assert response.status_code == 302 and response["Location"] == reverse("handover:audit")
    tasks.verify_audit_chain(queued[-1][0])
    page = client.get(reverse("handover:audit")).content.decode()
    assert re.search(r"The chain is broken at row <strong>#4</strong>: row #4 was altered", page)


def test_support_staff_get_the_styled_403_and_cannot_run_the_verification(people: dict[str, Any]) -> None:
    client = _client(people["support"])
    response = client.get(reverse("handover:audit"))
    assert response.status_code == 403
    body = response.content.decode()
    assert "<h1>Not allowed</h1>" in body and "seam.css" in body and people["support"].username in body
    assert client.post(reverse("handover:audit_verify")).status_code == 403
    assert client.get(reverse("handover:audit_csv")).status_code == 403
    assert not AuditVerification.objects.exists()
    assert not AuditEntry.objects.filter(action=AuditAction.AUDIT_VERIFY).exists()


def test_a_check_the_worker_never_got_stops_being_waited_for(people: dict[str, Any], tenant: Tenant) -> None:
    client = _client(people["lead"])
    lost = AuditVerification.objects.create(
        tenant=tenant, requested_at=timezone.now() - timedelta(minutes=11)
    )
    page = client.get(reverse("handover:audit")).content.decode()
    assert "Checking the chain again" not in page and "every 2s" not in page
    assert "Check the chain again</button>" in page
    AuditVerification.objects.filter(pk=lost.pk).update(requested_at=timezone.now() - timedelta(minutes=1))
    page = client.get(reverse("handover:audit")).content.decode()
    assert "Checking the chain again" in page and "Check the chain again</button>" not in page
