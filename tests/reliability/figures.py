"""Recovery times measured by the reliability tests: printed (pytest -s shows them) and appended
as JSON lines to var/reliability-figures.jsonl, from which docs/reliability.md is written."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from devtools.processes import ROOT

FIGURES = ROOT / "var" / "reliability-figures.jsonl"


def record(test: str, **figures: Any) -> None:
    line = {"test": test, "at": datetime.now(UTC).isoformat(timespec="seconds"), **figures}
    text = json.dumps(line, sort_keys=True)
    print(f"\nRELIABILITY {text}")
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    with FIGURES.open("a") as out:
        out.write(text + "\n")
        out.flush()
        os.fsync(out.fileno())
