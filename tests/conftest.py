"""Shared fixtures. The suite runs on the machine's real PostgreSQL (and Redis where a test
claims it); scripts/check_services.py refuses to start the run when either is missing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from celery import current_app
from django.contrib.auth.models import Group
from django.test import override_settings
from rest_framework.test import APIClient

from compensations.defaults import catalogue_grant_roles
from config.celery import app as seam_celery_app
from console.roles import roles_grant
from devtools.processes import database_url, running_sandbox
from journal.models import AgentToken, Run, Tenant
from journal.services import Actor
from sandbox.catalogue import catalogue_seed_defaults
from tests import factories
from tests.support.stuck_runs import escalate_ticket

# The closing summaries, plugins of this conftest so that every run of the suite has them, the
# process that prints them under pytest-xdist included: the recovery figure (and, under CI, its
# failing a session with a needless hand-over), the security tests' figures, and their journey
# from the workers that gather them.
pytest_plugins = [
    "tests.support.recovery_figure",
    "tests.support.security_summary",
    "tests.support.worker_figures",
]


@pytest.fixture(autouse=True)
def seam_celery_app_stays_current() -> Iterator[None]:
    """Seam's tasks are shared tasks: they publish through whichever Celery app is current. A test
    that builds an app of its own (to reach a private broker) and leaves it current sends every
    later test's tasks there, to a broker that may be gone; such apps take set_as_current=False."""
    yield
    assert current_app._get_current_object() is seam_celery_app, (
        "this test left its own Celery app current; build it with Celery(..., set_as_current=False)"
    )


@pytest.fixture
def tenant(db: None) -> Tenant:
    return factories.TenantFactory(slug="sundry", name="Sundry")


@pytest.fixture
def other_tenant(db: None) -> Tenant:
    return factories.TenantFactory(slug="acme", name="Acme")


@pytest.fixture
def agent_actor() -> Actor:
    return Actor.agent("returns-bot")


def _token_for(tenant: Tenant, name: str) -> str:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name=name, digest=AgentToken.digest_of(secret))
    return secret


@pytest.fixture
def agent_client(tenant: Tenant) -> APIClient:
    """An API client holding an agent token of `tenant`."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {_token_for(tenant, 'returns-bot')}")
    return client


@pytest.fixture
def other_agent_client(other_tenant: Tenant) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {_token_for(other_tenant, 'acme-bot')}")
    return client


@pytest.fixture
def support_user(tenant: Tenant) -> Any:
    return factories.StaffUserFactory(username="support", membership__tenant=tenant)


@pytest.fixture
def make_run(tenant: Tenant, agent_actor: Actor) -> Callable[..., Any]:
    def make(**overrides: Any) -> Any:
        return factories.run_via_service(
            tenant=overrides.pop("tenant", tenant), actor=agent_actor, **overrides
        )

    return make


@pytest.fixture(scope="session")
def sandbox_server(django_db_setup: None) -> Iterator[str]:
    """Base URL (`http://127.0.0.1:<port>`, like settings.SEAM_SANDBOX_URL) of a real
    `manage.py runsandbox` subprocess on the test database, shared by the session and killed at
    its end. The subprocess commits through its own connections, so a test that reads what it
    did must use `pytest.mark.django_db(transaction=True)`."""
    from django.db import connection

    with running_sandbox(database_url(connection.settings_dict)) as (base_url, _process):
        yield base_url


@pytest.fixture
def sandbox_tools(sandbox_server: str) -> Iterator[str]:
    """The sandbox's tools (sandbox/seam.py), pointed at the running sandbox subprocess."""
    with override_settings(SEAM_SANDBOX_URL=sandbox_server):
        yield sandbox_server


@pytest.fixture
def ledger() -> Any:
    """The sandbox's ledger of effects: the truth about the world."""
    from sandbox.models import Effect

    return Effect.objects


# A person of each role in a tenant. Transactional tests empty the role groups the migrations
# made, so each call grants them again.
@pytest.fixture
def persona() -> Callable[..., Any]:
    """persona("support_staff", tenant) → a user of that role in that tenant. "admin" is a
    superuser; "tenant_admin" holds the admin role as a staff user who is not one."""

    def make(role: str, tenant: Tenant, username: str = "") -> Any:
        catalogue_grant_roles()
        roles_grant()
        user: Any = factories.StaffUserFactory(
            username=username or f"{role}-{tenant.slug}", membership__tenant=tenant
        )
        if role == "admin":
            user.is_staff = user.is_superuser = True
            user.save()
        if role == "tenant_admin":  # the admin role without being a superuser: one tenant's admin
            user.is_staff = True
            user.save()
            role = "admin"
        user.groups.add(Group.objects.get(name=role))
        return type(user).objects.get(pk=user.pk)  # a fresh copy: no cached permissions

    return make


@pytest.fixture
def escalated_bench(sandbox_tools: str) -> Run:
    """T-40912 escalated after its run died between the bench's reservation and the refund."""
    return escalate_ticket(sandbox_tools)


@pytest.fixture
def catalogue(transactional_db: None) -> None:
    """The demo's catalogue and the role grants, as the test database's `migrate` leaves them
    (transactional tests flush every table, those rows included)."""
    catalogue_seed_defaults()
    catalogue_grant_roles()
