"""What the framework agents under test share: the agent modules that docs/integrating.md shows
(loaded from the page itself, so the page's code is the code under test), the script their fake
models follow, and the test's crash point. The agents run in child processes
(`python -m tests.clients.langgraph_agent`, …) that a test kills."""

from __future__ import annotations

import os
import re
import time
import types
from typing import Any

import requests

from devtools.processes import ROOT

DOC = ROOT / "docs" / "integrating.md"
# The model's script: the balance (read-only), two points awards, then a final answer.
AWARDS = [
    {"customer": "C-7", "points": 100, "reference": "GD-AG-1"},
    {"customer": "C-7", "points": 250, "reference": "GD-AG-2"},
]
FINAL_ANSWER = "Both awards are booked."


def doc_file(name: str) -> str:
    """The page's ```python block that starts `# NAME: …`."""
    for block in re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.DOTALL | re.MULTILINE):
        if block.startswith(f"# {name}:"):
            return str(block)
    raise LookupError(f"docs/integrating.md shows no {name}")


def doc_module(name: str) -> types.ModuleType:
    """The page's `name` block, executed as a module, with the test's crash point in its HTTP calls."""
    module = types.ModuleType(name.removesuffix(".py"))
    exec(compile(doc_file(name), f"docs/integrating.md ({name})", "exec"), module.__dict__)  # noqa: S102
    module.requests = HoldingRequests()  # type: ignore[attr-defined]
    return module


class HoldingRequests:
    """`requests` as the page's tools use it, except that the POST carrying the reference named by
    HOLD_AFTER_REFERENCE is answered and then never returns: the downstream booked it, and the
    process is killed before its outcome is recorded."""

    def __getattr__(self, name: str) -> Any:
        return getattr(requests, name)

    def post(self, url: str, **kwargs: Any) -> requests.Response:
        response = requests.post(url, **kwargs)  # noqa: S113 - the page's call passes its timeout
        if (kwargs.get("json") or {}).get("reference") == os.environ.get("HOLD_AFTER_REFERENCE"):
            time.sleep(3600)
        return response
