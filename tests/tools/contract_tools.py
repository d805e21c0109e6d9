"""The guide's own connector (docs/integrating.md, the `# myapp/connectors.py` block), loaded
from the page as written and declared as a tool: test_integrating_contract.py runs it through
reconciliation against a provider of its own. `PROVIDER_URL` is set by the test."""

from __future__ import annotations

import re
import types
from typing import Any

from devtools.processes import ROOT
from tools.registry import ToolSpec

PROVIDER_URL = "http://127.0.0.1:9"  # set by the test before the registry is built
GUIDE = ROOT / "docs" / "integrating.md"


def guide_module() -> types.ModuleType:
    """The block named `# myapp/connectors.py`, executed as a module of its own."""
    found = re.search(r"^```python\n(# myapp/connectors\.py\n.*?)^```$", GUIDE.read_text(), re.S | re.M)
    assert found, "docs/integrating.md has no `# myapp/connectors.py` block"
    module = types.ModuleType("myapp_connectors")
    exec(compile(found[1], str(GUIDE), "exec"), module.__dict__)  # noqa: S102 - our own page
    return module


def tools() -> list[ToolSpec]:
    connector: Any = guide_module().OrderCancelConnector(
        base_url=PROVIDER_URL, path="orders/{order_id}/cancel"
    )
    return [
        ToolSpec(
            name="cancel_order",
            kind="write",
            args_schema={"type": "object", "required": ["order_id"]},
            connector=connector,
        )
    ]
