"""A run's customer reference (issue 32, "Triage"): recorded when the runtime opens the run,
answered with the run, validated by the API and by the journal's own service (a 400 naming
`customer_ref`, nothing written), and described in the OpenAPI schema."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from journal import services
from journal.models import CUSTOMER_REF_MAX, JournalEvent, Run, Tenant
from tests import factories

pytestmark = pytest.mark.django_db


def _create(client: APIClient, **fields: Any) -> Any:
    body = {"task_type": "returns", "versions": dict(factories.VERSIONS), **fields}
    return client.post("/api/v1/runs/", body, format="json")


def test_a_run_opened_with_a_customer_reference_keeps_it_and_answers_it(agent_client: APIClient) -> None:
    response = _create(agent_client, ticket_id="T-40912", customer_ref="ada@example.com")

    assert response.status_code == 201, response.content
    assert response.json()["customer_ref"] == "ada@example.com"
    run = Run.objects.get(pk=response.json()["id"])
    assert run.customer_ref == "ada@example.com"
    assert agent_client.get(f"/api/v1/runs/{run.pk}/").json()["customer_ref"] == "ada@example.com"
    listed = agent_client.get("/api/v1/runs/", {"ticket_id": "T-40912"}).json()["results"]
    assert [row["customer_ref"] for row in listed] == ["ada@example.com"]


def test_a_run_opened_without_one_has_an_empty_customer_reference(agent_client: APIClient) -> None:
    response = _create(agent_client, ticket_id="T-1")

    assert response.status_code == 201
    assert response.json()["customer_ref"] == ""
    assert Run.objects.get().customer_ref == ""


def test_a_reference_with_spaces_around_it_is_stored_trimmed(agent_client: APIClient) -> None:
    response = _create(agent_client, customer_ref="  ada@example.com ")

    assert response.status_code == 201, response.content
    assert Run.objects.get().customer_ref == "ada@example.com"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("x" * (CUSTOMER_REF_MAX + 1), id="too long"),
        pytest.param("ada\x00@example.com", id="NUL"),
        pytest.param(["ada@example.com"], id="not a string"),
    ],
)
def test_a_bad_customer_reference_is_a_400_naming_it_and_nothing_is_written(
    agent_client: APIClient, value: Any
) -> None:
    response = _create(agent_client, customer_ref=value)

    assert response.status_code == 400, response.content
    assert list(response.json()) == ["customer_ref"]
    assert not Run.objects.exists() and not JournalEvent.objects.exists()


def test_the_longest_reference_allowed_is_kept_whole(agent_client: APIClient) -> None:
    longest = "c" * CUSTOMER_REF_MAX
    assert _create(agent_client, customer_ref=longest).status_code == 201
    assert Run.objects.get().customer_ref == longest


def test_the_journal_refuses_a_reference_too_long_by_itself(
    tenant: Tenant, agent_actor: services.Actor
) -> None:
    """A caller inside Seam (a scenario, a command) goes through the same limit as the API."""
    with pytest.raises(services.InvalidInput) as refused:
        factories.run_via_service(tenant=tenant, actor=agent_actor, customer_ref="x" * (CUSTOMER_REF_MAX + 1))

    assert refused.value.field == "customer_ref"
    assert not Run.objects.exists()


def test_the_schema_describes_the_customer_reference_on_create_and_on_the_run() -> None:
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]

    created = schema["RunCreateRequest"]["properties"]["customer_ref"]
    assert created["maxLength"] == CUSTOMER_REF_MAX and created["description"]
    assert "customer_ref" not in schema["RunCreateRequest"].get("required", [])
    assert "customer_ref" in schema["Run"]["properties"]
    assert "customer_ref" in schema["RunDetail"]["properties"]
