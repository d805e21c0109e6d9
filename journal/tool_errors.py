"""The contract between the journal and the tools above it, importable without Django so that
connectors and in-process callers share it: how a dispatch reports success
(DispatchResult) and failure (ToolError and its class), and how the layer that knows a tool's
argument schema refuses bad arguments before any intent is recorded (arguments_check_register).
The journal names no tool: it asks whoever registered a check."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# The six error classes of a failed call; each decides a different response.
ERROR_CLASSES = ("invalid_input", "conflict", "transient", "ambiguous", "permanent", "bug")


class ToolError(Exception):
    """What a dispatch raises when the downstream refused or failed, classified at the boundary
    that knows. `ambiguous` means the request may have been accepted: the intent stays open and
    is settled later by asking the downstream about its key."""

    def __init__(self, error_class: str, message: str, *, request_id: str = "") -> None:
        if error_class not in ERROR_CLASSES:
            raise ValueError(f"unknown error class {error_class!r}; expected one of {ERROR_CLASSES}")
        super().__init__(message)
        self.error_class = error_class
        self.message = message
        self.request_id = request_id


@dataclass(frozen=True)
class DispatchResult:
    """What a dispatch returns on success: a short summary and the downstream's receipt (its own
    identifiers: label, reservation id, refund id...). `evidence_at` is when the downstream says
    the state it answered with came about, when it says so: a provider without idempotency keys
    may answer a send with success for a state that was already so (a subscription the customer
    had cancelled before the run). Evidence older than the intent is never the call's work
    (predates_intent): the engine settles such a send `already_so`."""

    summary: str = ""
    receipt: dict[str, Any] = field(default_factory=dict)
    request_id: str = ""
    evidence_at: datetime | None = None


def predates_intent(evidence_at: datetime | None, intended_at: datetime) -> bool:
    """The causation rule, the one place it is stated: evidence older than the intent was not
    caused by the intent's call, whatever the downstream calls it. Evidence without a time proves
    nothing either way (a key-based answer needs none: the key ties the effect to the call).
    Applied to lookups (tools.connectors.caused_by_intent) and to sends (journal.services)."""
    return evidence_at is not None and evidence_at < intended_at


class ArgumentsRefused(ValueError):
    """The arguments do not satisfy the tool's schema. `field` is the JSON path of the first
    offending value (e.g. `args.amount`)."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


# A check is given a tool's name and arguments and raises ArgumentsRefused for bad ones; a tool
# it does not know passes (journaling an unregistered tool is allowed).
ArgumentsCheck = Callable[[str, Mapping[str, Any]], None]
_arguments_checks: dict[str, ArgumentsCheck] = {}


def arguments_check_register(name: str, check: ArgumentsCheck) -> None:
    """Have the journal run `check` on every intent's arguments before recording it. Registering
    the same name again replaces the earlier check (an app's ready() may run more than once)."""
    _arguments_checks[name] = check


def arguments_check(tool: str, args: Mapping[str, Any]) -> None:
    for check in _arguments_checks.values():
        check(tool, args)
