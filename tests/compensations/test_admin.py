"""compensations/admin.py: staff read the catalogue, admins edit it, and every edit is kept."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from compensations.models import CatalogueEntry
from tests import factories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("catalogue")]


def _client_for(group: str) -> tuple[Client, Any]:
    user = factories.StaffUserFactory(username=f"{group}-person", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    client = Client()
    client.force_login(user)
    return client, user


def _form(entry: CatalogueEntry, **changes: Any) -> dict[str, Any]:
    data = {
        "tool": entry.tool,
        "description": entry.description,
        "compensating_tool": entry.compensating_tool,
        "argument_mapping": json.dumps(entry.argument_mapping),
        "reversibility": entry.reversibility,
        "until_condition": entry.until_condition,
        "deadline_field": entry.deadline_field,
        "loss": entry.loss,
        "staff_notes": entry.staff_notes,
    }
    data.update(changes)
    return data


@pytest.mark.parametrize("group", ["support_staff", "team_lead"])
def test_support_staff_and_team_leads_read_the_catalogue_but_cannot_change_it(group: str) -> None:
    client, _ = _client_for(group)
    entry = CatalogueEntry.objects.get(tool="reship")
    change_url = reverse("admin:compensations_catalogueentry_change", args=[entry.pk])
    history_before = entry.history.count()

    assert client.get(reverse("admin:compensations_catalogueentry_changelist")).status_code == 200
    assert client.get(change_url).status_code == 200  # read-only view
    assert client.post(change_url, _form(entry, loss="nothing")).status_code == 403
    assert client.get(reverse("admin:compensations_catalogueentry_add")).status_code == 403
    assert (
        client.post(reverse("admin:compensations_catalogueentry_delete", args=[entry.pk])).status_code == 403
    )

    entry.refresh_from_db()
    assert entry.loss == "recall fee after the cutoff"
    assert entry.history.count() == history_before


def test_an_admin_edits_an_entry_and_the_history_keeps_who_and_the_old_and_new_values() -> None:
    client, admin_user = _client_for("admin")
    # The seeded entries are the defaults of every tenant: a superuser's to change (a tenant's
    # admin adds its own entry over one: tests/security/test_tenant_admin.py).
    admin_user.is_superuser = True
    admin_user.save()
    entry = CatalogueEntry.objects.get(tool="reship")

    response = client.post(
        reverse("admin:compensations_catalogueentry_change", args=[entry.pk]),
        _form(entry, reversibility="partial", until_condition=""),
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    entry.refresh_from_db()
    assert entry.reversibility == "partial"
    latest = entry.history.first()
    assert latest.history_user == admin_user
    assert latest.history_type == "~"
    changes = {c.field: (c.old, c.new) for c in latest.diff_against(latest.prev_record).changes}
    assert changes["reversibility"] == ("reversible_until", "partial")
    assert changes["until_condition"] == ("until the recall cutoff", "")
    history_page = client.get(reverse("admin:compensations_catalogueentry_history", args=[entry.pk]))
    assert history_page.status_code == 200
    assert admin_user.username in history_page.content.decode()


def test_users_outside_the_staff_roles_cannot_see_the_catalogue() -> None:
    user = factories.StaffUserFactory(username="no-role", is_staff=True)
    client = Client()
    client.force_login(user)

    assert client.get(reverse("admin:compensations_catalogueentry_changelist")).status_code == 403
