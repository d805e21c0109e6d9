"""Tenants in administration (issue 20, item 1). A tenant's admin (the admin role, not a
superuser) sees and changes only its tenant's rows in the Django admin; the defaults (catalogue
entries and task policies without a tenant) it reads but only superusers change; a tenant's own
catalogue entry or policy governs that tenant's runs wherever the engine looks one up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from compensations.models import CatalogueEntry, Compensation, CompensationStatus, DeadLetter, Reversibility
from compensations.selectors import catalogue_entry_for, catalogue_for
from compensations.services import compensation_request
from console.models import NotificationRule
from handover import handover_rows
from journal import services
from journal.models import Membership, Run, Tenant
from journal.why import RunWhy, why
from reconciliation.decisions import run_decide
from reconciliation.models import Strategy, TaskPolicy
from reconciliation.selectors import policy_for

pytestmark = pytest.mark.django_db

SUNDRY_HOOK = "https://chat.sundry.example/hooks/escalations"
OUTSIDE_HOOK = "https://attacker.example/collect"


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _admin_url(model: Any, view: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


@pytest.fixture
def acme_admin(other_tenant: Tenant, persona: Any) -> Any:
    return persona("tenant_admin", other_tenant)


@pytest.fixture
def sundry_rule(tenant: Tenant) -> NotificationRule:
    return NotificationRule.objects.create(tenant=tenant, task_type="returns", webhook_url=SUNDRY_HOOK)


@pytest.fixture
def default_returns_policy() -> TaskPolicy:
    policy, _ = TaskPolicy.objects.update_or_create(
        task_type="returns",
        tenant=None,
        defaults={"strategy": Strategy.RESUME_UNTIL_PHASE, "phase": "act", "version": 3},
    )
    return policy


def _rule_form(rule: NotificationRule, **changes: Any) -> dict[str, Any]:
    form = {
        "tenant": rule.tenant_id,
        "task_type": rule.task_type,
        "emails": rule.emails,
        "webhook_url": rule.webhook_url,
        "active": "on",
    }
    return form | changes


# --- the report: acme's admin reached sundry's rule and the global policy ----------------------


def test_acme_admin_cannot_open_or_change_sundrys_notification_rule(
    acme_admin: Any, sundry_rule: NotificationRule
) -> None:
    client = _client(acme_admin)
    url = _admin_url(NotificationRule, "change", sundry_rule.pk)

    assert client.get(url).status_code == 404
    posted = client.post(url, _rule_form(sundry_rule, webhook_url=OUTSIDE_HOOK))
    assert posted.status_code == 404
    for view in ("delete", "history"):
        assert client.get(_admin_url(NotificationRule, view, sundry_rule.pk)).status_code == 404
    assert (
        client.post(_admin_url(NotificationRule, "delete", sundry_rule.pk), {"post": "yes"}).status_code
        == 404
    )

    sundry_rule.refresh_from_db()
    assert sundry_rule.webhook_url == SUNDRY_HOOK
    # Nor is it in acme's list.
    listing = client.get(_admin_url(NotificationRule, "changelist")).content.decode()
    assert SUNDRY_HOOK not in listing and "Sundry" not in listing


def test_acme_admin_edits_its_own_rule_but_cannot_move_it_or_add_one_to_sundry(
    acme_admin: Any, other_tenant: Tenant, tenant: Tenant
) -> None:
    own = NotificationRule.objects.create(tenant=other_tenant, webhook_url="https://chat.acme.example/h")
    client = _client(acme_admin)
    url = _admin_url(NotificationRule, "change", own.pk)
    assert client.post(url, _rule_form(own, emails="ops@acme.example")).status_code == 302
    own.refresh_from_db()
    assert own.emails == "ops@acme.example"

    # Moving it to sundry, or adding one for sundry, is a form error: sundry is not a choice.
    moved = client.post(url, _rule_form(own, tenant=tenant.pk, webhook_url=OUTSIDE_HOOK))
    assert moved.status_code == 200 and "Select a valid choice" in moved.content.decode()
    added = client.post(
        _admin_url(NotificationRule, "add"), _rule_form(own, tenant=tenant.pk, webhook_url=OUTSIDE_HOOK)
    )
    assert added.status_code == 200 and "Select a valid choice" in added.content.decode()
    own.refresh_from_db()
    assert (own.tenant_id, own.webhook_url) == (other_tenant.pk, "https://chat.acme.example/h")
    assert not NotificationRule.objects.filter(webhook_url=OUTSIDE_HOOK).exists()
    form = client.get(_admin_url(NotificationRule, "add")).content.decode()
    assert "Sundry" not in form  # the tenant field offers acme alone


def _policy_form(policy: TaskPolicy, **changes: Any) -> dict[str, Any]:
    form = {
        "tenant": policy.tenant_id or "",
        "task_type": policy.task_type,
        "strategy": policy.strategy,
        "phase": policy.phase,
        "max_resume_age": "01:00:00",
        "agent_grace": "00:00:00",
        "undo_before_escalating": "on",
        "notes": policy.notes,
    }
    return form | changes


def test_acme_admin_reads_the_global_returns_policy_but_cannot_change_it(
    acme_admin: Any, default_returns_policy: TaskPolicy
) -> None:
    client = _client(acme_admin)
    url = _admin_url(TaskPolicy, "change", default_returns_policy.pk)
    before = (default_returns_policy.strategy, default_returns_policy.version)

    page = client.get(url)
    assert page.status_code == 200  # read only: it governs acme's runs where acme has no policy
    assert 'name="_save"' not in page.content.decode()
    posted = client.post(url, _policy_form(default_returns_policy, strategy=Strategy.RESUME))
    assert posted.status_code == 403
    assert (
        client.post(_admin_url(TaskPolicy, "delete", default_returns_policy.pk), {"post": "yes"}).status_code
        == 403
    )
    # Nor with the change list's bulk "delete selected" action.
    bulk = client.post(
        _admin_url(TaskPolicy, "changelist"),
        {"action": "delete_selected", "_selected_action": [default_returns_policy.pk], "post": "yes"},
    )
    assert bulk.status_code == 403
    # Nor through django-simple-history's "revert to this version", which saves on POST.
    version = default_returns_policy.history.order_by("history_id").first()
    assert version is not None
    revert = reverse(
        "admin:reconciliation_taskpolicy_simple_history", args=[default_returns_policy.pk, version.pk]
    )
    assert client.get(revert).status_code == 200
    reverted = client.post(revert, _policy_form(default_returns_policy, strategy=Strategy.RESUME))
    assert reverted.status_code == 403

    default_returns_policy.refresh_from_db()  # still there, unchanged
    assert (default_returns_policy.strategy, default_returns_policy.version) == before


def test_a_superuser_changes_the_global_policy(
    persona: Any, tenant: Tenant, default_returns_policy: TaskPolicy
) -> None:
    client = _client(persona("admin", tenant))
    url = _admin_url(TaskPolicy, "change", default_returns_policy.pk)
    assert client.post(url, _policy_form(default_returns_policy, strategy=Strategy.RESUME)).status_code == 302
    default_returns_policy.refresh_from_db()
    assert (default_returns_policy.strategy, default_returns_policy.tenant) == (Strategy.RESUME, None)


def test_acme_admin_adds_acmes_own_policy_over_the_default_with_its_history(
    acme_admin: Any, other_tenant: Tenant, tenant: Tenant, default_returns_policy: TaskPolicy, persona: Any
) -> None:
    client = _client(acme_admin)
    form = _policy_form(
        default_returns_policy, tenant=other_tenant.pk, strategy=Strategy.COMPENSATE_AND_ESCALATE
    )
    assert client.post(_admin_url(TaskPolicy, "add"), form).status_code == 302
    own = TaskPolicy.objects.get(tenant=other_tenant, task_type="returns")
    assert own.strategy == Strategy.COMPENSATE_AND_ESCALATE
    # A second one for the same task type is refused by the form, not by a 500.
    again = client.post(_admin_url(TaskPolicy, "add"), form)
    assert again.status_code == 200 and "already exists" in again.content.decode()

    # Edited: a new version, and the history keeps who changed what.
    edit = client.post(_admin_url(TaskPolicy, "change", own.pk), _policy_form(own, strategy=Strategy.RESUME))
    assert edit.status_code == 302
    own.refresh_from_db()
    assert (own.strategy, own.version) == (Strategy.RESUME, 2)
    assert [(h.history_type, h.history_user_id, h.tenant_id) for h in own.history.order_by("history_id")] == [
        ("+", acme_admin.pk, other_tenant.pk),
        ("~", acme_admin.pk, other_tenant.pk),
    ]
    # Sundry's admin does not see acme's policy; sundry keeps the default.
    sundry_admin = _client(persona("tenant_admin", tenant))
    assert sundry_admin.get(_admin_url(TaskPolicy, "change", own.pk)).status_code == 404
    assert policy_for(tenant_id=tenant.pk, task_type="returns") == default_returns_policy
    assert policy_for(tenant_id=other_tenant.pk, task_type="returns") == own


# --- the catalogue ----------------------------------------------------------------------------


def _entry(tool: str, tenant: Tenant | None = None, **fields: Any) -> CatalogueEntry:
    values: dict[str, Any] = {
        "description": f"undo {tool}",
        "reversibility": Reversibility.REVERSIBLE,
        "compensating_tool": "release",
        "argument_mapping": {"reservation_id": "receipt.reservation_id"},
    }
    return CatalogueEntry.objects.create(tenant=tenant, tool=tool, **(values | fields))


def test_the_catalogue_admin_shows_acme_its_own_entries_and_the_defaults_never_sundrys(
    acme_admin: Any, tenant: Tenant, other_tenant: Tenant
) -> None:
    CatalogueEntry.objects.all().delete()
    default = _entry("reserve")
    sundry_own = _entry("reserve", tenant, staff_notes="SUNDRY-ONLY")
    acme_own = _entry("reserve", other_tenant, staff_notes="ACME-ONLY")
    client = _client(acme_admin)

    listing = client.get(_admin_url(CatalogueEntry, "changelist")).content.decode()
    assert _admin_url(CatalogueEntry, "change", default.pk) in listing
    assert _admin_url(CatalogueEntry, "change", acme_own.pk) in listing
    assert _admin_url(CatalogueEntry, "change", sundry_own.pk) not in listing
    assert "Sundry" not in listing  # no filter listing other tenants either

    assert client.get(_admin_url(CatalogueEntry, "change", sundry_own.pk)).status_code == 404
    assert client.get(_admin_url(CatalogueEntry, "history", sundry_own.pk)).status_code in (403, 404)
    changed = {
        "tenant": other_tenant.pk,
        "tool": "reserve",
        "description": "changed",
        "compensating_tool": "release",
        "argument_mapping": "{}",
        "reversibility": Reversibility.NONE,
    }
    assert client.post(_admin_url(CatalogueEntry, "change", default.pk), changed).status_code == 403
    assert client.post(_admin_url(CatalogueEntry, "change", sundry_own.pk), changed).status_code == 404
    assert client.post(_admin_url(CatalogueEntry, "change", acme_own.pk), changed).status_code == 302
    default.refresh_from_db()
    sundry_own.refresh_from_db()
    acme_own.refresh_from_db()
    assert (default.description, default.tenant_id) == ("undo reserve", None)
    assert sundry_own.staff_notes == "SUNDRY-ONLY" and sundry_own.reversibility == Reversibility.REVERSIBLE
    assert (acme_own.description, acme_own.reversibility) == ("changed", Reversibility.NONE)


def test_a_tenants_own_catalogue_entry_governs_its_runs_everywhere_the_engine_looks(
    tenant: Tenant, other_tenant: Tenant, make_run: Any, agent_actor: Any, persona: Any
) -> None:
    """Sundry's own entry says reserve cannot be undone; acme keeps the default, which undoes it."""
    CatalogueEntry.objects.filter(tool="reserve").delete()
    _entry("reserve")
    _entry(
        "reserve",
        tenant,
        reversibility=Reversibility.NONE,
        compensating_tool="",
        argument_mapping={},
        staff_notes="sundry's warehouse releases by phone",
    )

    def performed_reserve(run: Run) -> Any:
        intent = services.intent_record(
            run=run, tool="reserve", args={"sku": "B-1"}, turn=1, actor=agent_actor
        ).intent
        services.outcome_record(intent=intent, ok=True, receipt={"reservation_id": "R-1"}, actor=agent_actor)
        intent.refresh_from_db()
        return intent

    sundry_step = performed_reserve(make_run(ticket_id="T-1"))
    acme_step = performed_reserve(make_run(tenant=other_tenant, ticket_id="T-2"))

    # The selectors.
    assert catalogue_entry_for(tenant_id=tenant.pk, tool="reserve").tenant == tenant  # type: ignore[union-attr]
    assert catalogue_entry_for(tenant_id=other_tenant.pk, tool="reserve").tenant is None  # type: ignore[union-attr]
    assert catalogue_for(tenant_id=other_tenant.pk)["reserve"].tenant is None
    # The compensations executor.
    sundry_undo = compensation_request(original=sundry_step, actor=agent_actor)
    acme_undo = compensation_request(original=acme_step, actor=agent_actor)
    assert (sundry_undo.status, sundry_undo.not_undone) == (
        CompensationStatus.NOT_POSSIBLE,
        "sundry's warehouse releases by phone",
    )
    assert acme_undo.status == CompensationStatus.PENDING
    # The handover (run page) and the console's catalogue page.
    assert handover_rows(sundry_step.run).catalogue["reserve"].tenant == tenant
    assert handover_rows(acme_step.run).catalogue["reserve"].tenant is None
    page = _client(persona("support_staff", tenant)).get(reverse("handover:catalogue")).content.decode()
    assert "sundry&#x27;s warehouse releases by phone" in page and "(Sundry's own)" in page


def test_a_tenants_own_policy_governs_its_dead_runs(
    tenant: Tenant, other_tenant: Tenant, make_run: Any
) -> None:
    """A task type with no default policy: sundry's dead run goes to a person for want of one,
    acme's (with its own policy) is decided by that policy."""
    TaskPolicy.objects.filter(task_type="giftcards").delete()
    TaskPolicy.objects.create(
        tenant=other_tenant, task_type="giftcards", strategy=Strategy.COMPENSATE_AND_ESCALATE
    )
    decided = {}
    for who in (tenant, other_tenant):
        run = make_run(tenant=who, task_type="giftcards", plan=[])
        Run.objects.filter(pk=run.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
        decided[who.slug] = run_decide(run=run, actor=services.Actor.system("test"), quiet_for=timedelta(0))
    assert decided["sundry"].why == why(RunWhy.NO_POLICY, task_type="giftcards")
    assert decided["acme"].why is not None and decided["acme"].why.code != RunWhy.NO_POLICY


# --- dead letters and people ------------------------------------------------------------------


def test_acme_admin_cannot_open_sundrys_dead_letter(acme_admin: Any, make_run: Any, agent_actor: Any) -> None:
    run = make_run()
    intent = services.intent_record(
        run=run, tool="reserve", args={"sku": "B-1"}, turn=1, actor=agent_actor
    ).intent
    services.outcome_record(intent=intent, ok=True, receipt={"reservation_id": "R-1"}, actor=agent_actor)
    compensation = Compensation.objects.create(original=intent, status=CompensationStatus.DEAD_LETTERED)
    letter = DeadLetter.objects.create(
        compensation=compensation, error_class="permanent", error="refused", attempts=5
    )
    client = _client(acme_admin)
    assert client.get(_admin_url(DeadLetter, "changelist")).status_code == 200
    assert (
        _admin_url(DeadLetter, "change", letter.pk)
        not in client.get(_admin_url(DeadLetter, "changelist")).content.decode()
    )
    assert client.get(_admin_url(DeadLetter, "change", letter.pk)).status_code == 404


@pytest.fixture
def acme_people_admin(acme_admin: Any) -> Any:
    """Acme's admin, granted the user permissions by an operator (the role does not hold them)."""
    acme_admin.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="auth", codename__in=["view_user", "change_user", "add_user"]
        )
    )
    return type(acme_admin).objects.get(pk=acme_admin.pk)


def test_acme_admin_with_user_permissions_manages_acmes_people_only(
    acme_people_admin: Any, persona: Any, tenant: Tenant, other_tenant: Tenant
) -> None:
    sundry_lead = persona("team_lead", tenant)
    acme_support = persona("support_staff", other_tenant)
    acme_root = persona("admin", other_tenant, username="root-of-acme")  # a superuser of acme
    client = _client(acme_people_admin)

    listing = client.get(reverse("admin:auth_user_changelist")).content.decode()
    assert acme_support.username in listing
    assert sundry_lead.username not in listing and acme_root.username not in listing
    for user in (sundry_lead, acme_root):
        assert client.get(reverse("admin:auth_user_change", args=[user.pk])).status_code == 404
        password = reverse("admin:auth_user_password_change", args=[user.pk])
        assert (
            client.post(password, {"password1": "x-Very-long-1", "password2": "x-Very-long-1"}).status_code
            == 404
        )

    # Their own person: no superuser flag, no permissions one by one, only the staff roles.
    form = client.get(reverse("admin:auth_user_change", args=[acme_support.pk])).content.decode()
    assert 'name="is_superuser"' not in form and 'name="user_permissions"' not in form
    changed = client.post(
        reverse("admin:auth_user_change", args=[acme_support.pk]),
        {
            "username": acme_support.username,
            "is_active": "on",
            "is_superuser": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )
    assert changed.status_code == 302, changed.content.decode()[:2000]
    acme_support.refresh_from_db()
    assert not acme_support.is_superuser

    # A person they add joins acme.
    added = client.post(
        reverse("admin:auth_user_add"),
        {
            "username": "new-acme-agent",
            "password1": "x-Very-long-1",
            "password2": "x-Very-long-1",
            "usable_password": "true",
        },
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    assert Membership.objects.get(user__username="new-acme-agent").tenant == other_tenant


def test_a_staff_user_of_no_tenant_sees_no_rows(
    sundry_rule: NotificationRule, persona: Any, tenant: Tenant
) -> None:
    admin = persona("tenant_admin", tenant, username="adrift")
    Membership.objects.filter(user=admin).delete()
    client = _client(admin)
    assert SUNDRY_HOOK not in client.get(_admin_url(NotificationRule, "changelist")).content.decode()
    assert client.get(_admin_url(NotificationRule, "change", sundry_rule.pk)).status_code == 404
