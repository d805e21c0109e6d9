"""A migration does what it did when it was written: it imports Django, the standard library and
third-party packages, never Seam's own code, whose functions and data go on changing (and moving)
after the migration has run on some databases and not yet on others. A data migration copies the
data it writes into itself and reaches models through `apps.get_model`.

One reference to Seam's code stays, because Django needs it: a field's validator, which
makemigrations names by its import path so that it can compare the field with the model's. Such
an import is allowed only where every use of it is inside a field's `validators=[...]`; the
validator is never called by the migration."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _project_packages() -> frozenset[str]:
    """The names this repository defines at the top of the import path: its apps and packages,
    its root modules, and the client packages under clients/."""
    names = {path.stem for path in ROOT.glob("*.py")}
    names |= {
        path.name
        for path in ROOT.iterdir()
        if path.is_dir() and not path.name.startswith(".") and any(path.glob("*.py"))
    }
    names |= {path.name for path in ROOT.glob("clients/*/src/*") if path.is_dir()}
    return frozenset(names)


PROJECT = _project_packages()


def _migrations() -> list[Path]:
    return sorted(
        path
        for path in ROOT.rglob("migrations/*.py")
        if path.name != "__init__.py"
        and not any(part.startswith(".") or part == "node_modules" for part in path.relative_to(ROOT).parts)
    )


def _uses_outside_validators(tree: ast.AST, name: str) -> list[int]:
    """Lines where `name` is used other than inside a `validators=` keyword argument."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "validators":
            inside |= {id(inner) for inner in ast.walk(node.value)}
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and node.id == name and id(node) not in inside
    ]


def project_imports(source: str) -> list[str]:
    """Each import of the repository's code in a migration's source that is not only a field's
    validator, as "line N: module"."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if node.level or module.split(".")[0] in PROJECT:
                found.append(f"line {node.lineno}: from {module} import ...")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top not in PROJECT:
                    continue
                bound = alias.asname or top
                if alias.asname is None and _uses_outside_validators(tree, bound) == []:
                    continue  # `import app.models`, named only as a field's validator
                found.append(f"line {node.lineno}: import {alias.name}")
    return found


def test_the_migrations_are_found_and_the_project_is_known() -> None:
    assert len(_migrations()) > 40
    assert {"journal", "compensations", "reconciliation", "handover", "sandbox", "config"} <= PROJECT
    assert not PROJECT & {"django", *sys.stdlib_module_names}


@pytest.mark.parametrize("path", _migrations(), ids=lambda path: str(path.relative_to(ROOT)))
def test_a_migration_imports_no_project_code(path: Path) -> None:
    assert project_imports(path.read_text()) == [], (
        f"{path.relative_to(ROOT)} imports Seam's code: copy what it needs into the migration"
    )


def test_the_check_finds_an_import_inside_a_data_migrations_function() -> None:
    source = (
        "from django.db import migrations\n"
        "def forward(apps, schema_editor):\n"
        "    from compensations.defaults import catalogue_grant_roles\n"
        "    catalogue_grant_roles()\n"
    )
    assert project_imports(source) == ["line 3: from compensations.defaults import ..."]
    assert project_imports("from .helpers import seed\n") == ["line 1: from .helpers import ..."]


def test_a_validator_named_by_makemigrations_passes_and_a_call_of_it_does_not() -> None:
    field = "models.CharField(max_length=9, validators=[console.models.validate_ticket_url_template])"
    named = f"import console.models\nfrom django.db import models\nfield = {field}\n"
    called = named + "console.models.validate_ticket_url_template('x')\n"
    assert project_imports(named) == []
    assert project_imports(called) == ["line 1: import console.models"]


def other_database_writes(source: str) -> list[str]:
    """Each place in a migration's source that reads or writes rows without naming the database
    being migrated: a manager call not through `.using(...)`, or `create_permissions` without
    `using=`. Such a call goes to the default database whichever one `migrate --database` names,
    so a second database (the reconcile benchmark's sweep database, a replica being built)
    fails or, worse, changes the default one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            manager = node.value
            if manager.attr == "objects" and node.attr not in {"using", "db_manager"}:
                found.append(f"line {node.lineno}: .objects.{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "create_permissions"
            and not any(keyword.arg == "using" for keyword in node.keywords)
        ):
            found.append(f"line {node.lineno}: create_permissions without using=")
    return sorted(found, key=lambda place: int(place.split(":")[0].removeprefix("line ")))


@pytest.mark.parametrize("path", _migrations(), ids=lambda path: str(path.relative_to(ROOT)))
def test_a_data_migration_writes_to_the_database_being_migrated(path: Path) -> None:
    assert other_database_writes(path.read_text()) == [], (
        f"{path.relative_to(ROOT)}: use schema_editor.connection.alias (`.objects.using(alias)`)"
    )


def test_the_check_finds_a_manager_call_on_the_default_database() -> None:
    source = (
        "def forward(apps, schema_editor):\n"
        "    alias = schema_editor.connection.alias\n"
        "    apps.get_model('journal', 'Tenant').objects.update(key_namespace='x')\n"
        "    apps.get_model('journal', 'Tenant').objects.using(alias).update(key_namespace='x')\n"
        "    create_permissions(config, apps=apps)\n"
        "    create_permissions(config, apps=apps, using=alias)\n"
    )
    assert other_database_writes(source) == [
        "line 3: .objects.update",
        "line 5: create_permissions without using=",
    ]
