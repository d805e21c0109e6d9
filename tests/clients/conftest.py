"""A live Seam for the client's tests: a gunicorn server process on the test database (the same
helper the benchmarks use), shared by the session; each test gets a tenant, an agent token and a
seam_client.SeamClient holding it. The server commits through its own connections, so the tests
are transactional (`django_db(transaction=True)`) and read what it wrote from the database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from seam_client import SeamClient

from devtools.processes import database_url, serving_seam
from journal.models import AgentToken, Tenant


@pytest.fixture(scope="session")
def seam_server(django_db_setup: None, django_db_blocker: object) -> Iterator[str]:
    """Base URL of a real `gunicorn config.wsgi` serving the test database."""
    from django.db import connection

    with serving_seam(database_url(connection.settings_dict)) as base:
        yield base


@pytest.fixture
def agent_token(tenant: Tenant) -> str:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="returns-bot", digest=AgentToken.digest_of(secret))
    return secret


@pytest.fixture
def seam(seam_server: str, agent_token: str) -> Iterator[SeamClient]:
    with SeamClient(seam_server, agent_token, retries=3, backoff=0.01) as client:
        yield client
