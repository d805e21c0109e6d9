"""The flows and tickets the kill harness can run, declared the way tools are: each installed
app's seam.py may define `flows() -> list[Flow]` and, if it scripts tickets for the harness,
`tickets() -> list[Ticket]` (tools.discovery). The demo is one such app (scenarios/seam.py); an
integrator installs theirs, and nothing mutates another app's dict.

The engine reads the registered flows through settings too (SEAM_FLOWS names `all_flows` for the
catalogue's ordering check, SEAM_RUNNING_VERSIONS names `running_versions` for a dead run's
version check), so no product app imports this layer."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from tools import discovery

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
    for module_name, flow in discovery.declared("flows", Flow):
        if flow.task_type in flows:
            raise ValueError(f"flow {flow.task_type} is declared twice ({module_name})")
        flows[flow.task_type] = flow
    for module_name, ticket in discovery.declared("tickets", Ticket):
        if ticket.ticket_id in tickets:
            raise ValueError(f"ticket {ticket.ticket_id} is declared twice ({module_name})")
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
        raise UnknownFlow(f"no flow for task type {task_type!r} is declared by an installed app")
    return flow


def all_tickets() -> dict[str, Ticket]:
    """Every registered scripted ticket by id (a copy)."""
    return dict(_registry().tickets)


def get_ticket(ticket_id: str) -> Ticket:
    ticket = _registry().tickets.get(ticket_id)
    if ticket is None:
        raise UnknownTicket(f"no ticket {ticket_id!r} is declared by an installed app")
    return ticket


def running_versions() -> dict[str, dict[str, str]]:
    """The versions this deployment's code runs each task type under: each registered flow's
    `run_versions()` (its `version` and `versions`). settings.SEAM_RUNNING_VERSIONS names this."""
    return {task_type: flow.run_versions() for task_type, flow in _registry().flows.items()}


def reset_registry() -> None:
    """Forget loaded flows and tickets (INSTALLED_APPS changed)."""
    _registry.cache_clear()
