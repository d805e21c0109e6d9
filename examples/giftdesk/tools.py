"""The giftdesk's tools (SEAM_TOOL_MODULES=examples.giftdesk.tools), each with a connector built
from tools.connectors' public classes. The provider's address comes from the environment
(GIFTDESK_URL), read when the registry loads this module."""

from __future__ import annotations

import os

from journal.channels import CustomerChannel
from tools.connectors import BusinessIdHttpConnector, HttpConnector
from tools.registry import CustomerFacing, ToolSpec

from .provider import DEFAULT_URL

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
