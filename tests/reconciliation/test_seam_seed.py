"""Catalogue entries and task policies declared in code as typed specs (CatalogueEntrySpec,
TaskPolicySpec) by the modules of SEAM_CATALOGUE_MODULES / SEAM_POLICY_MODULES, written by
`manage.py seam_seed` where missing; the demo declares its own the same way."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import override_settings

from compensations.defaults import CatalogueEntrySpec, catalogue_declared
from compensations.models import CatalogueEntry
from reconciliation.defaults import TaskPolicySpec, policies_declared
from reconciliation.models import TaskPolicy

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


@override_settings(SEAM_CATALOGUE_MODULES=[__name__], SEAM_POLICY_MODULES=[__name__])
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


def test_the_demo_declares_its_catalogue_and_policies_through_the_same_modules() -> None:
    assert {e.tool for e in catalogue_declared()} >= {"issue_refund", "adjust_stock"}
    assert {p.task_type for p in policies_declared()} >= {"returns", "stock_correction"}


@override_settings(SEAM_CATALOGUE_MODULES=[__name__, __name__])
def test_an_entry_declared_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        catalogue_declared()
