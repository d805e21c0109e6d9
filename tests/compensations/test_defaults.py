"""The demo's catalogue (sandbox/catalogue.py, seeded through compensations.defaults.catalogue_seed):
every sandbox write tool has an entry; seeding never overwrites an edit; `migrate` seeds it where
the sandbox is installed, `flush` does not."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from compensations.models import CatalogueEntry, Reversibility
from sandbox.catalogue import catalogue_seed_after_migrate, catalogue_seed_defaults
from sandbox.seam import DEFAULT_CATALOGUE
from tools.registry import all_tools

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("catalogue")]


def test_every_sandbox_write_tool_has_a_default_entry() -> None:
    writes = {name for name, spec in all_tools().items() if spec.kind == "write"}
    assert {e["tool"] for e in DEFAULT_CATALOGUE} == writes
    assert set(CatalogueEntry.objects.values_list("tool", flat=True)) == writes


def test_what_cannot_be_undone_says_so_and_names_no_undo() -> None:
    irreversible = CatalogueEntry.objects.filter(reversibility=Reversibility.NONE)
    assert set(irreversible.values_list("tool", flat=True)) == {
        "notify_seller",
        "notify_customer",
        "cancel_pickup",
        "release_reservation",
        "reverse_refund",
        "reverse_credit",
        "cancel_shipment",
    }
    for entry in irreversible:
        assert entry.compensating_tool == ""
        assert entry.staff_notes


def test_seeding_again_keeps_an_admins_edit() -> None:
    CatalogueEntry.objects.filter(tool="reship").update(loss="recall fee and a day")
    CatalogueEntry.objects.filter(tool="notify_seller").delete()

    catalogue_seed_defaults()

    assert CatalogueEntry.objects.get(tool="reship").loss == "recall fee and a day"
    assert CatalogueEntry.objects.filter(tool="notify_seller").exists()


def test_migrate_seeds_the_demo_catalogue_and_flush_does_not() -> None:
    CatalogueEntry.objects.all().delete()
    apps = MigrationExecutor(connection).loader.project_state().apps  # what `migrate` sends

    # flush sends post_migrate without a plan: the tables stay as the test emptied them.
    catalogue_seed_after_migrate(using="default", plan=None, apps=apps)
    assert not CatalogueEntry.objects.exists()

    catalogue_seed_after_migrate(using="default", plan=[], apps=apps)  # `migrate`, nothing to apply
    assert CatalogueEntry.objects.count() == len(DEFAULT_CATALOGUE)
    assert CatalogueEntry.history.filter(history_change_reason="default catalogue").count() == len(
        DEFAULT_CATALOGUE
    )
