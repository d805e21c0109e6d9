"""scenarios.registry: flows and tickets are declared by the installed apps' seam.py modules,
each defining `flows()` and/or `tickets()` (tools.discovery); the demo's scenarios app is one of
them, and the engine reads the same declarations through SEAM_FLOWS and SEAM_RUNNING_VERSIONS."""

from __future__ import annotations

import sys
import types

import pytest
from django.core.checks import run_checks

from reconciliation.decisions import running_versions as engine_running_versions
from scenarios import flows as demo_flows
from scenarios import tickets as demo_tickets
from scenarios.flows import Flow, Step
from scenarios.registry import UnknownFlow, UnknownTicket, all_flows, all_tickets, get_flow, get_ticket
from scenarios.tickets import Ticket
from tests.support.plugins import declaring

# An integrator's declarations, as their app's seam.py would hold them.
GIFT_CARD = Flow(
    task_type="gift_card",
    version="4",
    versions={"policy": "2027-01"},
    steps=(Step("issue_gift_card", "act", {"customer": "$customer", "amount": "$amount"}),),
)


def flows() -> list[Flow]:
    return [GIFT_CARD]


def tickets() -> list[Ticket]:
    return [Ticket("G-1", "gift_card", {"customer": "C-7", "amount": "20.00"})]


def _module(monkeypatch: pytest.MonkeyPatch, name: str, **functions: object) -> str:
    module = types.ModuleType(name)
    for attribute, value in functions.items():
        setattr(module, attribute, value)
    monkeypatch.setitem(sys.modules, name, module)
    return name


def test_the_demo_is_registered_like_any_integrator() -> None:
    assert all_flows() == dict(demo_flows.FLOWS)
    assert all_tickets() == dict(demo_tickets.TICKETS)
    assert get_ticket("T-40912").task_type == "returns"


def test_the_demos_declarations_cannot_be_mutated() -> None:
    with pytest.raises(TypeError):
        demo_flows.FLOWS["gift_card"] = GIFT_CARD  # type: ignore[index]
    with pytest.raises(TypeError):
        demo_tickets.TICKETS["G-1"] = tickets()[0]  # type: ignore[index]


def test_an_installed_apps_seam_module_adds_its_flows_and_tickets_and_their_running_versions() -> None:
    with declaring(__name__):
        assert get_flow("gift_card") is GIFT_CARD
        assert get_ticket("G-1").facts["customer"] == "C-7"
        assert "returns" in all_flows()
        # The engine reads the registered flows' versions through SEAM_RUNNING_VERSIONS.
        versions = engine_running_versions("gift_card")
        assert versions is not None
        assert (versions["flow"], versions["policy"]) == ("gift_card-4", "2027-01")
    with pytest.raises(UnknownFlow):
        get_flow("gift_card")
    with pytest.raises(UnknownTicket):
        get_ticket("G-1")


def test_a_flow_declared_twice_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    twice = _module(monkeypatch, "integrator_twice", flows=lambda: [GIFT_CARD, GIFT_CARD])
    with (
        declaring(twice),
        pytest.raises(ValueError, match="declared twice"),
    ):
        all_flows()


def test_a_declaration_of_another_type_is_refused_naming_its_module(monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = _module(monkeypatch, "integrator_wrong", flows=lambda: [{"task_type": "gift_card"}])
    with (
        declaring(wrong),
        pytest.raises(TypeError, match=r"integrator_wrong.flows\(\) returned a dict, not a Flow"),
    ):
        all_flows()


def test_a_ticket_whose_flow_is_not_registered_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    orphan = _module(monkeypatch, "integrator_orphan", tickets=lambda: [Ticket("X-1", "no_such_flow", {})])
    with (
        declaring(orphan),
        pytest.raises(ValueError, match="no flow declares"),
    ):
        all_tickets()


@pytest.mark.django_db
def test_the_catalogue_ordering_check_reads_the_registered_flows() -> None:
    # SEAM_FLOWS names scenarios.registry.all_flows, a function: the check calls it.
    assert not [e for e in run_checks(databases=["default"]) if e.id == "compensations.E003"]
