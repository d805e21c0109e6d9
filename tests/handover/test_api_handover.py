"""GET /api/v1/runs/{id}/handover/: the same object the run page shows, for the run's own tenant."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from handover.handover import handover_for
from handover.models import AgentToken, Run
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)


def _agent(tenant: Any) -> APIClient:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="bot", digest=AgentToken.digest_of(secret))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_the_api_returns_the_handover_the_page_shows(escalated_bench: Run, persona: Any) -> None:
    response = _agent(escalated_bench.tenant).get(f"/api/v1/runs/{escalated_bench.pk}/handover/")

    assert response.status_code == 200
    body = response.json()
    assert body == handover_for(escalated_bench)
    assert [c["tool"] for c in body["completed"]] == ["start_return", "offer_replacement"]
    assert body["not_done"][0]["detail"] == "$14.95 expedited delivery fee"

    staff = Client()
    staff.force_login(persona("support_staff", escalated_bench.tenant))
    page = staff.get(f"/runs/{escalated_bench.pk}/").content.decode()
    for item in body["completed"]:
        assert item["detail"] in page


def test_another_tenants_handover_is_not_found(escalated_bench: Run) -> None:
    outsider = _agent(factories.TenantFactory(slug="acme"))
    assert outsider.get(f"/api/v1/runs/{escalated_bench.pk}/handover/").status_code == 404
    assert APIClient().get(f"/api/v1/runs/{escalated_bench.pk}/handover/").status_code == 401
