"""The mcpdesk's plug-ins for Seam (tools.discovery: found because the app is installed).

Tools: only `credit_account` is registered, with an `McpDeskConnector` (examples.mcpdesk.connector)
that speaks MCP to the desk (a stdio child process on the desk's state file, MCPDESK_STATE, or the
desk's streamable HTTP address, MCPDESK_URL). `close_account` is destructive and is not declared:
Seam journals its calls (through the proxy) without knowing it, treats it as irreversible, and
hands a call of it left in doubt to a person.

Catalogue: a credit is taken back by the opposite credit; `close_account` has no entry: nothing
undoes it.

Policies: an agent's session cannot be resumed by Seam (the agent decided each call), so once its
calls in doubt are settled it goes to a person with the handover, nothing undone."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from compensations.defaults import CatalogueEntrySpec
from reconciliation.defaults import TaskPolicySpec
from tools.registry import ToolSpec

from .connector import McpDeskConnector

TASK_TYPE = "desk_session"


def tools() -> list[ToolSpec]:
    # Resolved here: the connector starts the desk from the repository root.
    state_file = str(Path(os.environ.get("MCPDESK_STATE", "mcpdesk-state.json")).resolve())
    url = os.environ.get("MCPDESK_URL", "")
    return [
        ToolSpec(
            name="credit_account",
            label="Credit the desk account",
            kind="write",
            description="Add an amount to a desk account (a negative amount takes it back).",
            args_schema={
                "type": "object",
                "required": ["account", "amount"],
                "properties": {"account": {"type": "string"}, "amount": {"type": "string"}},
            },
            connector=McpDeskConnector("credit_account", state_file=state_file, url=url),
            receipt_fields=("credit_id", "balance"),
            receipt_detail="credit {credit_id}, balance {balance}",
        )
    ]


def catalogue() -> list[CatalogueEntrySpec]:
    return [
        CatalogueEntrySpec(
            tool="credit_account",
            description="Credit the opposite amount to the same account.",
            compensating_tool="credit_account",
            argument_mapping={"account": "args.account", "amount": "negate:args.amount"},
            reversibility="reversible",
        )
    ]


def policies() -> list[TaskPolicySpec]:
    return [
        TaskPolicySpec(
            TASK_TYPE,
            "compensate_and_escalate",
            undo_before_escalating=False,
            max_resume_age=timedelta(hours=1),
            notes="An agent's MCP session: Seam settles its calls in doubt with the desk, then a "
            "person reads the handover and finishes what the agent was doing.",
        )
    ]
