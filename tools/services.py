"""Calling registered tools through the journal, and asking their downstream about a key."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any

from journal import services as journal
from journal.models import Intent, Run
from journal.tool_errors import ToolError

from .connectors import HttpConnector, LookupQuery, LookupResult, Performed
from .registry import ArgumentsRefused, UnknownTool, find_tool, get_tool

MIN_READ_TIMEOUT = 0.05  # seconds: below this a read cannot even connect


def tool_perform(
    *,
    run: Run,
    tool: str,
    args: dict[str, Any],
    turn: int,
    occurrence: int = 0,
    actor: journal.Actor,
    compensation: bool = False,
) -> journal.Performed:
    """Perform a registered write tool: arguments checked against its schema, intent committed,
    the connector called with the intent's key, outcome committed (journal.services.perform)."""
    try:
        spec = get_tool(tool)
    except UnknownTool as exc:
        raise journal.InvalidInput(str(exc), field="tool") from exc
    if spec.kind != "write":
        raise journal.InvalidInput(f"{tool} is a read; use tool_read", field="tool")
    connector = spec.get_connector()
    return journal.perform(
        run=run,
        tool=tool,
        args=args,
        dispatch=connector.perform,
        turn=turn,
        occurrence=occurrence,
        actor=actor,
        compensation=compensation,
    )


def tool_resend(
    *, intent: Intent, actor: journal.Actor, send: Callable[[Callable[[], Any]], Any] | None = None
) -> Intent:
    """Send, with its own key, a call reconciliation proved never happened (`not_performed`):
    re-admitted, sent, settled. `send` wraps the call (e.g. with transient retries). A ToolError
    settles the row as failed with its class (ambiguous leaves it open) and is re-raised."""
    reopened = journal.intent_readmit(intent=intent, actor=actor)
    connector = get_tool(reopened.tool).get_connector()
    call = functools.partial(connector.perform, reopened.args, reopened.idempotency_key)
    try:
        result = send(call) if send is not None else call()
    except ToolError as exc:
        if exc.error_class != "ambiguous":
            journal.outcome_record(
                intent=reopened, ok=False, summary=exc.message, error_class=exc.error_class, actor=actor
            )
        raise
    return journal.outcome_record(
        intent=reopened,
        ok=True,
        summary=result.summary,
        receipt=result.receipt,
        request_id=result.request_id,
        # A success for a state older than the re-admitted intent is already_so.
        evidence_at=result.evidence_at,
        actor=actor,
    ).intent


def tool_read(*, tool: str, args: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    """Call a read tool. Reads change nothing, so no intent is recorded. `timeout` (seconds)
    shortens an HTTP connector's own timeouts, so a read made against a deadline does not outlive
    it."""
    try:
        spec = get_tool(tool)
    except UnknownTool as exc:
        raise journal.InvalidInput(str(exc), field="tool") from exc
    if spec.kind != "read":
        raise journal.InvalidInput(f"{tool} is a write; use tool_perform", field="tool")
    try:
        spec.validate(args)
    except ArgumentsRefused as exc:
        raise journal.InvalidInput(exc.message, field=exc.field) from exc
    connector = spec.get_connector()
    if timeout is not None and isinstance(connector, HttpConnector):
        bounded = max(timeout, MIN_READ_TIMEOUT)
        connector = dataclasses.replace(
            connector,
            timeout=min(connector.timeout, bounded),
            connect_timeout=min(connector.connect_timeout, bounded),
        )
    return connector.perform(args, "").receipt


def lookup_query(intent: Intent) -> LookupQuery:
    """What a connector is told about the intent it is asked about."""
    return LookupQuery(
        tool=intent.tool,
        idempotency_key=intent.idempotency_key,
        args=intent.args,
        intended_at=intent.intended_at,
        request_id=intent.request_id,
    )


def intent_lookup(*, intent: Intent) -> LookupResult:
    """Ask the intent's downstream system what became of the call, telling it the whole intent
    (lookup_query). Raises ToolError for a failure to ask (transient: try again later);
    UnknownTool when nobody can be asked. The answer is the connector's own: reconciliation holds
    it to connectors.caused_by_intent before settling anything."""
    return get_tool(intent.tool).get_connector().lookup(lookup_query(intent))


def resend_allowed(*, intent: Intent, now: datetime) -> bool:
    """Whether reconciliation may send the open `intent` again under its key (ToolSpec.
    may_resend): its tool honours the key, which the provider still keeps, and has a connector."""
    spec = find_tool(intent.tool)
    if spec is None or not spec.may_resend(intended_at=intent.intended_at, now=now):
        return False
    try:
        spec.get_connector()
    except UnknownTool:
        return False  # a tool its agent runs: the agent sends it again, not reconciliation
    return True


def intent_resend_under_key(*, intent: Intent) -> Performed:
    """Send the open `intent` again with its own key, for a provider that deduplicates by it
    (resend_allowed): the answer is the first call's effect when there was one, else this one's,
    never a second. Raises ToolError as the connector classifies the failure; a refusal of the
    key (conflict) means the provider holds the key for something else."""
    result = get_tool(intent.tool).get_connector().perform(intent.args, intent.idempotency_key)
    return Performed(receipt=result.receipt, evidence_at=result.evidence_at)


def receipt_loss(*, tool: str, receipt: dict[str, Any]) -> str:
    """What the receipt of a call to `tool` says the call could not do (ToolSpec.loss_detail);
    '' when it did everything, or when the tool is unregistered or cannot say."""
    spec = find_tool(tool)
    return spec.describe_loss(receipt) if spec is not None else ""
