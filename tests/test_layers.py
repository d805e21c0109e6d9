"""The layers hold: import-linter's contracts pass, and no module reaches another of Seam's modules
from inside a function (the way a cycle between layers would be dodged). The one exception is an
AppConfig's ready(), where Django wants app modules imported once the registry is loaded."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Seam's packages: the import contracts' root packages (pyproject.toml), the benchmarks left out:
# each is a script that must configure Django (django.setup()) before it can import a model, and
# may set up its own rows as a test would.
SEAM_PACKAGES = tuple(
    package
    for package in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "root_packages"
    ]
    if package != "bench"
)


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return ["." * node.level + (node.module or "")]
    return [alias.name for alias in node.names]


def imports_inside_functions(source: str) -> Iterator[tuple[int, str, str]]:
    """(line, function, module) for each import of a Seam module made inside a function body,
    ready() excepted."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name == "ready":
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Import | ast.ImportFrom):
                for module in _imported(inner):
                    if module.startswith(".") or module.split(".")[0] in SEAM_PACKAGES:
                        yield inner.lineno, node.name, module


def _seam_modules() -> Iterator[Path]:
    # bench/ is left out: each benchmark is a script that must configure Django (django.setup())
    # before it can import a model, so its imports of Seam sit after that call, not in a cycle.
    for package in SEAM_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def test_no_module_imports_seam_code_inside_a_function() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} in {function}(): import of {module}"
        for path in _seam_modules()
        for line, function, module in imports_inside_functions(path.read_text())
    ]
    assert found == [], "move these to the top of their module:\n" + "\n".join(found)


def test_the_check_finds_an_import_hidden_in_a_function() -> None:
    source = (
        "def handover_rows(run):\n"
        "    from compensations.models import Compensation\n"
        "    return Compensation\n"
        "class HandoverConfig:\n"
        "    def ready(self):\n"
        "        from . import schema\n"
    )
    assert list(imports_inside_functions(source)) == [(2, "handover_rows", "compensations.models")]


def test_the_import_contracts_are_kept() -> None:
    linter = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(linter), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _picture_layers(markdown: str, names: set[str]) -> list[set[str]]:
    """The layers drawn in docs/architecture.md's picture, top down: one set of module names per
    row of boxes (siblings share a row)."""
    picture = markdown.split("## The layers", 1)[1].split("```", 2)[1]
    pattern = re.compile(
        r"(?<![\w.])(" + "|".join(sorted(map(re.escape, names), key=len, reverse=True)) + r")(?![\w.])"
    )
    rows: list[set[str]] = []
    for line in picture.splitlines():
        if "┌" in line:
            rows.append(set())
        elif line.lstrip().startswith("│") and rows:
            rows[-1] |= set(pattern.findall(line))
    return rows


def test_the_architecture_picture_draws_the_layers_of_the_contract() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    expected = [{name.strip() for name in layer.split("|")} for layer in layers]
    names = set().union(*expected)
    assert _picture_layers((ROOT / "docs" / "architecture.md").read_text(), names) == expected
