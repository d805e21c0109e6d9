"""The scenarios' plug-ins (tools.discovery), found wherever the scenarios app is installed (the
demo's and the suite's settings, never production's): the demo's flows and the scripted tickets
the kill harness replays (their data in scenarios.flows and scenarios.tickets), and the recovery
policy of each task type those flows use, with its reasoning: resume what rests on fresh reads,
compensate what rests on judgement (seeded by scenarios.policies)."""

from __future__ import annotations

from datetime import timedelta

from reconciliation.defaults import TaskPolicySpec

from .flows import FLOWS, Flow
from .tickets import TICKETS, Ticket


def flows() -> list[Flow]:
    """The demo's flows."""
    return list(FLOWS.values())


def tickets() -> list[Ticket]:
    """The demo's scripted tickets."""
    return list(TICKETS.values())


DEFAULT_POLICIES: list[tuple[str, str, str, timedelta, str]] = [
    (
        "order_status",
        "resume",
        "",
        timedelta(days=1),
        "Read-only: nothing to reconcile; recovery is a re-run.",
    ),
    (
        "returns",
        "resume_until_phase",
        "act",
        timedelta(minutes=30),
        "Resume up to the act phase; once it has acted, hand it to a person with nothing undone: the "
        "decision rested on a policy passage and a stock level read minutes earlier, and whether to "
        "finish (the refund) or undo (the pickup) depends on what the buyer wants.",
    ),
    (
        "damage_dispute",
        "compensate_and_escalate",
        "",
        timedelta(0),
        "Always compensate and escalate: a judgement about a seller's liability is not re-derived from a record.",
    ),
    (
        "shortage",
        "resume_until_phase",
        "act",
        timedelta(minutes=30),
        "Like returns: availability read minutes ago is still fresh only before acting.",
    ),
    ("expedited_fee_refund", "resume", "", timedelta(hours=4), "A refund owed stays owed; finish it."),
    ("order_cancellation", "resume", "", timedelta(hours=1), "The buyer asked to cancel; finish it."),
    (
        "address_change",
        "resume_until_phase",
        "act",
        timedelta(minutes=15),
        "Parcels move: once a shipment was stopped, a person checks where it is.",
    ),
    ("stock_correction", "resume", "", timedelta(hours=1), "A stock correction is idempotent by reference."),
]


# Task types whose escalations leave every write in place for the person to choose: finishing
# (the refund) is as likely right as undoing (the pickup).
ESCALATE_WITHOUT_UNDOING = {"returns"}


def policies() -> list[TaskPolicySpec]:
    """The demo's recovery policy of each task type the scripted flows use."""
    return [
        TaskPolicySpec(
            task_type=task_type,
            strategy=strategy,
            phase=phase,
            max_resume_age=max_age,
            notes=notes,
            undo_before_escalating=task_type not in ESCALATE_WITHOUT_UNDOING,
        )
        for task_type, strategy, phase, max_age, notes in DEFAULT_POLICIES
    ]
