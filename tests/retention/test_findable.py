"""An archived run stays findable: the console's search finds it by its ticket, its page says it
is archived, names its archive and offers nothing, without reading its intents or events; the
run detail API answers its summary and its archive instead of its intents."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from journal.models import Run, Tenant
from retention.models import Archive
from retention.services import archive_due_runs
from tests.retention.conftest import past_retention

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(resolved_run: Callable[[str], Run], tenant: Tenant) -> Run:
    run = resolved_run("T-9001")
    assert archive_due_runs(past_retention(tenant))[0].marked == [str(run.pk)]
    return Run.objects.get(pk=run.pk)


@pytest.fixture
def lead_client(persona: Callable[..., Any], tenant: Tenant) -> Client:
    client = Client()
    client.force_login(persona("team_lead", tenant, username="lena-lead"))
    return client


def test_the_console_search_finds_an_archived_run_by_its_ticket(archived: Run, lead_client: Client) -> None:
    response = lead_client.get(reverse("handover:run_list"), {"q": "9001"})

    assert response.status_code == 200
    page = response.content.decode()
    assert reverse("handover:run_detail", args=[archived.pk]) in page
    assert 'class="archived"' in page


def test_an_archived_runs_page_names_its_archive_offers_no_action_and_reads_no_call(
    archived: Run, lead_client: Client
) -> None:
    archive = Archive.objects.get()

    with CaptureQueriesContext(connection) as queries:
        response = lead_client.get(reverse("handover:run_detail", args=[archived.pk]))

    assert response.status_code == 200
    page = response.content.decode()
    assert "Archived" in page and "was archived on" in page
    assert archive.file_name in page and archive.sha256 in page
    panel = page.split('id="run-panel"', 1)[1]
    assert "<button" not in panel and "/act/" not in panel and "/confirm/" not in panel
    assert "hx-trigger" not in panel  # nothing polls a run that cannot change
    read = " ".join(query["sql"] for query in queries.captured_queries)
    assert "journal_intent" not in read and "journal_journalevent" not in read


def test_an_action_on_an_archived_run_is_refused_and_writes_nothing(
    archived: Run, lead_client: Client
) -> None:
    version = archived.version

    response = lead_client.post(
        reverse("handover:run_act", args=[archived.pk, "assign"]), {"state": "1.1.1"}, HTTP_HX_REQUEST="true"
    )

    assert response.status_code == 409
    assert "archived" in response.content.decode()
    assert Run.objects.get(pk=archived.pk).version == version


def test_the_run_detail_api_answers_its_summary_and_its_archive(
    archived: Run, agent_client: APIClient
) -> None:
    archive = Archive.objects.get()

    with CaptureQueriesContext(connection) as queries:
        answer = agent_client.get(f"/api/v1/runs/{archived.pk}/")

    assert answer.status_code == 200
    body = answer.json()
    assert body["ticket_id"] == "T-9001" and body["status"] == archived.status
    assert body["archived_at"] is not None
    assert body["archive"] == {
        "file_name": archive.file_name,
        "sha256": archive.sha256,
        "month": archive.month.isoformat(),
        "verified_at": body["archive"]["verified_at"],
        "intents": 1,
        "events": archived.archived.events,
    }
    assert "intents" not in body and "intents_next" not in body
    read = " ".join(query["sql"] for query in queries.captured_queries)
    assert "journal_intent" not in read


@pytest.mark.parametrize("path", ["intents/", "handover/", "export/"])
def test_the_apis_that_read_an_archived_runs_calls_answer_gone(
    archived: Run, agent_client: APIClient, path: str
) -> None:
    answer = agent_client.get(f"/api/v1/runs/{archived.pk}/{path}")

    assert answer.status_code == 410
    assert f"/api/v1/runs/{archived.pk}/" in answer.json()["detail"]
    assert agent_client.get(f"/api/v1/runs/{archived.pk}/customer-messages/").status_code == 200
