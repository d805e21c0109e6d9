"""A tenant's retention period must outlast the longest undo its catalogue allows: the tenant
admin refuses a shorter one, naming the field, and writes nothing. The catalogue is the
seeded one (the `catalogue` fixture: a transactional test before these may have emptied it)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from console.forms import TenantForm
from journal.models import Tenant
from retention.windows import longest_undo_window
from tests.support.stuck_runs import sandbox_tools_declared

pytestmark = pytest.mark.django_db


def _post(client: Client, tenant: Tenant, retention_days: int) -> Any:
    return client.post(
        reverse("admin:journal_tenant_change", args=[tenant.pk]),
        {
            "slug": tenant.slug,
            "name": tenant.name,
            "retention_days": retention_days,
            # The tenant's settings, inline on the same page (none yet).
            "console_settings-TOTAL_FORMS": "0",
            "console_settings-INITIAL_FORMS": "0",
            "console_settings-MIN_NUM_FORMS": "0",
            "console_settings-MAX_NUM_FORMS": "1",
        },
    )


def test_the_longest_undo_window_is_the_declared_deadline_of_a_reversible_until_entry(
    tenant: Tenant, catalogue: None
) -> None:
    # The seeded catalogue grades reship reversible until the receipt's recall cutoff, which the
    # sandbox's shipping tool declares lies two hours after the call.
    with sandbox_tools_declared():
        longest = longest_undo_window(tenant=tenant)
    assert longest is not None
    assert (longest.tool, longest.window, longest.days_needed) == ("reship", timedelta(hours=2), 1)


def test_the_tenant_admin_refuses_a_retention_shorter_than_an_undo_window(
    tenant: Tenant, persona: Callable[..., Any], catalogue: None
) -> None:
    client = Client()
    client.force_login(persona("admin", tenant))

    with sandbox_tools_declared():
        refused = _post(client, tenant, 0)
        kept = _post(client, tenant, 30)

    assert refused.status_code == 200  # the admin draws the form again with the error
    errors = refused.context["adminform"].form.errors
    assert list(errors) == ["retention_days"]
    assert "retention_days: 0 days is too short" in errors["retention_days"][0]
    assert "2 hours" in errors["retention_days"][0]
    assert kept.status_code == 302
    tenant.refresh_from_db()
    assert tenant.retention_days == 30


def test_without_a_declared_undo_window_the_form_takes_the_period(tenant: Tenant) -> None:
    form = TenantForm({"slug": tenant.slug, "name": tenant.name, "retention_days": 1}, instance=tenant)
    assert form.is_valid(), form.errors
