"""`policies_seed`: write a list of task policies where a task type has none (a policy an admin
has edited is never overwritten).

The product ships no policies: they describe a deployment's own task types, so an operator
writes them in the admin, or declares them in code as `TaskPolicySpec`s returned by `policies()`
in an installed app's `seam.py` (tools.discovery; `policies_declared`), and seeds them with
`manage.py seam_seed`; a dead run of a task type without one is handed to a person. The demo's
policies, for the scripted flows' task types, are the scenarios app's (scenarios/seam.py),
declared the same way and also seeded when the demo's database is migrated."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS

from compensations.defaults import DeclarationDiffers, declaration_apply, declared_differences
from journal.tenancy import default_row
from tools import discovery

from .models import Strategy, TaskPolicy


@dataclass(frozen=True)
class TaskPolicySpec:
    """How a dead run of one task type recovers, declared in code: a TaskPolicy row's fields
    (see its docstring). An unknown strategy is refused when declared."""

    task_type: str
    strategy: str
    phase: str = ""
    max_resume_age: timedelta = timedelta(hours=1)
    undo_before_escalating: bool = True
    notes: str = ""

    def __post_init__(self) -> None:
        if self.strategy not in Strategy.values:
            raise ValueError(
                f"{self.task_type}: strategy {self.strategy!r} is not one of {', '.join(Strategy.values)}"
            )

    def as_fields(self) -> dict[str, Any]:
        return asdict(self)


def policies_declared() -> list[TaskPolicySpec]:
    """Every policy declared by the installed apps' seam modules, each `policies()` returning a
    list of TaskPolicySpec. A task type declared twice is refused."""
    policies: dict[str, TaskPolicySpec] = {}
    for module_name, policy in discovery.declared("policies", TaskPolicySpec):
        if policy.task_type in policies:
            raise ValueError(f"the policy of {policy.task_type} is declared twice ({module_name})")
        policies[policy.task_type] = policy
    return list(policies.values())


def policies_seed(
    policies: Iterable[TaskPolicySpec | Mapping[str, Any]],
    *,
    task_policy_model: Any = None,
    history_model: Any = None,
    using: str = DEFAULT_DB_ALIAS,
) -> int:
    """Create each default policy (no tenant; {"task_type": ..., "strategy": ..., ...}) whose task
    type has none;
    edited policies are kept. A field the model does not have (a historical model of an older
    migration state) is left out. At run time django-simple-history records each creation
    itself; a historical model, which has no such hook, needs `history_model`, so that the
    first edit still has an "old" version to compare with. Returns how many were created."""
    if task_policy_model is None:
        task_policy_model = TaskPolicy
    fields = {f.name for f in task_policy_model._meta.fields}
    created_count = 0
    for declared in policies:
        policy_fields = declared.as_fields() if isinstance(declared, TaskPolicySpec) else dict(declared)
        defaults = {name: value for name, value in policy_fields.items() if name in fields}
        task_type = defaults.pop("task_type")
        default = default_row(task_policy_model)  # seeds are the defaults (no tenant)
        policy, created = task_policy_model.objects.using(using).get_or_create(
            task_type=task_type, **default, defaults=defaults
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


def policies_differences(policies: Iterable[TaskPolicySpec]) -> list[tuple[TaskPolicy, DeclarationDiffers]]:
    """Each declared policy whose stored default (no tenant) differs from it, with how."""
    return declared_differences(
        policies,
        stored=TaskPolicy.objects.defaults(),
        key="task_type",
        kind="task policy",
        admin="reconciliation/taskpolicy",
    )


def policy_apply(row: TaskPolicy, differs: DeclarationDiffers, *, reason: str) -> None:
    """declaration_apply for a policy: a new version of it, as an admin's edit is."""
    row.version += 1
    declaration_apply(row, differs, reason=reason)
