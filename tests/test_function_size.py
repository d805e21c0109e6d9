"""No function of the product is over 60 lines or of complexity over 15 without a comment saying
why (issue 31): a long or branching function is split into named steps that explain themselves,
or, where it is genuinely one piece (a flat declaration, a linear procedure whose steps share
many locals), carries a comment line inside it that starts `# One piece:` and says why.

The product is every git-tracked Python file outside tests/, bench/, docs/, examples/, scripts/
and migrations folders (which are not the code a reader maintains).

The measure, from the source alone (the standard library's `ast`):
- lines: from the `def` line to the function's last line, both included (decorators excluded,
  nested functions and comments included);
- complexity: 1, plus 1 for each `if`, `elif`, `for`, `while`, `except`, `with`, `assert`,
  comprehension `for`, conditional expression and `match` case anywhere inside the function
  (nested functions included), plus 1 for each operand beyond the first of an `and` / `or`."""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from pathlib import Path

from devtools.processes import ROOT

MAX_LINES = 60
MAX_COMPLEXITY = 15
SAYS_WHY = "# One piece:"
NOT_PRODUCT = ("tests/", "bench/", "docs/", "examples/", "scripts/")
BRANCHES = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.IfExp,
    ast.ExceptHandler,
    ast.With,
    ast.AsyncWith,
    ast.Assert,
    ast.comprehension,
    ast.match_case,
)


def product_files() -> list[Path]:
    tracked = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [
        ROOT / name
        for name in tracked
        if not name.startswith(NOT_PRODUCT) and "/migrations/" not in f"/{name}" and (ROOT / name).exists()
    ]


def complexity(function: ast.AST) -> int:
    count = 1
    for node in ast.walk(function):
        if isinstance(node, BRANCHES):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
    return count


def says_why(lines: list[str], function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = lines[function.lineno - 1 : function.end_lineno]
    return any(line.strip().startswith(SAYS_WHY) for line in body)


def oversized(path: Path) -> Iterator[str]:
    source = path.read_text()
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        branches = complexity(node)
        if (length > MAX_LINES or branches > MAX_COMPLEXITY) and not says_why(lines, node):
            where = path.relative_to(ROOT)
            yield f"{where}:{node.lineno} {node.name}: {length} lines, complexity {branches}"


def test_the_measure_reads_the_product() -> None:
    files = {path.relative_to(ROOT).as_posix() for path in product_files()}
    assert "journal/services.py" in files
    assert not any(name.startswith(NOT_PRODUCT) or "/migrations/" in name for name in files)


def test_the_measure_counts_branches_and_boolean_operands() -> None:
    function = ast.parse(
        "def f(a, b):\n"
        "    if a and b or a:\n"  # if: 1; `(a and b) or a`: 1 + 1
        "        return [x for x in a if x]\n"  # comprehension: 1 (its `if` is not a node of its own)
        "    return a if b else None\n"  # conditional expression: 1
    ).body[0]
    assert complexity(function) == 1 + 1 + 2 + 1 + 1


def test_no_function_is_over_the_limits_without_saying_why() -> None:
    found = [problem for path in product_files() for problem in oversized(path)]
    assert not found, (
        f"over {MAX_LINES} lines or complexity {MAX_COMPLEXITY}: split into named steps, or put a "
        f"'{SAYS_WHY} <why>' comment line inside the function:\n" + "\n".join(found)
    )
