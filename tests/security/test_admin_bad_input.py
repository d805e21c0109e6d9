"""The Django admin answers bad input as a client error, never a 500, and a row of another
tenant as one that exists nowhere (issue 33, item 4). The admin fuzz in test_page_fuzz.py sends
every such input to every registered admin; these are the cases the attacker's probe found."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from compensations.models import CatalogueEntry, Reversibility
from fanout.models import FanOut
from journal import services
from journal.models import Tenant
from reconciliation.models import TaskPolicy
from tests import factories

pytestmark = pytest.mark.django_db


def _client(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _url(model: Any, view: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def _entry(tenant: Tenant | None, tool: str = "reserve") -> CatalogueEntry:
    entry = CatalogueEntry.objects.create(
        tenant=tenant, tool=tool, description="hold stock", reversibility=Reversibility.REVERSIBLE
    )
    entry.description = "hold the stock"
    entry.save()  # a second version
    return entry


@pytest.mark.parametrize("model", [CatalogueEntry, TaskPolicy])
@pytest.mark.parametrize("object_id", ["abc", "1e400", "a\x00b", "_2Fetc"])
def test_a_history_of_an_id_that_is_no_id_is_a_404(
    persona: Any, tenant: Tenant, model: Any, object_id: str
) -> None:
    for user in (persona("admin", tenant), persona("tenant_admin", tenant)):
        assert _client(user).get(_url(model, "history", object_id)).status_code in (400, 404)
        assert _client(user).get(f"{_url(model, 'history', '1')}{object_id}/").status_code in (400, 404)


def test_a_version_id_that_is_no_id_is_a_404(persona: Any, tenant: Tenant) -> None:
    entry = _entry(tenant)
    client = _client(persona("tenant_admin", tenant))
    assert client.get(f"{_url(CatalogueEntry, 'history', entry.pk)}abc/").status_code == 404
    version = entry.history.order_by("history_id").first()
    assert version is not None
    assert client.get(f"{_url(CatalogueEntry, 'history', entry.pk)}{version.history_id}/").status_code == 200


def test_another_tenants_history_is_a_404_as_a_missing_row_is(
    persona: Any, tenant: Tenant, other_tenant: Tenant
) -> None:
    theirs = _entry(other_tenant)
    version = theirs.history.order_by("history_id").first()
    assert version is not None
    client = _client(persona("tenant_admin", tenant))
    assert client.get(_url(CatalogueEntry, "history", theirs.pk)).status_code == 404
    assert client.get(_url(CatalogueEntry, "history", 2_147_483_000)).status_code == 404
    version_url = f"{_url(CatalogueEntry, 'history', theirs.pk)}{version.history_id}/"
    assert client.get(version_url).status_code == 404
    assert client.post(version_url, {"description": "mine now"}).status_code == 404
    theirs.refresh_from_db()
    assert theirs.description == "hold the stock"
    # A deleted row of acme's, known only from its history, is no different.
    deleted_pk = theirs.pk
    theirs.delete()
    assert client.get(_url(CatalogueEntry, "history", deleted_pk)).status_code == 404
    # Sundry's own, and the defaults, stay readable; acme's admin reads acme's.
    assert client.get(_url(CatalogueEntry, "history", _entry(tenant, "refund").pk)).status_code == 200
    assert client.get(_url(CatalogueEntry, "history", _entry(None, "refund").pk)).status_code == 200
    assert (
        _client(persona("admin", other_tenant)).get(_url(CatalogueEntry, "history", deleted_pk)).status_code
        == 200
    )


@pytest.mark.parametrize(
    ("model", "params"),
    [
        (TaskPolicy, {"strategy__exact": "\x00"}),
        (CatalogueEntry, {"reversibility__exact": "a\x00b"}),
        (FanOut, {"outcome__exact": "\x00"}),
        (Group, {"q": "\x00"}),
    ],
)
def test_a_nul_in_a_change_lists_filter_is_a_400(
    persona: Any, tenant: Tenant, model: Any, params: Any
) -> None:
    response = _client(persona("admin", tenant)).get(_url(model, "changelist"), params)
    assert response.status_code == 400


@pytest.mark.parametrize("selected", ["abc", "", "\x00", "1e400"])
def test_a_selected_row_that_is_no_id_is_a_400_and_deletes_nothing(
    persona: Any, tenant: Tenant, selected: str
) -> None:
    admin = _client(persona("admin", tenant))  # which grants the roles their groups again
    roles = Group.objects.count()
    response = admin.post(
        _url(Group, "changelist"), {"action": "delete_selected", "_selected_action": selected, "post": "yes"}
    )
    assert response.status_code == 400
    assert Group.objects.count() == roles


def test_a_granted_tenant_admin_sees_neither_another_tenants_fan_outs_nor_the_tenant(
    persona: Any, tenant: Tenant, other_tenant: Tenant
) -> None:
    # An operator may grant a tenant's admin the view permissions of fan-outs and tenants.
    user = persona("tenant_admin", tenant)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_fanout", "view_tenant"]))
    now = timezone.now()
    fanouts = {}
    for each in (tenant, other_tenant):
        run = factories.run_via_service(tenant=each, actor=services.Actor.agent("bot"))
        fanouts[each.slug] = FanOut.objects.create(
            run=run, turn=1, name="stock", deadline_ms=2000, started_at=now, deadline_at=now
        )
    client = _client(type(user).objects.get(pk=user.pk))
    assert client.get(_url(FanOut, "change", fanouts["sundry"].pk)).status_code == 200
    assert client.get(_url(FanOut, "change", fanouts["acme"].pk)).status_code == 404
    listed = client.get(_url(FanOut, "changelist")).content.decode()
    assert f"/{fanouts['sundry'].pk}/change/" in listed and f"/{fanouts['acme'].pk}/change/" not in listed
    assert client.get(_url(Tenant, "change", tenant.pk)).status_code == 200
    assert client.get(_url(Tenant, "change", other_tenant.pk)).status_code == 404
    assert "Acme" not in client.get(_url(Tenant, "changelist")).content.decode()
