"""Migrations: the roles get their permissions (compensations 0003 and handover 0008); where the
demo is installed (these test settings), `migrate` also seeds the sandbox's catalogue, each entry
with a first history row. (That production's `migrate` seeds nothing is
tests/security/test_production_settings.py's.)"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from compensations.models import CatalogueEntry
from reconciliation.models import TaskPolicy
from scenarios.seam import DEFAULT_POLICIES


# The database as `migrate` left it: pytest-django saved its rows when it made the test database
# and loads them again here, whatever the transactional tests before this one emptied.
@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_migrate_seeds_the_demo_catalogue_with_history_and_grants_the_roles() -> None:
    entry = CatalogueEntry.objects.get(tool="reship")
    assert entry.history.get().history_change_reason == "default catalogue"
    # ... and the scripted flows' policies (returns leaves the undo to a person).
    assert set(TaskPolicy.objects.values_list("task_type", flat=True)) == {p[0] for p in DEFAULT_POLICIES}
    returns = TaskPolicy.objects.get(task_type="returns")
    assert returns.undo_before_escalating is False
    assert returns.history.get().history_change_reason == "default policy"
    perms = {
        group.name: {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}
        for group in Group.objects.filter(name__in=["support_staff", "team_lead", "admin"])
    }
    support = {"compensations.view_catalogueentry", "handover.act_on_run"}
    lead = support | {"handover.view_audit_trail", "compensations.assign_deadletter"}
    assert perms == {
        "support_staff": support,
        "team_lead": lead,
        "admin": lead
        | {
            "compensations.add_catalogueentry",
            "compensations.change_catalogueentry",
            "compensations.delete_catalogueentry",
            "handover.view_notificationrule",
            "handover.add_notificationrule",
            "handover.change_notificationrule",
            "handover.delete_notificationrule",
            "reconciliation.view_taskpolicy",
            "reconciliation.add_taskpolicy",
            "reconciliation.change_taskpolicy",
            "reconciliation.delete_taskpolicy",
            "compensations.view_deadletter",
        },
    }
