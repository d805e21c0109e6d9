"""Seed the demo tenant with realistic runs, recorded through the journal services exactly as an
agent runtime would record them. The calls' receipts come from small stand-in dispatches
below; the downstream sandbox (a later issue) replaces them with real provider calls."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand
from django.utils import timezone

from handover import services
from handover.models import Run, Tenant
from handover.services import Actor
from handover.tool_errors import DispatchResult, ToolError

VERSIONS = {"schema": "1", "flow": "returns-3", "policy": "2026-11", "capability": "1"}


def _receipt(summary: str, **receipt: Any) -> Callable[[dict[str, Any], str], DispatchResult]:
    return lambda args, key: DispatchResult(summary=summary, receipt=receipt, request_id=f"req-{key[:8]}")


def _fails(error_class: str, message: str) -> Callable[[dict[str, Any], str], DispatchResult]:
    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        raise ToolError(error_class, message)

    return dispatch


# Each demo run: its header, its plan, the calls that happened (tool, args, dispatch), what the
# customer was told, and whether the runtime died with one more intent recorded but unsettled.
DEMO_RUNS: list[dict[str, Any]] = [
    {
        "external_id": "demo-T-40912",
        "task_type": "returns",
        "ticket_id": "T-40912",
        "order_id": "SU-90317",
        "plan": [
            {
                "tool": "start_return",
                "args": {"order_id": "SU-90317"},
                "phase": "act",
                "detail": "return label and courier pickup",
            },
            {
                "tool": "offer_replacement",
                "args": {"order_id": "SU-90317", "sku": "OAK-BENCH", "qty": 1},
                "phase": "act",
                "detail": "1 x oak bench reserved",
            },
            {
                "tool": "issue_refund",
                "args": {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"},
                "phase": "act",
                "detail": "$14.95 expedited delivery fee",
            },
            {
                "tool": "notify_seller",
                "args": {"order_id": "SU-90317", "template": "return_started"},
                "phase": "notify",
                "detail": "email Ashcombe Furniture",
            },
        ],
        "calls": [
            (
                "start_return",
                {"order_id": "SU-90317"},
                _receipt(
                    "label RL-7734, courier pickup booked Fri 20 Mar",
                    label="RL-7734",
                    pickup_date="2026-03-20",
                ),
            ),
            (
                "offer_replacement",
                {"order_id": "SU-90317", "sku": "OAK-BENCH", "qty": 1},
                _receipt(
                    "1 x oak bench reserved, warehouse LDS-2", reservation_id="RSV-55120", warehouse="LDS-2"
                ),
            ),
        ],
        "told": [("email", "Return label sent. No refund was mentioned.")],
        "died_during": None,
    },
    {
        "external_id": "demo-T-41207",
        "task_type": "shortage",
        "ticket_id": "T-41207",
        "order_id": "SU-88410",
        "plan": [
            {
                "tool": "issue_credit",
                "args": {"order_id": "SU-88410", "amount": "412.00"},
                "phase": "act",
                "detail": "$412 credit memo",
            },
            {
                "tool": "reship",
                "args": {"order_id": "SU-88410", "sku": "SKU-4471", "qty": 4},
                "phase": "act",
                "detail": "reship 4 x SKU-4471",
            },
        ],
        "calls": [
            (
                "issue_credit",
                {"order_id": "SU-88410", "amount": "412.00"},
                _fails("transient", "accounting API returned 503"),
            ),
        ],
        "told": [("chat", "We're sending the missing units and crediting your account.")],
        "died_during": ("reship", {"order_id": "SU-88410", "sku": "SKU-4471", "qty": 4}),
    },
    {
        "external_id": "demo-T-41311",
        "task_type": "order_status",
        "ticket_id": "T-41311",
        "order_id": "SU-90502",
        "plan": [],
        "calls": [],
        "told": [("chat", "Your order left the warehouse this morning.")],
        "died_during": None,
        "complete": True,
    },
]


class Command(BaseCommand):
    help = "Record demo runs for the 'sundry' tenant through the journal services (skips ones already there)."

    def handle(self, *args: Any, **options: Any) -> None:
        tenant, _ = Tenant.objects.get_or_create(slug="sundry", defaults={"name": "Sundry Marketplace"})
        actor = Actor.agent("demo-agent")
        for spec in DEMO_RUNS:
            if Run.objects.filter(tenant=tenant, external_id=spec["external_id"]).exists():
                continue
            run = services.run_create(
                tenant=tenant,
                task_type=spec["task_type"],
                versions=VERSIONS,
                plan=spec["plan"],
                ticket_id=spec["ticket_id"],
                order_id=spec["order_id"],
                external_id=spec["external_id"],
                deadline=timezone.now() + timedelta(hours=4),
                actor=actor,
            ).run
            turn = 0
            for turn, (tool, tool_args, dispatch) in enumerate(spec["calls"], start=1):
                # A classified failure is recorded as failed with its class; the run goes on.
                with contextlib.suppress(ToolError):
                    services.perform(
                        run=run, tool=tool, args=tool_args, dispatch=dispatch, turn=turn, actor=actor
                    )
            for channel, body in spec["told"]:
                services.customer_message_record(run=run, channel=channel, body=body, actor=actor)
            if spec["died_during"]:
                tool, tool_args = spec["died_during"]
                # The process died after committing this intent and before any outcome.
                services.intent_record(run=run, tool=tool, args=tool_args, turn=turn + 1, actor=actor)
            if spec.get("complete"):
                services.run_complete(run=run, actor=actor)
            self.stdout.write(f"  seeded {spec['ticket_id']} ({spec['task_type']})")
