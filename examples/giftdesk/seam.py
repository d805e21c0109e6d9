"""The giftdesk's plug-ins for Seam, all in one module that Seam finds because the app is
installed (tools.discovery): its tools, what undoes each write and how honestly, how a dead run
recovers, and its flow with the ticket the kill harness replays.

- Tools: each with a connector built from tools.connectors' public classes. The provider's
  address comes from the environment (GIFTDESK_URL), read when the registry loads this module.
- Catalogue: points are reversible (a count, taken back by the opposite entry under the same
  reference), a card load only partly (what the customer already spent is gone), an email not at
  all.
- Policies: the scripted flow's goodwill_credit, and the framework agents' points_agent.
- Flow: load the goodwill onto the customer's gift card, award loyalty points, then email the
  customer (irreversible, so last); its ticket GD-100."""

from __future__ import annotations

import os
from datetime import timedelta

from compensations.defaults import CatalogueEntrySpec
from journal.channels import CustomerChannel
from reconciliation.defaults import TaskPolicySpec
from scenarios.flows import Flow, Step
from scenarios.tickets import Ticket
from tools.connectors import BusinessIdHttpConnector, HttpConnector
from tools.registry import CustomerFacing, ToolSpec

from .provider import DEFAULT_URL

TASK_TYPE = "goodwill_credit"
TICKET_ID = "GD-100"
# The provider is local and answers in milliseconds: a call that has not been answered in three
# seconds will not be (these bound how long reconciliation waits before asking about a call).
CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 2.0


def provider_url() -> str:
    return os.environ.get("GIFTDESK_URL", DEFAULT_URL)


def tools() -> list[ToolSpec]:
    url = provider_url()
    return [
        ToolSpec(
            name="load_gift_card",
            label="Load the gift card",
            kind="write",
            description="Load an amount onto a gift card (a negative amount takes it back).",
            args_schema={
                "type": "object",
                "required": ["card", "amount"],
                "properties": {"card": {"type": "string"}, "amount": {"type": "string"}},
                "additionalProperties": False,
            },
            # Keyed: a repeated key answers the first receipt, and a lookup by key says what
            # became of a call.
            connector=HttpConnector(
                base_url=url,
                path="cards/{card}/loads",
                lookup_path="loads/lookup/{key}",
                receipt_fields=("load_id", "balance"),
                connect_timeout=CONNECT_TIMEOUT,
                timeout=READ_TIMEOUT,
            ),
            receipt_fields=("load_id", "balance"),
            receipt_detail="load {load_id} of {amount}, card balance {balance}",
            # A take-back beyond the card's balance: the customer had already spent it.
            loss_detail="{unrecovered} could not be taken back: the customer had already spent it",
        ),
        ToolSpec(
            name="award_points",
            label="Award loyalty points",
            kind="write",
            description="Award loyalty points under a reference (negative points take them back).",
            args_schema={
                "type": "object",
                "required": ["customer", "points", "reference"],
                "properties": {
                    "customer": {"type": "string"},
                    "points": {"type": "integer"},
                    "reference": {"type": "string"},
                },
                "additionalProperties": False,
            },
            # The points ledger ignores idempotency keys: a call is found by its reference, and
            # each entry's time tells the run's entry from one made before its intent.
            connector=BusinessIdHttpConnector(
                base_url=url,
                path="points",
                key_header="",
                search_path="points/search/{reference}",
                match_args=("customer", "points", "reference"),
                evidence_field="created_at",
                receipt_fields=("entry_id",),
                connect_timeout=CONNECT_TIMEOUT,
                timeout=READ_TIMEOUT,
            ),
            receipt_fields=("entry_id",),
            receipt_detail="{points} points, entry {entry_id}",
        ),
        ToolSpec(
            name="send_goodwill_email",
            label="Email the customer about the goodwill",
            kind="write",
            description="Email the customer that the goodwill was applied.",
            args_schema={
                "type": "object",
                "required": ["customer", "template"],
                "properties": {"customer": {"type": "string"}, "template": {"type": "string"}},
                "additionalProperties": False,
            },
            connector=HttpConnector(
                base_url=url,
                path="emails",
                lookup_path="emails/lookup/{key}",
                receipt_fields=("message_id",),
                connect_timeout=CONNECT_TIMEOUT,
                timeout=READ_TIMEOUT,
            ),
            receipt_fields=("message_id",),
            receipt_detail="email {template} ({message_id})",
            customer_facing=CustomerFacing(
                channel=CustomerChannel.EMAIL,
                says="email {template} ({message_id})",
                announces=("load_gift_card", "award_points"),
            ),
        ),
    ]


def catalogue() -> list[CatalogueEntrySpec]:
    return [
        CatalogueEntrySpec(
            tool="award_points",
            description="Book the opposite points entry under the same reference.",
            compensating_tool="award_points",
            argument_mapping={
                "customer": "args.customer",
                "points": "negate:args.points",
                "reference": "args.reference",
            },
            reversibility="reversible",
            staff_notes="The points ledger ignores idempotency keys; the undo is found by its reference "
            "and its negated points, like the award.",
        ),
        CatalogueEntrySpec(
            tool="load_gift_card",
            description="Take the loaded amount back off the card.",
            compensating_tool="load_gift_card",
            argument_mapping={"card": "args.card", "amount": "negate:args.amount"},
            reversibility="partial",
            loss="whatever the customer has already spent from the card",
            staff_notes="The take-back stops at the card's balance; its receipt's `unrecovered` says "
            "how much was already spent.",
        ),
        CatalogueEntrySpec(
            tool="send_goodwill_email",
            description="An email cannot be unsent.",
            reversibility="none",
            staff_notes="If a step it announced is undone, write to the customer again.",
        ),
    ]


def policies() -> list[TaskPolicySpec]:
    return [
        TaskPolicySpec(
            "goodwill_credit",
            "resume_until_phase",
            phase="notify",
            max_resume_age=timedelta(hours=1),
            notes="Resume the money and the points, which the ticket fully decides; once the run "
            "reached the email, a person checks what the customer was told before anything more.",
        ),
        # docs/integrating.md's framework agents (points_langgraph.py, points_openai.py,
        # points_pydantic.py): the model decided each call, so Seam cannot resume the run.
        TaskPolicySpec(
            "points_agent",
            "compensate_and_escalate",
            undo_before_escalating=False,
            notes="An agent's points run: Seam settles its calls in doubt with the ledger's lookup, "
            "then a person reads the handover and finishes what the agent was doing.",
        ),
    ]


def flows() -> list[Flow]:
    return [
        Flow(
            task_type=TASK_TYPE,
            version="1",
            description="A goodwill credit: gift-card load, loyalty points, an email.",
            steps=(
                Step(
                    "load_gift_card", "act", {"card": "$card", "amount": "$amount"}, "load {amount} on {card}"
                ),
                Step(
                    "award_points",
                    "act",
                    {"customer": "$customer", "points": "$points", "reference": "$reference"},
                    "award {points} points",
                ),
                Step(
                    "send_goodwill_email",
                    "notify",
                    {"customer": "$customer", "template": "goodwill_credit"},
                    "email {customer}",
                ),
            ),
        )
    ]


def tickets() -> list[Ticket]:
    return [
        Ticket(
            TICKET_ID,
            TASK_TYPE,
            {
                "card": "GC-7781",
                "amount": "25.00",
                "customer": "C-204",
                "points": 500,
                "reference": TICKET_ID,
            },
        )
    ]
