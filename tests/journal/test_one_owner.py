"""One owner per write: a run's and an escalation's rows are written only by the journal
(journal.services and journal.transitions: the status moves, the version bumps, the
escalations opened and resolved). This test reads the product's code outside journal/ and
fails on any ORM write to those models there: a copy of the owner's write is how a version
bump or an escalation's resolution went missing before."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from devtools.processes import ROOT

OWNED = {"Run", "Escalation"}
WRITES = {"update", "create", "bulk_create", "bulk_update", "delete", "get_or_create", "update_or_create"}
# The product above the journal: every package of the import contracts (pyproject.toml) but the
# journal itself and what stands outside the product (the demo's sandbox and scenarios drive it
# through its services; the benchmarks and development tools only start it).
OUTSIDE = {"journal", "sandbox", "scenarios", "bench", "devtools"}
PACKAGES = tuple(
    package
    for package in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "root_packages"
    ]
    if package not in OUTSIDE
)


def _root_model(node: ast.AST) -> str | None:
    """`Run` for `Run.objects.filter(...).update`: the name the chain starts from, if the chain
    goes through `.objects`."""
    through_objects = False
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            through_objects = through_objects or node.attr == "objects"
            node = node.value
        elif isinstance(node, ast.Name):
            return node.id if through_objects else None
        else:
            return None


def _writes_in(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES:
            model = _root_model(node.func.value)
            if model in OWNED:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {model}.objects….{node.func.attr}(…)")
    return found


def _product_files() -> list[Path]:
    return sorted(
        path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    )


def test_runs_and_escalations_are_written_only_by_the_journal() -> None:
    writes = [write for path in _product_files() for write in _writes_in(path)]
    assert writes == [], (
        "written outside journal/ (call journal.services or journal.transitions):\n" + "\n".join(writes)
    )


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("Run.objects.filter(pk=1).update(version=2)", ["Run"]),
        ("Escalation.objects.filter(run=r).update(resolved_at=now)", ["Escalation"]),
        ("Escalation.objects.create(run=r)", ["Escalation"]),
        ("Run.objects.filter(pk=1).values_list('status').first()", []),
        ("DeadLetter.objects.filter(pk=1).update(owner=u)", []),
        ("values.update(extra)", []),
    ],
)
def test_the_scan_finds_a_write_through_the_manager_and_nothing_else(source: str, found: list[str]) -> None:
    path = ROOT / "var" / "one_owner_probe.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source + "\n")
    try:
        assert [write.rsplit(": ", 1)[1].split(".")[0] for write in _writes_in(path)] == found
    finally:
        path.unlink()


def test_the_scan_reads_every_app_above_the_journal() -> None:
    assert {
        "console",
        "agent_api",
        "audit",
        "handover",
        "insights",
        "reconciliation",
        "compensations",
    } <= set(PACKAGES)
