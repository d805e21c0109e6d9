"""The catalogue editor's logic: an admin's draft of one tool's catalogue entry, checked, previewed
against what the tool's calls actually recorded, and saved as the tenant's own entry.

The preview builds each undo with compensations.mapping.compensation_args, the code the undo
worker builds it with, so "the undo could be built from 940 of 1,000 receipts" is what the
worker would find. Saving writes the tenant's own row (the default stays, for every other
tenant; only a superuser changes the default itself), its history (django-simple-history) and
an audit row, in one transaction; a draft made from an entry that changed since is refused."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.http import Http404
from django.utils import timezone

from audit.chain import audit_record
from audit.models import AuditAction
from compensations.checks import broken_mappings
from compensations.mapping import MappingError, MissingSource, compensation_args, parse_source
from compensations.models import CatalogueEntry, Compensation, CompensationStatus, Reversibility
from compensations.reversibility import reversibility_now
from compensations.selectors import catalogue_entry_for
from handover import words
from journal.errors import Conflict, InvalidInput
from journal.models import Intent, IntentStatus, Run, RunStatus, Tenant
from tools.registry import all_tools

# The receipts a preview reads: the tool's newest performed calls in the tenant.
RECEIPTS_READ = 1000
# The open runs a preview names one by one (all are counted).
RUNS_NAMED = 50
OPEN_STATUSES = (RunStatus.ESCALATED, RunStatus.RUNNING)
# A step whose undo has run (or failed past its retries) is not undone again by the catalogue.
UNDONE = (CompensationStatus.DONE, CompensationStatus.PARTIAL, CompensationStatus.DEAD_LETTERED)
# The fields the editor changes, in the order the audit row lists them.
EDITED_FIELDS = (
    "compensating_tool",
    "argument_mapping",
    "reversibility",
    "until_condition",
    "deadline_field",
    "loss",
    "staff_notes",
)


@dataclass(frozen=True)
class Draft:
    """The entry as the admin's form says it: the fields of CatalogueEntry the editor changes.
    Has the shape compensation_args reads (tool, compensating_tool, argument_mapping)."""

    tool: str
    compensating_tool: str
    argument_mapping: dict[str, Any]
    reversibility: str
    until_condition: str = ""
    deadline_field: str = ""
    loss: str = ""
    staff_notes: str = ""

    @classmethod
    def of(cls, entry: CatalogueEntry) -> Draft:
        mapping = entry.argument_mapping if isinstance(entry.argument_mapping, dict) else {}
        return cls(
            entry.tool,
            **{name: getattr(entry, name) for name in EDITED_FIELDS} | {"argument_mapping": dict(mapping)},
        )

    def fields(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in EDITED_FIELDS}


def entry_token(entry: CatalogueEntry | None) -> str:
    """What the edit page showed: the governing row and when it last changed. Posted back with a
    save, which is refused if the governing row is another one or changed since."""
    if entry is None:
        return ""
    return f"{entry.pk}.{entry.updated_at.timestamp():.6f}"


def entry_for_editing(*, tenant: Tenant, entry_id: int) -> CatalogueEntry:
    """The entry `entry_id` if this tenant may see it (its own, or a default), else 404."""
    entry = CatalogueEntry.objects.select_related("tenant").filter(pk=entry_id).first()
    if entry is None or entry.tenant_id not in (None, tenant.pk):
        raise Http404("No such catalogue entry.")
    return entry


def editing_default(entry: CatalogueEntry, user: Any) -> bool:
    """Whether a save changes the default row itself: only a superuser's, from the default."""
    return entry.tenant_id is None and bool(user.is_superuser)


def entry_shown(*, tenant: Tenant, entry: CatalogueEntry, user: Any) -> CatalogueEntry:
    """The row the edit page of `entry` shows and a save starts from: the default itself for a
    superuser editing it, else the entry that governs the tool for the tenant."""
    if editing_default(entry, user):
        return entry
    return catalogue_entry_for(tenant_id=tenant.pk, tool=entry.tool) or entry


def parse_mapping(text: str) -> dict[str, Any]:
    """The argument mapping as typed (a JSON object of argument → source), or InvalidInput
    naming argument_mapping."""
    try:
        mapping = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            words.say(words.CATALOGUE_MAPPING_NOT_JSON, error=exc.msg), field="argument_mapping"
        ) from None
    if not isinstance(mapping, dict):
        raise InvalidInput(str(words.CATALOGUE_MAPPING_NOT_OBJECT), field="argument_mapping")
    for argument, source in mapping.items():
        try:
            parse_source(source)
        except MappingError as exc:
            raise InvalidInput(
                words.say(words.CATALOGUE_MAPPING_BAD_SOURCE, argument=argument, why=exc),
                field="argument_mapping",
            ) from None
    return mapping


def draft_problems(draft: Draft) -> dict[str, str]:
    """field → why the draft cannot be saved ({} when it can): the reversibility's own rules,
    then the system check's (compensations.checks), so a saved entry never fails `manage.py check`."""
    return _grade_problems(draft) or _declared_problems(draft)


def _grade_problems(draft: Draft) -> dict[str, str]:
    """What the reversibility grade asks of the other fields."""
    problems: dict[str, str] = {}
    if draft.reversibility == Reversibility.NONE:
        if draft.compensating_tool or draft.argument_mapping:
            problems["compensating_tool"] = str(words.CATALOGUE_NONE_UNDOES_NOTHING)
    elif not draft.compensating_tool:
        problems["compensating_tool"] = str(words.CATALOGUE_UNDO_NEEDED)
    if draft.reversibility == Reversibility.REVERSIBLE_UNTIL and not (
        draft.until_condition or draft.deadline_field
    ):
        problems["until_condition"] = str(words.CATALOGUE_WINDOW_NEEDED)
    if draft.reversibility == Reversibility.PARTIAL and not draft.loss:
        problems["loss"] = str(words.CATALOGUE_LOSS_NEEDED)
    return problems


def _declared_problems(draft: Draft) -> dict[str, str]:
    """What the declared tools say of the draft (nothing when its tool is not declared)."""
    tools = all_tools()
    spec = tools.get(draft.tool)
    if spec is not None and draft.deadline_field and draft.deadline_field not in spec.receipt_fields:
        return {
            "deadline_field": words.say(
                words.CATALOGUE_DEADLINE_NOT_IN_RECEIPT,
                field=draft.deadline_field,
                fields=", ".join(spec.receipt_fields),
            )
        }
    checked = broken_mappings({draft.tool: draft}, tools)
    return {"argument_mapping": "; ".join(str(error.msg) for error in checked)} if checked else {}


# --- the preview --------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenRun:
    """An open run the change governs: its steps of the tool left to undo, whether their undo
    can be built, and how far they can be taken back, under the entry now and after the change."""

    run: Run
    steps: int
    buildable_now: bool
    buildable_after: bool
    reversible_now: str = ""
    reversible_after: str = ""


@dataclass
class Preview:
    """What the draft would do: of the tool's newest receipts (at most RECEIPTS_READ), how many
    the undo could be built from, and each missing source with how many lack it; and the open
    runs with a performed step of the tool not yet undone, whose undo the change governs."""

    receipts: int = 0
    buildable: int = 0
    missing: list[tuple[str, int]] = field(default_factory=list)
    other_errors: list[tuple[str, int]] = field(default_factory=list)
    open_runs: list[OpenRun] = field(default_factory=list)
    open_runs_total: int = 0
    undoes_nothing: bool = False

    @property
    def unbuildable(self) -> int:
        return self.receipts - self.buildable


def _problems_of(
    draft: Draft, args: Mapping[str, Any], receipt: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """The sources the undo lacks for this call (compensation_args stops at the first, so each
    argument is built on its own), and any other error that stops it; both empty when it can be
    built."""
    lacking: list[str] = []
    errors: list[str] = []
    for argument, source in draft.argument_mapping.items():
        one = Draft(draft.tool, draft.compensating_tool, {argument: source}, draft.reversibility)
        try:
            compensation_args(one, args, receipt)
        except MissingSource as exc:
            lacking.append(exc.source)
        except MappingError as exc:
            errors.append(str(exc))
    return lacking, errors


def _buildable(draft: Draft | CatalogueEntry | None, intent: Intent) -> bool:
    if draft is None or not draft.compensating_tool:
        return False
    try:
        compensation_args(draft, intent.args or {}, intent.receipt or {})
    except MappingError:
        return False
    return True


def open_steps(*, tenant: Tenant, tool: str) -> list[Intent]:
    """The performed steps of `tool` in the tenant's open runs that nothing has undone yet
    (and that are not themselves an undo): those the catalogue entry's undo would be built for."""
    return list(
        Intent.objects.filter(
            run__tenant=tenant, run__status__in=OPEN_STATUSES, tool=tool, status=IntentStatus.PERFORMED
        )
        .exclude(compensation_of__isnull=False)
        .exclude(pk__in=Compensation.objects.filter(status__in=UNDONE).values("original_id"))
        .select_related("run")
        .order_by("run__created_at", "intended_at", "id")
    )


def catalogue_preview(*, tenant: Tenant, draft: Draft) -> Preview:
    preview = Preview(undoes_nothing=not draft.compensating_tool)
    calls = (
        Intent.objects.filter(run__tenant=tenant, tool=draft.tool, status=IntentStatus.PERFORMED)
        .exclude(compensation_of__isnull=False)
        .order_by("-intended_at", "-id")
        .values_list("args", "receipt")[:RECEIPTS_READ]
    )
    missing: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for args, receipt in calls:
        preview.receipts += 1
        lacking, failed = _problems_of(draft, args or {}, receipt or {})
        if not lacking and not failed and draft.compensating_tool:
            preview.buildable += 1
        missing.update(lacking)
        errors.update(failed)
    preview.missing = missing.most_common()
    preview.other_errors = errors.most_common()
    current = catalogue_entry_for(tenant_id=tenant.pk, tool=draft.tool)
    by_run: dict[Any, list[Intent]] = {}
    for step in open_steps(tenant=tenant, tool=draft.tool):
        by_run.setdefault(step.run_id, []).append(step)
    preview.open_runs_total = len(by_run)
    now = timezone.now()
    for steps in list(by_run.values())[:RUNS_NAMED]:
        preview.open_runs.append(
            OpenRun(
                run=steps[0].run,
                steps=len(steps),
                buildable_now=all(_buildable(current, step) for step in steps),
                buildable_after=all(_buildable(draft, step) for step in steps),
                reversible_now=_reversible_words(current, steps, now),
                reversible_after=_reversible_words(draft, steps, now),
            )
        )
    return preview


def _reversible_words(entry: Draft | CatalogueEntry | None, steps: list[Intent], now: datetime) -> str:
    """How far the steps can be taken back at `now` under `entry`, as the run page says it (the
    distinct answers, oldest step's first): the window a reversible_until entry reads from each
    receipt is what the change means for the run."""
    said = [words.reversibility_sentence(reversibility_now(entry, step.receipt, now)) for step in steps]
    return "; ".join(dict.fromkeys(said))


# --- saving -------------------------------------------------------------------------------------


class CatalogueChanged(Conflict):
    """The entry changed (or a tenant's own entry appeared) since the edit page was drawn."""


def catalogue_entry_save(
    *,
    actor: Any,
    tenant: Tenant,
    entry_id: int,
    draft: Draft,
    seen: str,
    note: str = "",
    request_id: str = "",
) -> CatalogueEntry:
    """Write the draft as the tenant's own entry for its tool (or, for a superuser editing the
    default, the default), with its history and an audit row, in one transaction. Refuses with
    InvalidInput (naming the field) a draft that cannot be saved, and with CatalogueChanged a
    draft of an entry that changed since `seen` (entry_token)."""
    problems = draft_problems(draft)
    if problems:
        name, message = next(iter(problems.items()))
        raise InvalidInput(message, field=name)
    try:
        with transaction.atomic(durable=True):
            return _save_locked(
                actor=actor,
                tenant=tenant,
                entry_id=entry_id,
                draft=draft,
                seen=seen,
                note=note,
                request_id=request_id,
            )
    except IntegrityError:
        # Two admins creating the tenant's own entry at once: the second finds the first's.
        raise CatalogueChanged(str(words.CATALOGUE_CHANGED)) from None


def _save_locked(
    *, actor: Any, tenant: Tenant, entry_id: int, draft: Draft, seen: str, note: str, request_id: str
) -> CatalogueEntry:
    shown = entry_for_editing(tenant=tenant, entry_id=entry_id)
    if shown.tool != draft.tool:
        raise InvalidInput(str(words.CATALOGUE_CHANGED), field="tool")
    rows = list(CatalogueEntry.objects.select_for_update().filter(tool=draft.tool).for_tenant(tenant.pk))
    governing = rows[0] if rows else None
    if editing_default(shown, actor):
        governing = next((row for row in rows if row.tenant_id is None), None)
    if entry_token(governing) != seen or governing is None:
        raise CatalogueChanged(str(words.CATALOGUE_CHANGED))
    old = Draft.of(governing).fields()
    if governing.tenant_id == tenant.pk or editing_default(shown, actor):
        target = governing
    else:
        # The tenant's own entry, starting from the default's words; the default stays.
        target = CatalogueEntry(tenant=tenant, tool=draft.tool, description=governing.description)
    for name, value in draft.fields().items():
        setattr(target, name, value)
    target._history_user = actor  # type: ignore[attr-defined]
    target._change_reason = note or str(words.CATALOGUE_EDITED_IN_CONSOLE)  # type: ignore[attr-defined]
    target.save()
    audit_record(
        user=actor,
        tenant=tenant,
        action=AuditAction.CATALOGUE_EDIT,
        old={"tool": draft.tool, "entry": governing.pk, "default": governing.tenant_id is None, **old},
        new={"tool": draft.tool, "entry": target.pk, "default": target.tenant_id is None, **draft.fields()},
        note=note,
        request_id=request_id,
    )
    return target
