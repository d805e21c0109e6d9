"""Migrations 0002 and 0003: the seeded catalogue has a first history row, the roles their permissions."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from compensations.models import CatalogueEntry


@pytest.mark.django_db
def test_migrations_seed_the_catalogue_with_history_and_grant_the_roles() -> None:
    # Plain (rolled-back) tests see the database exactly as the migrations left it.
    entry = CatalogueEntry.objects.get(tool="reship")
    assert entry.history.get().history_change_reason == "default catalogue"
    perms = {
        group.name: {p.codename for p in group.permissions.all()}
        for group in Group.objects.filter(name__in=["support_staff", "team_lead", "admin"])
    }
    assert perms == {
        "support_staff": {"view_catalogueentry"},
        "team_lead": {"view_catalogueentry"},
        "admin": {
            "view_catalogueentry",
            "add_catalogueentry",
            "change_catalogueentry",
            "delete_catalogueentry",
        },
    }
