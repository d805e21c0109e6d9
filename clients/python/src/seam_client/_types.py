"""The typed results: what Seam answered, as values."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

OPEN = "intended"
# The receipt key under which an outcome records the framework's own id of the tool call
# (LangGraph's tool_call["id"], the OpenAI Agents SDK's ctx.tool_call_id): kept in the journal,
# given back as Intent.call_id, never in the receipt an agent is handed.
CALL_ID_KEY = "_call_id"


def _when(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Outcome:
    """What a tool call returns on success: a short summary and the downstream's receipt (its own
    identifiers: a label, a refund id), recorded as the intent's outcome.

    `evidence_at` (time-zone aware) is when the downstream says the state it answered with came
    to be, for a downstream that answers "done" for a state that was already so (a subscription
    the customer had cancelled before the run): Seam records evidence older than the intent as
    `already_so`, never undone and never sent again. None: the call's own doing."""

    summary: str = ""
    receipt: dict[str, Any] = field(default_factory=dict)
    request_id: str = ""
    evidence_at: datetime | None = None


@dataclass(frozen=True)
class Intent:
    """An intent row. `status` is `intended` until an outcome settles it (`performed`, `failed`,
    or, by reconciliation, `not_performed`, `unknown`, `already_so`). `replayed` is true when the
    request found the row rather than wrote it: a recorded intent found again, or a settled one
    whose outcome `perform` returned without calling the tool. `call_id` is the framework's id of
    the tool call recorded with the outcome (`perform(..., call_id=...)`), kept out of `receipt`."""

    step_id: str
    idempotency_key: str
    status: str
    replayed: bool
    tool: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    turn: int = 0
    occurrence: int = 0
    error_class: str = ""
    summary: str = ""
    receipt: dict[str, Any] = field(default_factory=dict)
    request_id: str = ""
    intended_at: datetime | None = None
    settled_at: datetime | None = None
    call_id: str = ""

    @property
    def settled(self) -> bool:
        return self.status != OPEN

    @classmethod
    def from_json(cls, body: Mapping[str, Any], *, replayed: bool) -> Intent:
        receipt = dict(body.get("receipt") or {})
        call_id = receipt.pop(CALL_ID_KEY, "")
        return cls(
            step_id=str(body["step_id"]),
            idempotency_key=str(body["idempotency_key"]),
            status=str(body["status"]),
            replayed=replayed,
            tool=str(body.get("tool", "")),
            args=dict(body.get("args") or {}),
            turn=int(body.get("turn", 0)),
            occurrence=int(body.get("occurrence", 0)),
            error_class=str(body.get("error_class") or ""),
            summary=str(body.get("outcome_summary") or ""),
            receipt=receipt,
            request_id=str(body.get("request_id") or ""),
            intended_at=_when(body.get("intended_at")),
            settled_at=_when(body.get("settled_at")),
            call_id=str(call_id or ""),
        )


@dataclass(frozen=True)
class Handover:
    """GET /runs/{id}/handover/: what a person needs to finish the run. Each list holds the JSON
    objects the API documents (docs/api.md, the `Handover` schema at /api/schema/); `raw` is the
    whole answer."""

    run_id: str
    status: str
    reason: str
    completed: list[dict[str, Any]]
    not_done: list[dict[str, Any]]
    uncertain: list[dict[str, Any]]
    already_so: list[dict[str, Any]]
    customer_told: list[dict[str, Any]]
    next_action: dict[str, Any]
    raw: dict[str, Any]

    @property
    def next_action_code(self) -> str:
        """`settle_uncertain`, `resume`, `nothing_waiting`, …: what should happen next."""
        return str(self.next_action.get("code", ""))

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> Handover:
        def items(name: str) -> list[dict[str, Any]]:
            return [dict(item) for item in body.get(name) or []]

        return cls(
            run_id=str(body["run_id"]),
            status=str(body.get("status", "")),
            reason=str(body.get("reason") or ""),
            completed=items("completed"),
            not_done=items("not_done"),
            uncertain=items("uncertain"),
            already_so=items("already_so"),
            customer_told=items("customer_told"),
            next_action=dict(body.get("next_action") or {}),
            raw=dict(body),
        )


# A tool call as `perform` makes it: given the intent's arguments and its idempotency key (send
# it to the downstream system), it returns the Outcome (None for an empty one) or raises ToolError.
Call = Callable[[dict[str, Any], str], "Outcome | None"]
AsyncCall = Callable[[dict[str, Any], str], "Awaitable[Outcome | None] | Outcome | None"]
