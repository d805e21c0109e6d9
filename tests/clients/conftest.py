"""A live Seam for the client's tests: a gunicorn server process on the test database (the same
helper the benchmarks use), shared by the session; each test gets a tenant, an agent token and a
seam_client.SeamClient holding it. The server commits through its own connections, so the tests
are transactional (`django_db(transaction=True)`) and read what it wrote from the database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from seam_client import SeamClient

from journal.models import AgentToken, Tenant
from tests.support.processes import database_url, gunicorn_server, wait_until_serving


@pytest.fixture(scope="session")
def seam_server(django_db_setup: None, django_db_blocker: object) -> Iterator[str]:
    """Base URL of a real `gunicorn config.wsgi` serving the test database."""
    from django.db import connection

    with gunicorn_server(
        database_url=database_url(connection.settings_dict),
        workers=1,
        worker_class="gthread",
        threads=4,
        conn_max_age=0,
    ) as (base, server):
        wait_until_serving(base, server, "/healthz", what="answer its health check")
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
