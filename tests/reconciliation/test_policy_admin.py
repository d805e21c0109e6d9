"""Task policies are edited by admins in the Django admin; each edit is a new version and the
history keeps who changed what."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from reconciliation.models import TaskPolicy
from scenarios.policies import policies_seed_defaults

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_edit_bumps_the_version_and_keeps_history() -> None:
    policies_seed_defaults()
    admin = get_user_model().objects.create_superuser("boss", "boss@example.com", "pw-12345-secret")
    client = Client()
    client.force_login(admin)
    policy = TaskPolicy.objects.get(task_type="returns")

    response = client.post(
        f"/admin/reconciliation/taskpolicy/{policy.pk}/change/",
        {
            "task_type": "returns",
            "strategy": "compensate_and_escalate",
            "phase": "",
            "max_resume_age": "00:10:00",
            "agent_grace": "00:00:00",
            "notes": "after the March incident",
        },
    )

    assert response.status_code == 302
    policy.refresh_from_db()
    assert (policy.strategy, policy.version, policy.max_resume_age) == (
        "compensate_and_escalate",
        2,
        timedelta(minutes=10),
    )
    versions = list(
        policy.history.order_by("history_date").values_list("strategy", "version", "history_user")
    )
    assert versions[-1] == ("compensate_and_escalate", 2, admin.pk)
    assert ("resume_until_phase", 1) in [(strategy, version) for strategy, version, _user in versions]


def test_support_staff_cannot_edit_policies() -> None:
    policies_seed_defaults()
    staff = get_user_model().objects.create_user("support", password="pw-12345-secret", is_staff=True)
    client = Client()
    client.force_login(staff)
    policy = TaskPolicy.objects.get(task_type="returns")
    response = client.post(f"/admin/reconciliation/taskpolicy/{policy.pk}/change/", {"strategy": "resume"})
    assert response.status_code == 403
    assert TaskPolicy.objects.get(pk=policy.pk).version == 1
