"""System checks that keep the compensation catalogue honest against the code it describes.

- compensations.E001: a registered write tool has no catalogue entry (nothing says what undoes it).
- compensations.E002: an entry's undo cannot be built: its mapping names a receipt field the tool's
  receipt does not carry (the release that needed a reservation id the state row never stored),
  or an argument the tool does not take, or the compensating tool is not a registered write
  tool, or does not take (or is not given) an argument, or the deadline field is not in the receipt.
- compensations.E003: a flow performs an irreversible write before a reversible one, with no
  documented reason (Flow.irreversible_first).

The catalogue is a table, so these are database checks: they run with
`manage.py check --database default` and before `migrate`, and say nothing until the catalogue
table exists (a first `migrate` must be able to create it)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, register
from django.db import DatabaseError, connections, router
from django.db.migrations.recorder import MigrationRecorder
from django.utils.module_loading import import_string

from tools.registry import ToolSpec, all_tools

from .mapping import MappingError, parse_source
from .models import CatalogueEntry, Reversibility

# Until the catalogue's migrations up to its tenant column have run, the checks say nothing (the
# query names that column; an operator fills the catalogue in the admin or with seam_seed).
CATALOGUE_MIGRATION = ("compensations", "0008_catalogue_entry_per_tenant")


class EntryLike(Protocol):
    @property
    def tool(self) -> str: ...

    @property
    def compensating_tool(self) -> str: ...

    @property
    def argument_mapping(self) -> Any: ...

    @property
    def reversibility(self) -> str: ...

    @property
    def deadline_field(self) -> str: ...


class StepLike(Protocol):
    @property
    def tool(self) -> str: ...

    @property
    def write(self) -> bool: ...


class FlowLike(Protocol):
    @property
    def task_type(self) -> str: ...

    @property
    def writes(self) -> Sequence[StepLike]: ...

    @property
    def irreversible_first(self) -> str: ...


def missing_entries(entries: Mapping[str, EntryLike], tools: Mapping[str, ToolSpec]) -> list[CheckMessage]:
    return [
        Error(
            f"write tool {name} has no compensation catalogue entry",
            hint="Add one in the admin (or seed it with compensations.defaults.catalogue_seed): what undoes it, or reversibility "
            "'none' with a staff note saying why nothing can.",
            obj=name,
            id="compensations.E001",
        )
        for name, spec in sorted(tools.items())
        if spec.kind == "write" and name not in entries
    ]


def _properties(spec: ToolSpec) -> Mapping[str, Any]:
    properties = spec.args_schema.get("properties", {})
    return properties if isinstance(properties, Mapping) else {}


def broken_mappings(entries: Mapping[str, EntryLike], tools: Mapping[str, ToolSpec]) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for name, entry in sorted(entries.items()):
        spec = tools.get(name)
        if spec is None or entry.reversibility == Reversibility.NONE:
            # An entry for a tool this deployment does not register is harmless; "none" undoes nothing.
            continue
        errors.extend(
            Error(f"catalogue entry {entry.tool}: {message}", obj=entry.tool, id="compensations.E002")
            for message in _entry_problems(name, entry, spec, tools)
        )
    return errors


def _entry_problems(
    name: str, entry: EntryLike, spec: ToolSpec, tools: Mapping[str, ToolSpec]
) -> Iterator[str]:
    """Why the entry's undo of `name` cannot be built, one sentence per problem, in the order found."""
    if entry.deadline_field and entry.deadline_field not in spec.receipt_fields:
        yield f"deadline field {entry.deadline_field} is not in {name}'s receipt {spec.receipt_fields}"
    undo = tools.get(entry.compensating_tool)
    if undo is None or undo.kind != "write":
        yield f"compensating tool {entry.compensating_tool!r} is not a registered write tool"
    mapping = entry.argument_mapping
    if not isinstance(mapping, Mapping):
        yield f"argument_mapping must be an object, not {mapping!r}"
        return
    for argument, text in mapping.items():
        yield from _argument_problems(name, spec, undo, argument, text)
    if undo is not None:
        required = undo.args_schema.get("required", [])
        for argument in required if isinstance(required, list) else []:
            if argument not in mapping:
                yield f"{undo.name} requires {argument}, which the mapping does not give"


def _argument_problems(
    name: str, spec: ToolSpec, undo: ToolSpec | None, argument: str, text: Any
) -> Iterator[str]:
    """Why one mapped argument of the undo cannot be filled from what `name` recorded."""
    try:
        source = parse_source(text)
    except MappingError as exc:
        yield f"argument {argument}: {exc}"
        return
    if source.origin == "receipt" and source.field not in spec.receipt_fields:
        yield (
            f"argument {argument} comes from {text}, but {name}'s receipt carries only "
            f"{', '.join(spec.receipt_fields) or 'nothing'}: the undo needs a field that is never stored"
        )
    if source.origin == "args" and source.field not in _properties(spec):
        yield f"argument {argument} comes from {text}, but {name} takes no argument {source.field}"
    if undo is not None and argument not in _properties(undo):
        yield f"{undo.name} takes no argument {argument}"


def irreversible_first(entries: Mapping[str, EntryLike], flows: Iterable[FlowLike]) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for flow in flows:
        if flow.irreversible_first.strip():
            continue
        first_irreversible: str | None = None
        for step in flow.writes:
            entry = entries.get(step.tool)
            if entry is None:
                continue  # E001's business
            if entry.reversibility == Reversibility.NONE:
                first_irreversible = first_irreversible or step.tool
            elif first_irreversible is not None:
                errors.append(
                    Error(
                        f"flow {flow.task_type} performs {first_irreversible} (not reversible) before "
                        f"{step.tool} (reversible): if {step.tool} fails, {first_irreversible} cannot be undone",
                        hint="Reorder the flow so irreversible writes come last, or give the Flow an "
                        "irreversible_first reason.",
                        obj=flow.task_type,
                        id="compensations.E003",
                    )
                )
                break
    return errors


def _flows() -> list[FlowLike]:
    """The declared flows (settings.SEAM_FLOWS: a mapping or list of flows, or a function
    returning one); none when the setting is blank."""
    if not settings.SEAM_FLOWS:
        return []
    flows = import_string(settings.SEAM_FLOWS)
    if callable(flows):
        flows = flows()
    return list(flows.values() if isinstance(flows, Mapping) else flows)


def _catalogue_ready(alias: str) -> bool:

    connection = connections[alias]
    try:
        if CatalogueEntry._meta.db_table not in connection.introspection.table_names():
            return False
        return CATALOGUE_MIGRATION in MigrationRecorder(connection).applied_migrations()
    except DatabaseError:
        return False


# Registered without the `database` tag so that a plain `manage.py check` (and runserver, and
# the deploy check) catches a bad catalogue; it reads one small table and stays silent when
# the database or the table is not there yet.
@register()
def check_catalogue(
    app_configs: Sequence[AppConfig] | None = None, databases: Sequence[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:

    alias = router.db_for_read(CatalogueEntry)
    if (databases is not None and alias not in databases) or not _catalogue_ready(alias):
        return []
    rows = list(CatalogueEntry.objects.using(alias).order_by("tool", "tenant_id"))
    defaults: dict[str, EntryLike] = {entry.tool: entry for entry in rows if entry.tenant_id is None}
    tools, flows = all_tools(), _flows()
    errors = [
        *missing_entries(defaults, tools),
        *broken_mappings(defaults, tools),
        *irreversible_first(defaults, flows),
    ]
    # A tenant's own entries are checked as well, and each flow against the catalogue that
    # governs that tenant's runs (its own entries over the defaults). Every tenant has the
    # defaults' tools, so a tool missing for a tenant is missing from the defaults (E001 above).
    for tenant_id in sorted({entry.tenant_id for entry in rows if entry.tenant_id is not None}):
        own: dict[str, EntryLike] = {entry.tool: entry for entry in rows if entry.tenant_id == tenant_id}
        errors += broken_mappings(own, tools)
        errors += [e for e in irreversible_first({**defaults, **own}, flows) if e not in errors]
    return errors
