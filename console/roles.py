"""The staff roles and what each may do. A role is a Django group; its permissions are granted by
migrations (and again by `create_demo_users`), only ever added, never removed, so an operator's
own grants survive.

- support_staff: act on runs (compensate, resume, settle an uncertain step, resolve).
- team_lead: all of that, plus the audit trail and assigning dead letters to people.
- admin: all of that, plus the catalogue, task policies and notification rules (Django admin):
  their own tenant's rows only, over the defaults that only superusers change (journal.tenant_admin).
Agent tokens are not users: they reach the REST API only, for one tenant."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group, Permission

SUPPORT = ["handover.act_on_run", "compensations.view_catalogueentry"]
TEAM_LEAD = [*SUPPORT, "handover.view_audit_trail", "compensations.assign_deadletter"]
ADMIN = [
    *TEAM_LEAD,
    "handover.view_notificationrule",
    "handover.add_notificationrule",
    "handover.change_notificationrule",
    "handover.delete_notificationrule",
    "reconciliation.view_taskpolicy",
    "reconciliation.add_taskpolicy",
    "reconciliation.change_taskpolicy",
    "reconciliation.delete_taskpolicy",
    "compensations.view_deadletter",
]

ROLE_PERMISSIONS: dict[str, list[str]] = {"support_staff": SUPPORT, "team_lead": TEAM_LEAD, "admin": ADMIN}


def roles_grant(group_model: Any = None, permission_model: Any = None) -> None:
    """Give each role group its permissions (creating the group if missing). Only adds."""
    if group_model is None or permission_model is None:
        group_model, permission_model = Group, Permission
    for group_name, dotted in ROLE_PERMISSIONS.items():
        group, _ = group_model.objects.get_or_create(name=group_name)
        for name in dotted:
            app_label, codename = name.split(".")
            permission = permission_model.objects.filter(
                content_type__app_label=app_label, codename=codename
            ).first()
            if permission is None:
                raise LookupError(f"permission {name} not created yet")
            group.permissions.add(permission)
