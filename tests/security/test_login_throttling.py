"""Login throttling (issue 20, item 4): a password is not guessed by trying; a lockout is audited
in the person's tenant and answered with a page saying when to try again."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from audit.chain import audit_verify
from audit.models import AuditEntry
from journal.models import Tenant

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


@pytest.fixture
def lead(tenant: Tenant, persona: Any) -> Any:
    user = persona("team_lead", tenant)
    user.set_password(PASSWORD)
    user.save()
    return user


def _login(client: Client, username: str, password: str, url: str = "") -> Any:
    return client.post(url or reverse("login"), {"username": username, "password": password})


def _logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_twenty_five_wrong_passwords_then_the_right_one_is_refused(lead: Any) -> None:
    client = Client()
    answers = [_login(client, lead.username, f"guess-{n}").status_code for n in range(25)]
    right = _login(client, lead.username, PASSWORD)

    limit = settings.AXES_FAILURE_LIMIT
    assert answers[: limit - 1] == [200] * (limit - 1)  # the form again, "didn't match"
    assert set(answers[limit - 1 :]) == {429}
    assert right.status_code == 429
    assert not _logged_in(client)
    page = right.content.decode()
    assert (
        "Too many failed logins" in page and f"for {settings.AXES_COOLOFF_TIME.seconds // 60} minutes" in page
    )
    assert '<link rel="stylesheet"' in page  # the console's styled page, not a bare message

    # Only that address is locked out of that account: the person logs in from another.
    elsewhere = Client(REMOTE_ADDR="10.0.0.7")
    assert _login(elsewhere, lead.username, PASSWORD).status_code == 302
    assert _logged_in(elsewhere)


def test_a_lockout_is_one_audit_row_in_the_persons_tenant(lead: Any, tenant: Tenant) -> None:
    client = Client()
    for n in range(25):
        _login(client, lead.username, f"guess-{n}")

    entry = AuditEntry.objects.get(action="login_locked_out")  # once, not once per knock
    assert (entry.tenant_id, entry.user_id, entry.username) == (tenant.pk, lead.pk, lead.username)
    assert entry.new_state == {
        "ip_address": "127.0.0.1",
        "failures": settings.AXES_FAILURE_LIMIT,
        "locked_minutes": settings.AXES_COOLOFF_TIME.seconds // 60,
    }
    assert "127.0.0.1" in entry.note
    assert audit_verify().ok  # a link of the chain like any other

    # The team lead reads it in the tenant's audit trail.
    reader = Client(REMOTE_ADDR="10.0.0.7")
    reader.force_login(lead)
    trail = reader.get(reverse("handover:audit"), {"action": "login_locked_out"}).content.decode()
    assert 'class="audit-login_locked_out"' in trail


def test_the_admin_login_is_throttled_too(tenant: Tenant, persona: Any) -> None:
    admin = persona("admin", tenant)
    admin.set_password(PASSWORD)
    admin.save()
    client = Client()
    url = reverse("admin:login")
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login(client, admin.username, f"guess-{n}", url)
    assert _login(client, admin.username, PASSWORD, url).status_code == 429
    assert not _logged_in(client)


def test_a_username_of_no_account_is_locked_out_but_writes_no_tenants_audit(lead: Any) -> None:
    client = Client()
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login(client, "nobody-here", f"guess-{n}")
    assert _login(client, "nobody-here", PASSWORD).status_code == 429
    assert not AuditEntry.objects.exists()
    # The real account, from the same address, is untouched.
    assert _login(client, lead.username, PASSWORD).status_code == 302


def test_a_success_before_the_limit_starts_the_count_again(lead: Any) -> None:
    client = Client()
    for n in range(settings.AXES_FAILURE_LIMIT - 1):
        _login(client, lead.username, f"guess-{n}")
    assert _login(client, lead.username, PASSWORD).status_code == 302
    client.logout()
    for n in range(settings.AXES_FAILURE_LIMIT - 1):
        _login(client, lead.username, f"again-{n}")
    assert _login(client, lead.username, PASSWORD).status_code == 302


def test_a_hostile_username_is_counted_not_a_500(lead: Any) -> None:
    # Django's login form checks no length before it authenticates: 10,000 characters reach axes.
    client = Client()
    answers = [
        _login(client, "x" * 10_000, f"guess-{n}").status_code for n in range(settings.AXES_FAILURE_LIMIT + 1)
    ]
    assert answers[-1] == 429 and 500 not in answers
    # A NUL is refused by the form itself, before any password is checked: nothing to count.
    assert {_login(client, "lead\x00admin", "guess").status_code for _ in range(3)} == {200}
    assert _login(client, lead.username, PASSWORD).status_code == 302  # another username: untouched
