"""The demo's recovery policy of each task type the scripted flows use (scenarios.flows), with
its reasoning: resume what rests on fresh reads, compensate what rests on judgement. Seeded
where the scenarios are installed (local and test settings, never production) each time
`migrate` runs (scenarios.apps), and by `policies_seed_defaults` (tests flush tables between
cases); a policy an admin has edited is never overwritten."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from reconciliation.defaults import TaskPolicySpec, policies_seed

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


def policies_seed_defaults(
    task_policy_model: Any = None, history_model: Any = None, using: str = "default"
) -> int:
    """Create the demo's policy of each task type that has none; edited policies are kept."""
    return policies_seed(
        policies(), task_policy_model=task_policy_model, history_model=history_model, using=using
    )


def policies() -> list[TaskPolicySpec]:
    """The demo's policies, declared like any integrator's (SEAM_POLICY_MODULES)."""
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


def policies_seed_after_migrate(*, using: str, plan: Any = None, apps: Any = None, **kwargs: Any) -> None:
    """post_migrate: after `migrate` (never after `flush`, whose plan is None: tests empty the
    tables on purpose), write the demo's recovery policies for the scripted flows' task types
    where a task type has none. Connected only where the demo is installed, so a production
    database never gets them. Uses the migrated state's models, so that a database migrated to
    an older state is seeded as far as its tables go."""
    if plan is None or apps is None:
        return
    try:
        model = apps.get_model("reconciliation", "TaskPolicy")
        history_model = apps.get_model("reconciliation", "HistoricalTaskPolicy")
    except LookupError:  # migrated back to before the table existed
        return
    policies_seed_defaults(task_policy_model=model, history_model=history_model, using=using)
