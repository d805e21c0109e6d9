"""Measure how the kill matrices' runs ended at a past commit: the recovery figure's "before"
column (issue 30; tests/support/recovery_figure.py).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<a database of yours> \\
        .venv/bin/python -m devtools.measure_recovery_baseline 03e6b2c

checks the commit out in a git worktree of its own (removed afterwards), runs that commit's own
kill-matrix tests there — chaos-marked or not, selected by devtools/recovery_baseline_plugin.py,
which also reads each kill point's run before its database is flushed — with this venv's
pytest, and writes tests/support/recovery_baseline.json: the commit, the date, this command,
per matrix the kill points by machine, to a person and left open, and each point's ending by
pytest node id (the figure compares the same points). The built-in matrix alone takes several
minutes on 2 cores. `--lines FILE` writes the JSON from a plugin's earlier output instead."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devtools.processes import ROOT
from devtools.recovery_baseline_plugin import MATRICES

PLUGIN = Path(__file__).with_name("recovery_baseline_plugin.py")
OUT = ROOT / "tests" / "support" / "recovery_baseline.json"
RULE = (
    "by the figure's how_ended: to a person if the run awaits one or has an escalation, left open "
    "if still running, by machine otherwise (completed, compensated, cancelled); read after each "
    "test's call, before its database is flushed"
)


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def run_matrices(commit: str, lines: Path, workdir: Path) -> int:
    """The commit's kill-matrix tests in a worktree under `workdir`; the plugin's lines to `lines`."""
    checkout, plugin_dir = workdir / "checkout", workdir / "plugin"
    plugin_dir.mkdir()
    shutil.copy(PLUGIN, plugin_dir / PLUGIN.name)
    git("worktree", "add", "--detach", str(checkout), commit)
    try:
        files = sorted({path for path, _ in MATRICES if (checkout / path).exists()})
        env = {
            **os.environ,
            "RECOVERY_BASELINE_LINES": str(lines),
            # The checkout's packages and client before any installed copy (the plugin checks).
            "PYTHONPATH": os.pathsep.join(
                [str(plugin_dir), str(checkout), str(checkout / "clients" / "python" / "src")]
            ),
        }
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", PLUGIN.stem, "-q", *files]
        return subprocess.run(command, cwd=checkout, env=env, check=False).returncode
    finally:
        git("worktree", "remove", "--force", str(checkout))


def baseline(commit: str, lines: Path, command: str) -> dict[str, Any]:
    """The JSON: per matrix its counts, per point (the last line of each node id) its ending."""
    points: dict[str, dict[str, Any]] = {}
    for line in lines.read_text().splitlines():
        measured = json.loads(line)
        points[measured["nodeid"]] = measured
    matrices: dict[str, Counter[str]] = {}
    for point in points.values():
        matrices.setdefault(point["matrix"], Counter())[point["ended"]] += 1
    return {
        "commit": git("rev-parse", commit),
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command,
        "rule": RULE,
        "matrices": {
            name: {
                "kill points": sum(ended.values()),
                "by machine": ended["machine"],
                "to a person": ended["person"],
                "left open": ended["open"],
            }
            for name, ended in sorted(matrices.items())
        },
        "tests not passed": sorted(nodeid for nodeid, p in points.items() if p["test"] != "passed"),
        "points": {nodeid: points[nodeid]["ended"] for nodeid in sorted(points)},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commit", nargs="?", default="03e6b2c")
    parser.add_argument("--lines", type=Path, help="build the JSON from this plugin output, run nothing")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if "DATABASE_URL" not in os.environ and not args.lines:
        parser.error("set DATABASE_URL to a database of your own (pytest-django makes test_<name>)")
    command = f"python -m devtools.measure_recovery_baseline {args.commit}"
    with tempfile.TemporaryDirectory(prefix="recovery-baseline-") as tmp:
        lines = args.lines or Path(tmp) / "lines.jsonl"
        status = 0 if args.lines else run_matrices(args.commit, lines, Path(tmp))
        measured = baseline(args.commit, lines, command)
    args.out.write_text(json.dumps(measured, indent=1) + "\n")
    print(f"{args.out}: {json.dumps(measured['matrices'])}")
    if measured["tests not passed"]:
        print(f"not passed at {args.commit}: {measured['tests not passed']}", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
