"""What the compensations app sets up itself: the staff roles' catalogue permissions (granted by
migration 0003 through `catalogue_grant_roles`), and `catalogue_seed`, which writes a list of
catalogue entries where a tool has none (an entry an admin has edited is never overwritten).

The product ships no catalogue entries: they describe a deployment's own tools, so an operator
writes them in the admin, or declares them in code as `CatalogueEntrySpec`s returned by
`catalogue()` in an installed app's `seam.py` (tools.discovery; `catalogue_declared`), and seeds
them with `manage.py seam_seed`. The demo's entries, for the sandbox's tools, are the sandbox
app's (sandbox/seam.py), declared the same way and also seeded when the demo's database is
migrated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from django.contrib.auth.models import Group, Permission
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from journal.tenancy import default_row
from tools import discovery

from .models import CatalogueEntry, Reversibility


@dataclass(frozen=True)
class CatalogueEntrySpec:
    """One write tool's undo, declared in code: a CatalogueEntry row's fields (see its
    docstring). An unknown reversibility is refused when declared, not when seeded."""

    tool: str
    description: str
    reversibility: str
    compensating_tool: str = ""
    argument_mapping: Mapping[str, str] = field(default_factory=dict)
    until_condition: str = ""
    deadline_field: str = ""
    loss: str = ""
    staff_notes: str = ""

    def __post_init__(self) -> None:
        if self.reversibility not in Reversibility.values:
            raise ValueError(
                f"{self.tool}: reversibility {self.reversibility!r} is not one of {', '.join(Reversibility.values)}"
            )

    def as_fields(self) -> dict[str, Any]:
        fields = asdict(self)
        fields["argument_mapping"] = dict(self.argument_mapping)
        return fields


def catalogue_declared() -> list[CatalogueEntrySpec]:
    """Every entry declared by the installed apps' seam modules, each `catalogue()` returning a
    list of CatalogueEntrySpec. A tool declared twice is refused."""
    entries: dict[str, CatalogueEntrySpec] = {}
    for module_name, entry in discovery.declared("catalogue", CatalogueEntrySpec):
        if entry.tool in entries:
            raise ValueError(f"the catalogue entry of {entry.tool} is declared twice ({module_name})")
        entries[entry.tool] = entry
    return list(entries.values())


# The staff roles and what they may do with the catalogue.
ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "support_staff": ("view_catalogueentry",),
    "team_lead": ("view_catalogueentry",),
    "admin": ("view_catalogueentry", "add_catalogueentry", "change_catalogueentry", "delete_catalogueentry"),
}


def catalogue_seed(
    entries: Iterable[CatalogueEntrySpec | Mapping[str, Any]],
    *,
    model: Any = None,
    history_model: Any = None,
    using: str = DEFAULT_DB_ALIAS,
) -> int:
    """Create each default entry (no tenant) whose tool has none; edited (or deliberately different) entries are
    kept. Each created entry gets its first history row, so the first edit shows old and new
    values. (The real model writes it itself; a migration's or a post_migrate handler's
    historical model needs `history_model`.) Returns how many entries were created."""
    if model is None:
        model = CatalogueEntry
    default = default_row(model)  # seeds are the defaults (no tenant)
    created_count = 0
    for entry in entries:
        fields = entry.as_fields() if isinstance(entry, CatalogueEntrySpec) else dict(entry)
        row, created = model.objects.using(using).get_or_create(
            tool=fields.pop("tool"), **default, defaults=fields
        )
        created_count += created
        if created and history_model is not None:
            history_model.objects.using(using).create(
                **{f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields},
                history_date=timezone.now(),
                history_type="+",
                history_change_reason="default catalogue",
            )
    return created_count


@dataclass(frozen=True)
class DeclarationDiffers:
    """A declaration (a catalogue entry, a task policy) whose stored default row holds other
    values: `fields` maps each differing field to (declared, stored). seam_seed reports it and
    applies it only when asked (its --update NAME, --update-all), or an admin edits the row."""

    kind: str  # "catalogue entry", "task policy"
    name: str  # the tool, the task type
    fields: dict[str, tuple[Any, Any]]
    admin_path: str  # the stored row's admin change page

    def words(self) -> str:
        differs = "; ".join(
            f"{name}: declared {declared!r}, stored {stored!r}"
            for name, (declared, stored) in self.fields.items()
        )
        return f"{self.kind} {self.name} differs from its declaration ({differs})"


def declaration_differences(
    declared: Mapping[str, Any], row: Any, *, kind: str, name: str, admin_path: str
) -> DeclarationDiffers | None:
    """How `row` differs from the `declared` fields (a spec's as_fields without its name): None
    when it holds them all."""
    fields = {
        field: (value, getattr(row, field))
        for field, value in declared.items()
        if getattr(row, field) != value
    }
    return DeclarationDiffers(kind=kind, name=name, fields=fields, admin_path=admin_path) if fields else None


def declaration_apply(row: Any, differs: DeclarationDiffers, *, reason: str) -> None:
    """Overwrite the row's differing fields with the declared values, kept in its history
    (django-simple-history) with `reason`."""
    for name, (declared, _stored) in differs.fields.items():
        setattr(row, name, declared)
    row._change_reason = reason
    row.save()


def declared_differences(
    specs: Iterable[Any], *, stored: Iterable[Any], key: str, kind: str, admin: str
) -> list[tuple[Any, DeclarationDiffers]]:
    """Each declared spec whose stored default row (no tenant) differs from it, with how: specs
    and rows are matched on their `key` field, and each difference names the row's admin page
    (`admin`, e.g. "compensations/catalogueentry"). A spec with no stored row is not listed
    (seeding creates it)."""
    rows = {getattr(row, key): row for row in stored}
    found = []
    for spec in specs:
        fields = spec.as_fields()
        name = fields.pop(key)
        row = rows.get(name)
        if row is None:
            continue
        differs = declaration_differences(
            fields, row, kind=kind, name=name, admin_path=f"/admin/{admin}/{row.pk}/change/"
        )
        if differs is not None:
            found.append((row, differs))
    return found


def catalogue_differences(
    entries: Iterable[CatalogueEntrySpec],
) -> list[tuple[CatalogueEntry, DeclarationDiffers]]:
    """Each declared entry whose stored default (no tenant) differs from it, with how."""
    return declared_differences(
        entries,
        stored=CatalogueEntry.objects.defaults(),
        key="tool",
        kind="catalogue entry",
        admin="compensations/catalogueentry",
    )


def catalogue_grant_roles(group_model: Any = None, permission_model: Any = None) -> None:
    """Give each staff role its catalogue permissions, creating the role's group if missing.
    Support staff and team leads read the catalogue; admins edit it. Only adds permissions."""
    if group_model is None or permission_model is None:
        group_model, permission_model = Group, Permission
    for group_name, codenames in ROLE_PERMISSIONS.items():
        group, _ = group_model.objects.get_or_create(name=group_name)
        permissions = permission_model.objects.filter(
            content_type__app_label="compensations", codename__in=codenames
        )
        missing = set(codenames) - {p.codename for p in permissions}
        if missing:
            raise LookupError(f"permissions not created yet: {', '.join(sorted(missing))}")
        group.permissions.add(*permissions)
