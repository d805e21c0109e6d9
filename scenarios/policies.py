"""Seeding the demo's recovery policies (declared in scenarios/seam.py). Seeded where the
scenarios are installed (local and test settings, never production) each time `migrate` runs
(scenarios.apps), and by `policies_seed_defaults` (tests flush tables between cases); a policy an
admin has edited is never overwritten."""

from __future__ import annotations

from typing import Any

from reconciliation.defaults import policies_seed

from .seam import policies


def policies_seed_defaults(
    task_policy_model: Any = None, history_model: Any = None, using: str = "default"
) -> int:
    """Create the demo's policy of each task type that has none; edited policies are kept."""
    return policies_seed(
        policies(), task_policy_model=task_policy_model, history_model=history_model, using=using
    )


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
