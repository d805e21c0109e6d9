"""compensations/checks.py: the catalogue against the registered tools and the flows."""

from __future__ import annotations

import pytest
from django.core.checks import CheckMessage
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from compensations.checks import check_catalogue
from compensations.models import CatalogueEntry
from scenarios.flows import Flow, Step

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("catalogue")]


def _notify(tool: str) -> Step:
    return Step(tool, "notify", {"order_id": "$order_id", "template": "t"})


_REFUND = Step("issue_refund", "act", {"order_id": "$order_id", "amount": "$amount", "currency": "$currency"})

# Test flows, found through settings.SEAM_FLOWS.
EMAIL_BEFORE_REFUND = {
    "hasty_apology": Flow(task_type="hasty_apology", version="1", steps=(_notify("notify_customer"), _REFUND))
}
EMAIL_BEFORE_REFUND_BLANK_REASON = {
    "hasty_apology": Flow(
        task_type="hasty_apology",
        version="1",
        steps=(_notify("notify_customer"), _REFUND),
        irreversible_first="   ",
    )
}
EMAIL_BEFORE_REFUND_WITH_REASON = {
    "hasty_apology": Flow(
        task_type="hasty_apology",
        version="1",
        steps=(_notify("notify_customer"), _REFUND),
        irreversible_first="The buyer must hear before the bank shows the money; a person handles a failed refund.",
    )
}


def _errors() -> list[CheckMessage]:
    return check_catalogue(databases=["default"])


def test_the_default_catalogue_passes_every_check() -> None:
    assert _errors() == []
    call_command("check", databases=["default"])  # raises SystemCheckError on any error


def test_a_plain_manage_py_check_fails_on_a_missing_entry() -> None:
    CatalogueEntry.objects.filter(tool="reship").delete()
    with pytest.raises(SystemCheckError, match=r"compensations\.E001"):
        call_command("check")


def test_the_checks_stay_quiet_for_another_database() -> None:
    CatalogueEntry.objects.filter(tool="reship").delete()
    assert check_catalogue(databases=["other"]) == []


def test_a_write_tool_without_an_entry_is_reported() -> None:
    CatalogueEntry.objects.filter(tool="reship").delete()

    errors = _errors()

    assert [(e.id, e.obj) for e in errors] == [("compensations.E001", "reship")]
    assert "reship" in errors[0].msg


def test_a_mapping_needing_a_receipt_field_that_is_never_stored_is_reported() -> None:
    # The design doc's mistake: the release needed a reservation id the state row never stored.
    CatalogueEntry.objects.filter(tool="offer_replacement").update(
        argument_mapping={"reservation_id": "receipt.reservation_ref"}
    )

    errors = _errors()

    assert [(e.id, e.obj) for e in errors] == [("compensations.E002", "offer_replacement")]
    assert "receipt.reservation_ref" in errors[0].msg
    assert "reservation_id, warehouse" in errors[0].msg


def test_a_mapping_from_an_argument_the_tool_does_not_take_is_reported() -> None:
    CatalogueEntry.objects.filter(tool="adjust_stock").update(
        argument_mapping={"sku": "args.sku", "qty": "negate:args.quantity", "reference": "args.reference"}
    )

    errors = _errors()

    assert [(e.id, e.obj) for e in errors] == [("compensations.E002", "adjust_stock")]
    assert "args.quantity" in errors[0].msg


@pytest.mark.parametrize("undo", ["refund_reverser", "order_status"])
def test_a_compensating_tool_that_is_not_a_registered_write_tool_is_reported(undo: str) -> None:
    CatalogueEntry.objects.filter(tool="issue_refund").update(compensating_tool=undo)

    errors = _errors()

    assert {(e.id, e.obj) for e in errors} == {("compensations.E002", "issue_refund")}
    assert any(undo in e.msg and "not a registered write tool" in e.msg for e in errors)


def test_a_deadline_field_the_receipt_does_not_carry_is_reported() -> None:
    CatalogueEntry.objects.filter(tool="reship").update(deadline_field="cutoff")

    errors = _errors()

    assert [(e.id, e.obj) for e in errors] == [("compensations.E002", "reship")]
    assert "cutoff" in errors[0].msg


@override_settings(SEAM_FLOWS="tests.compensations.test_checks.EMAIL_BEFORE_REFUND")
def test_a_flow_emailing_before_a_reversible_refund_is_reported() -> None:
    errors = _errors()

    assert [(e.id, e.obj) for e in errors] == [("compensations.E003", "hasty_apology")]
    assert "notify_customer" in errors[0].msg
    assert "issue_refund" in errors[0].msg


@override_settings(SEAM_FLOWS="tests.compensations.test_checks.EMAIL_BEFORE_REFUND_BLANK_REASON")
def test_a_blank_reason_is_not_an_exception() -> None:
    assert [e.id for e in _errors()] == ["compensations.E003"]


@override_settings(SEAM_FLOWS="tests.compensations.test_checks.EMAIL_BEFORE_REFUND_WITH_REASON")
def test_a_documented_reason_lets_an_irreversible_write_go_first() -> None:
    assert _errors() == []


def test_an_entry_marked_irreversible_changes_what_the_flows_may_do() -> None:
    # Nothing reversible follows the credit in damage_dispute, but in shortage the reship does.
    CatalogueEntry.objects.filter(tool="issue_credit").update(
        reversibility="none", compensating_tool="", argument_mapping={}
    )

    errors = _errors()

    assert {(e.id, e.obj) for e in errors} == {("compensations.E003", "shortage")}


@override_settings(SEAM_FLOWS="")
def test_with_no_flows_declared_there_is_no_order_to_check() -> None:
    # Production's default: the product declares no flows, so E003 has nothing to read, while the
    # catalogue's own checks (E001, E002) still hold against the registered tools.
    CatalogueEntry.objects.filter(tool="issue_credit").update(
        reversibility="none", compensating_tool="", argument_mapping={}
    )
    assert _errors() == []
    CatalogueEntry.objects.filter(tool="reship").update(deadline_field="cutoff")
    assert [(e.id, e.obj) for e in _errors()] == [("compensations.E002", "reship")]
