"""docs/architecture.md names the code as it is: every file it names exists, and every dotted
name of Seam's code it gives (`journal.services.perform`) is a module, an attribute of one, or
the name of a Celery task. A map that points at code that moved is worse than none."""

from __future__ import annotations

import importlib
import re
import tomllib

import pytest
from django.apps import apps

from devtools.processes import ROOT

DOC = ROOT / "docs" / "architecture.md"
# Seam's packages, as the import contracts name them (pyproject.toml).
PACKAGES = tuple(
    tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
)
# Names the page gives that are not Seam's code: Django's and a field of the handover's JSON.
NOT_CODE = {"transaction.on_commit", "next_action.code"}


def _named(pattern: str) -> list[str]:
    return sorted(set(re.findall(pattern, DOC.read_text())))


def _task_names() -> set[str]:
    names: set[str] = set()
    for tasks in ROOT.glob("*/tasks.py"):
        names.update(re.findall(r'name="([a-z_]+\.[a-z_.]+)"', tasks.read_text()))
    return names


def _permission_names() -> set[str]:
    """The permissions the models declare, as Django names them: `app_label.codename`."""
    return {
        f"{model._meta.app_label}.{codename}"
        for model in apps.get_models()
        for codename, _ in model._meta.permissions
    }


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


@pytest.mark.parametrize("path", _named(r"`((?:[a-z_]+/)+[a-z_]+\.py)`"))
def test_every_path_the_page_names_exists(path: str) -> None:
    assert (ROOT / path).is_file(), f"docs/architecture.md names {path}, which does not exist"


@pytest.mark.parametrize("name", _named(r"`([a-z_]+\.py)`"))
def test_every_file_name_the_page_gives_is_a_file_of_the_product(name: str) -> None:
    found = [path for package in PACKAGES for path in (ROOT / package).rglob(name)]
    assert found or (ROOT / name).is_file(), f"docs/architecture.md names {name}: no such file"


@pytest.mark.parametrize(
    "dotted",
    [
        name
        for name in _named(r"`([a-z_]+(?:\.[a-z_]+)+)`")
        if name.split(".")[0] in PACKAGES and name not in NOT_CODE and not name.endswith(".py")
    ],
)
def test_every_dotted_name_is_code_or_a_task(dotted: str) -> None:
    assert _resolves(dotted) or dotted in _task_names() | _permission_names(), (
        f"docs/architecture.md names {dotted}, which is neither a module, an attribute, a task nor "
        "a permission"
    )
