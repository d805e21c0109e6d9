"""The flows and tickets the kill harness can run, registered the way tools are: each module
listed in settings.SEAM_FLOW_MODULES exposes `flows() -> list[Flow]` and, if it scripts tickets
for the harness, `tickets() -> list[Ticket]`. The demo is one such module pair
(scenarios.flows, scenarios.tickets); an integrator adds theirs to the setting, and nothing
mutates another module's dict.

The engine reads the registered flows through settings too (SEAM_FLOWS names `all_flows` for the
catalogue's ordering check, SEAM_RUNNING_VERSIONS names `running_versions` for a dead run's
version check), so no product app imports this layer."""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

from django.conf import settings

from .flows import Flow
from .tickets import Ticket


class UnknownFlow(LookupError):
    pass


class UnknownTicket(LookupError):
    pass


@dataclass(frozen=True)
class _Registered:
    flows: dict[str, Flow]
    tickets: dict[str, Ticket]


@functools.cache
def _registry() -> _Registered:
    flows: dict[str, Flow] = {}
    tickets: dict[str, Ticket] = {}
    for module_path in settings.SEAM_FLOW_MODULES:
        module = importlib.import_module(module_path)
        if not hasattr(module, "flows") and not hasattr(module, "tickets"):
            raise ValueError(f"{module_path} (SEAM_FLOW_MODULES) exposes neither flows() nor tickets()")
        for flow in getattr(module, "flows", list)():
            if not isinstance(flow, Flow):
                raise TypeError(f"{module_path}.flows() returned a {type(flow).__name__}, not a Flow")
            if flow.task_type in flows:
                raise ValueError(f"flow {flow.task_type} is declared twice ({module_path})")
            flows[flow.task_type] = flow
        for ticket in getattr(module, "tickets", list)():
            if not isinstance(ticket, Ticket):
                raise TypeError(f"{module_path}.tickets() returned a {type(ticket).__name__}, not a Ticket")
            if ticket.ticket_id in tickets:
                raise ValueError(f"ticket {ticket.ticket_id} is declared twice ({module_path})")
            tickets[ticket.ticket_id] = ticket
    for ticket in tickets.values():
        if ticket.task_type not in flows:
            raise ValueError(
                f"ticket {ticket.ticket_id} names task type {ticket.task_type}, which no flow declares"
            )
    return _Registered(flows=flows, tickets=tickets)


def all_flows() -> dict[str, Flow]:
    """Every registered flow by task type (a copy: changing it changes nothing)."""
    return dict(_registry().flows)


def get_flow(task_type: str) -> Flow:
    flow = _registry().flows.get(task_type)
    if flow is None:
        raise UnknownFlow(f"no flow for task type {task_type!r} is registered (SEAM_FLOW_MODULES)")
    return flow


def all_tickets() -> dict[str, Ticket]:
    """Every registered scripted ticket by id (a copy)."""
    return dict(_registry().tickets)


def get_ticket(ticket_id: str) -> Ticket:
    ticket = _registry().tickets.get(ticket_id)
    if ticket is None:
        raise UnknownTicket(f"no ticket {ticket_id!r} is registered (SEAM_FLOW_MODULES)")
    return ticket


def running_versions() -> dict[str, dict[str, str]]:
    """The versions this deployment's code runs each task type under: each registered flow's
    `run_versions()` (its `version` and `versions`). settings.SEAM_RUNNING_VERSIONS names this."""
    return {task_type: flow.run_versions() for task_type, flow in _registry().flows.items()}


def reset_registry() -> None:
    """Forget loaded flows and tickets (tests that change SEAM_FLOW_MODULES)."""
    _registry.cache_clear()
