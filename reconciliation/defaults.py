"""`policies_seed`: write a list of task policies where a task type has none (a policy an admin
has edited is never overwritten).

The product ships no policies: they describe a deployment's own task types, so an operator
writes them in the admin (or seeds them from code with `policies_seed`); a dead run of a task
type without one is handed to a person. The demo's policies, for the scripted flows' task
types, are scenarios.policies', seeded when the demo's database is migrated."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.db import DEFAULT_DB_ALIAS

from .models import TaskPolicy


def policies_seed(
    policies: Iterable[Mapping[str, Any]],
    *,
    task_policy_model: Any = None,
    history_model: Any = None,
    using: str = DEFAULT_DB_ALIAS,
) -> int:
    """Create each policy ({"task_type": ..., "strategy": ..., ...}) whose task type has none;
    edited policies are kept. A field the model does not have (a historical model of an older
    migration state) is left out. At run time django-simple-history records each creation
    itself; a historical model, which has no such hook, needs `history_model`, so that the
    first edit still has an "old" version to compare with. Returns how many were created."""
    if task_policy_model is None:
        task_policy_model = TaskPolicy
    fields = {f.name for f in task_policy_model._meta.fields}
    created_count = 0
    for policy_fields in policies:
        defaults = {name: value for name, value in policy_fields.items() if name in fields}
        task_type = defaults.pop("task_type")
        policy, created = task_policy_model.objects.using(using).get_or_create(
            task_type=task_type, defaults=defaults
        )
        created_count += created
        if created and history_model is not None:
            history_model.objects.using(using).create(
                **{f.attname: getattr(policy, f.attname) for f in task_policy_model._meta.concrete_fields},
                history_date=policy.updated_at,
                history_type="+",
                history_change_reason="default policy",
            )
    return created_count
