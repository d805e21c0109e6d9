"""Catalogue entries and task policies declared in code as typed specs (CatalogueEntrySpec,
TaskPolicySpec) by the installed apps' seam.py modules (`catalogue()`, `policies()`), written by
`manage.py seam_seed` where missing; the demo declares its own the same way. This module declares
an integrator's (tests.support.plugins)."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from compensations.defaults import CatalogueEntrySpec, catalogue_declared
from compensations.models import CatalogueEntry
from reconciliation.defaults import TaskPolicySpec, policies_declared
from reconciliation.models import TaskPolicy
from tests.support.plugins import declaring

pytestmark = pytest.mark.django_db


def catalogue() -> list[CatalogueEntrySpec]:
    return [
        CatalogueEntrySpec(
            tool="issue_gift_card",
            description="Void the gift card.",
            compensating_tool="void_gift_card",
            argument_mapping={"card_id": "receipt.card_id"},
            reversibility="reversible",
        )
    ]


def policies() -> list[TaskPolicySpec]:
    return [TaskPolicySpec("goodwill", "resume", max_resume_age=timedelta(hours=2), notes="A promise kept.")]


@declaring(__name__, only=True)
def test_seam_seed_writes_what_is_declared_and_keeps_what_an_admin_edited() -> None:
    out = io.StringIO()
    call_command("seam_seed", stdout=out)
    assert "catalogue: 1 of 1" in out.getvalue() and "policies: 1 of 1" in out.getvalue()
    entry = CatalogueEntry.objects.get(tool="issue_gift_card")
    assert (entry.compensating_tool, entry.argument_mapping) == (
        "void_gift_card",
        {"card_id": "receipt.card_id"},
    )
    policy = TaskPolicy.objects.get(task_type="goodwill")
    assert (policy.strategy, policy.max_resume_age) == ("resume", timedelta(hours=2))

    CatalogueEntry.objects.filter(tool="issue_gift_card").update(description="Edited by an admin.")
    out = io.StringIO()
    call_command("seam_seed", stdout=out)
    assert "catalogue: 0 of 1" in out.getvalue()
    assert CatalogueEntry.objects.get(tool="issue_gift_card").description == "Edited by an admin."


def test_a_spec_with_an_unknown_reversibility_or_strategy_is_refused_when_declared() -> None:
    with pytest.raises(ValueError, match="reversibility"):
        CatalogueEntrySpec(tool="x", description="x", reversibility="mostly")
    with pytest.raises(ValueError, match="strategy"):
        TaskPolicySpec(task_type="x", strategy="hope")


def test_the_demo_declares_its_catalogue_and_policies_in_its_apps_seam_modules() -> None:
    assert {e.tool for e in catalogue_declared()} >= {"issue_refund", "adjust_stock"}
    assert {p.task_type for p in policies_declared()} >= {"returns", "stock_correction"}


@declaring(__name__, __name__, only=True)
def test_an_entry_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        catalogue_declared()


@declaring(__name__, only=True)
def test_seam_seed_reports_each_stored_default_that_differs_from_its_declaration() -> None:
    """An admin's edit (or a changed declaration) is kept and reported, field by field, with how
    to apply the declaration; nothing differs, nothing is reported."""
    call_command("seam_seed", stdout=io.StringIO())
    quiet = io.StringIO()
    call_command("seam_seed", stdout=quiet)
    assert "differs" not in quiet.getvalue()

    CatalogueEntry.objects.filter(tool="issue_gift_card").update(
        description="Edited by an admin.", argument_mapping={"card_id": "args.card_id"}
    )
    TaskPolicy.objects.filter(task_type="goodwill").update(max_resume_age=timedelta(hours=5))
    out = io.StringIO()
    call_command("seam_seed", stdout=out)

    said = out.getvalue()
    entry = CatalogueEntry.objects.get(tool="issue_gift_card")
    assert (
        "kept: catalogue entry issue_gift_card differs from its declaration (description: declared "
        "'Void the gift card.', stored 'Edited by an admin.'; argument_mapping: declared "
        "{'card_id': 'receipt.card_id'}, stored {'card_id': 'args.card_id'})"
    ) in said
    assert "manage.py seam_seed --update issue_gift_card" in said
    assert f"/admin/compensations/catalogueentry/{entry.pk}/change/" in said
    assert "task policy goodwill differs from its declaration (max_resume_age: declared " in said
    assert "manage.py seam_seed --update goodwill" in said
    # Nothing was overwritten.
    assert entry.description == "Edited by an admin."
    assert TaskPolicy.objects.get(task_type="goodwill").max_resume_age == timedelta(hours=5)


@declaring(__name__, only=True)
def test_seam_seed_update_applies_the_named_declaration_and_records_it_in_the_history() -> None:
    call_command("seam_seed", stdout=io.StringIO())
    CatalogueEntry.objects.filter(tool="issue_gift_card").update(description="Edited by an admin.")
    TaskPolicy.objects.filter(task_type="goodwill").update(max_resume_age=timedelta(hours=5))

    out = io.StringIO()
    call_command("seam_seed", "--update", "issue_gift_card", stdout=out)

    entry = CatalogueEntry.objects.get(tool="issue_gift_card")
    assert entry.description == "Void the gift card."
    assert (
        entry.history.latest().history_change_reason == "seam_seed --update: the declaration in code applied"
    )
    assert "updated: catalogue entry issue_gift_card differs" in out.getvalue()
    # The policy was not named: kept, and still reported.
    policy = TaskPolicy.objects.get(task_type="goodwill")
    assert policy.max_resume_age == timedelta(hours=5)
    assert "kept: task policy goodwill" in out.getvalue()

    call_command("seam_seed", "--update-all", stdout=io.StringIO())
    policy = TaskPolicy.objects.get(task_type="goodwill")
    assert (policy.max_resume_age, policy.version) == (timedelta(hours=2), 2)
    quiet = io.StringIO()
    call_command("seam_seed", stdout=quiet)
    assert "differs" not in quiet.getvalue()


@declaring(__name__, only=True)
def test_seam_seed_update_of_a_name_nothing_declares_is_refused() -> None:
    with pytest.raises(CommandError, match="issue_giftcard"):
        call_command("seam_seed", "--update", "issue_giftcard", stdout=io.StringIO())
