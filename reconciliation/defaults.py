"""The recovery policy of each task type the scripted flows use, each with its reasoning.
Seeded by migration 0002 and by `policies_seed_defaults` (tests flush tables between cases)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from .models import TaskPolicy

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
# (the refund) is as likely right as undoing (the pickup). A field added after the first seed, so
# it is applied only where the model has it (migration 0002's historical model does not).
ESCALATE_WITHOUT_UNDOING = {"returns"}


def policies_seed_defaults(task_policy_model: Any = None, history_model: Any = None) -> None:
    """Create the default policy of each task type that has none; edited policies are kept.
    At run time django-simple-history records each creation itself; a migration, whose
    historical models have no such hook, passes `history_model` so that the first edit still has
    an "old" version to compare with."""
    if task_policy_model is None:
        task_policy_model = TaskPolicy
    for task_type, strategy, phase, max_age, notes in DEFAULT_POLICIES:
        defaults: dict[str, Any] = {
            "strategy": strategy,
            "phase": phase,
            "max_resume_age": max_age,
            "notes": notes,
        }
        has_undo_field = any(f.name == "undo_before_escalating" for f in task_policy_model._meta.fields)
        if has_undo_field:
            defaults["undo_before_escalating"] = task_type not in ESCALATE_WITHOUT_UNDOING
        policy, created = task_policy_model.objects.get_or_create(task_type=task_type, defaults=defaults)
        if created and history_model is not None:
            history_model.objects.create(
                id=policy.id,
                task_type=policy.task_type,
                strategy=policy.strategy,
                phase=policy.phase,
                max_resume_age=policy.max_resume_age,
                notes=policy.notes,
                **({"undo_before_escalating": policy.undo_before_escalating} if has_undo_field else {}),
                version=policy.version,
                updated_at=policy.updated_at,
                history_date=policy.updated_at,
                history_type="+",
                history_change_reason="default policy",
            )
