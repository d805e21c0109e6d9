"""Login throttling across accounts and behind proxies (issue 33, item 5): one address guessing
many accounts' passwords is refused; the address is the client's behind our proxies and cannot
be forged; a person locked out at their usual address gets in again after a short, stated wait,
or at once when an admin lets them (audited)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import Permission
from django.db.models import F
from django.test import Client, RequestFactory
from django.urls import reverse

from audit.chain import audit_verify
from audit.models import AuditEntry
from console.login_throttle import client_address
from journal.models import Tenant

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"
BALANCER = "10.0.0.1"


@pytest.fixture
def people(tenant: Tenant, persona: Any) -> list[Any]:
    made = []
    for n in range(8):
        user = persona("support_staff", tenant, username=f"person-{n}")
        user.set_password(PASSWORD)
        user.save()
        made.append(user)
    return made


def _login(client: Client, username: str, password: str) -> int:
    return int(client.post(reverse("login"), {"username": username, "password": password}).status_code)


def _signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def _age_failures(minutes: float) -> None:
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - timedelta(minutes=minutes))


# --- spraying ---------------------------------------------------------------------------------


def test_one_address_guessing_many_accounts_is_refused(people: list[Any]) -> None:
    # The probe's spray: three guesses at each of seven accounts, never ten at any one.
    sprayer = Client(REMOTE_ADDR="198.51.100.66")
    answers = [_login(sprayer, person.username, f"guess-{n}") for person in people[:7] for n in range(3)]
    limit = settings.SEAM_LOGIN_ADDRESS_FAILURE_LIMIT
    assert limit <= 21
    assert answers[: limit - 1] == [200] * (limit - 1)
    assert set(answers[limit - 1 :]) == {429}
    # The address is refused for an account it never tried, even with the right password.
    assert _login(sprayer, people[7].username, PASSWORD) == 429
    assert not _signed_in(sprayer)
    page = sprayer.post(reverse("login"), {"username": people[7].username, "password": PASSWORD})
    assert "from your address, for any accounts" in page.content.decode()
    # Everyone elsewhere signs in.
    elsewhere = Client(REMOTE_ADDR="192.0.2.20")
    assert _login(elsewhere, people[0].username, PASSWORD) == 302


def test_signing_into_ones_own_account_does_not_reset_the_addresss_count(people: list[Any]) -> None:
    sprayer = Client(REMOTE_ADDR="198.51.100.66")
    limit = settings.SEAM_LOGIN_ADDRESS_FAILURE_LIMIT
    for n in range(limit - 2):
        assert _login(sprayer, people[n % 7].username, f"guess-{n}") == 200
    assert _login(sprayer, people[7].username, PASSWORD) == 302  # the sprayer's own account
    sprayer.logout()
    assert [_login(sprayer, people[1].username, f"again-{n}") for n in range(2)] == [200, 429]


# --- the address behind our proxies -----------------------------------------------------------


def _address(settings: Any, count: int, forwarded: str, remote: str = BALANCER) -> str | None:
    settings.SEAM_TRUSTED_PROXY_COUNT = count
    request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    return client_address(request)


def test_the_address_is_the_one_our_outermost_proxy_saw(settings: Any) -> None:
    # No proxy of ours: the header is anyone's to write and is never read.
    assert _address(settings, 0, "203.0.113.9") == BALANCER
    # One (the load balancer appends the address it was connected from).
    assert _address(settings, 1, "203.0.113.9") == "203.0.113.9"
    # A client writing the header itself: what it wrote is to the left, and ignored.
    assert _address(settings, 1, "127.0.0.1, 192.0.2.1, 203.0.113.9") == "203.0.113.9"
    assert _address(settings, 1, "203.0.113.9, 2001:db8::1") == "2001:db8::1"
    # Two (a CDN, then the balancer): the CDN's entry is the client's, the balancer's the CDN's.
    assert _address(settings, 2, "6.6.6.6, 203.0.113.9, 198.51.100.2") == "203.0.113.9"
    # Fewer entries than proxies, or an entry that is no address: not ours, the connection stands.
    assert _address(settings, 2, "203.0.113.9") == BALANCER
    assert _address(settings, 1, "") == BALANCER
    assert _address(settings, 1, "203.0.113.9, not-an-address") == BALANCER
    assert _address(settings, 1, "203.0.113.9, 1.2.3.4:443") == BALANCER


def test_behind_the_balancer_an_attackers_guesses_lock_only_the_attacker_out(
    settings: Any, people: list[Any]
) -> None:
    settings.SEAM_TRUSTED_PROXY_COUNT = 1
    victim = people[0]
    for n in range(settings.AXES_FAILURE_LIMIT + 2):
        # Each guess forges a different address to the left of the one the balancer appends.
        attacker = Client(REMOTE_ADDR=BALANCER, HTTP_X_FORWARDED_FOR=f"10.9.9.{n}, 203.0.113.9")
        last = _login(attacker, victim.username, f"guess-{n}")
    assert last == 429
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"203.0.113.9"}
    colleague = Client(REMOTE_ADDR=BALANCER, HTTP_X_FORWARDED_FOR="192.0.2.44")
    assert _login(colleague, victim.username, PASSWORD) == 302


def test_without_the_proxy_count_the_balancers_address_locks_everyone_out(
    settings: Any, people: list[Any]
) -> None:
    # What production did before SEAM_TRUSTED_PROXY_COUNT (and does if it is left at 0 behind a
    # balancer): every client is the balancer, so one attacker's guesses refuse the victim too.
    settings.SEAM_TRUSTED_PROXY_COUNT = 0
    victim = people[0]
    attacker = Client(REMOTE_ADDR=BALANCER, HTTP_X_FORWARDED_FOR="203.0.113.9")
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login(attacker, victim.username, f"guess-{n}")
    colleague = Client(REMOTE_ADDR=BALANCER, HTTP_X_FORWARDED_FOR="192.0.2.44")
    assert _login(colleague, victim.username, PASSWORD) == 429


# --- the way back in --------------------------------------------------------------------------


def test_at_their_usual_address_a_person_waits_minutes_not_a_quarter_hour(people: list[Any]) -> None:
    office = "192.0.2.10"
    victim, newcomer = people[0], people[1]
    at_office = Client(REMOTE_ADDR=office)
    assert _login(at_office, victim.username, PASSWORD) == 302  # the usual address, from now on
    at_office.logout()
    # Someone else at the office (a shared address) guesses both accounts' passwords.
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login(at_office, victim.username, f"guess-{n}")
        _login(at_office, newcomer.username, f"guess-{n}")
    refused = at_office.post(reverse("login"), {"username": victim.username, "password": PASSWORD})
    short = settings.SEAM_LOGIN_USUAL_ADDRESS_COOLOFF_MINUTES
    assert refused.status_code == 429 and f"for {short} minutes" in refused.content.decode()
    assert _login(at_office, newcomer.username, PASSWORD) == 429

    _age_failures(short + 0.1)
    assert _login(at_office, victim.username, PASSWORD) == 302
    assert _signed_in(at_office)
    # The newcomer never signed in from there: the full cool-down still holds them.
    assert short + 0.1 < settings.SEAM_LOGIN_COOLOFF_MINUTES
    assert _login(Client(REMOTE_ADDR=office), newcomer.username, PASSWORD) == 429


def _unlock(admin_user: Any, person: Any) -> Any:
    client = Client(REMOTE_ADDR="192.0.2.200")
    client.force_login(admin_user)
    return client.post(
        reverse("admin:auth_user_changelist"),
        {"action": "login_unlock_action", "_selected_action": [str(person.pk)]},
    )


def test_an_admin_lets_a_locked_out_person_in_at_once_and_it_is_audited(
    people: list[Any], tenant: Tenant, persona: Any
) -> None:
    victim = people[0]
    shared = Client(REMOTE_ADDR="198.51.100.66")
    for n in range(settings.SEAM_LOGIN_ADDRESS_FAILURE_LIMIT):
        _login(shared, people[n % 8].username, f"guess-{n}")
    assert _login(shared, victim.username, PASSWORD) == 429

    superuser = persona("admin", tenant)
    assert _unlock(superuser, victim).status_code == 302
    assert _login(shared, victim.username, PASSWORD) == 302
    entry = AuditEntry.objects.get(action="login_unlocked")
    assert (entry.tenant_id, entry.user_id, entry.new_state) == (
        tenant.pk,
        superuser.pk,
        {"username": victim.username},
    )
    assert entry.old_state["addresses"] == ["198.51.100.66"] and entry.old_state["failure_records"] >= 1
    assert audit_verify().ok


def test_another_tenants_admin_cannot_unlock_sundrys_people(
    people: list[Any], other_tenant: Tenant, persona: Any
) -> None:
    victim = people[0]
    guesser = Client(REMOTE_ADDR="198.51.100.66")
    for n in range(settings.AXES_FAILURE_LIMIT):
        _login(guesser, victim.username, f"guess-{n}")
    acme_admin = persona("tenant_admin", other_tenant)
    acme_admin.user_permissions.add(*Permission.objects.filter(codename__in=["view_user", "change_user"]))
    _unlock(type(acme_admin).objects.get(pk=acme_admin.pk), victim)
    assert _login(guesser, victim.username, PASSWORD) == 429
    assert not AuditEntry.objects.filter(action="login_unlocked").exists()
