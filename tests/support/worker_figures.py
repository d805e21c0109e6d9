"""The closing summaries' figures, from the pytest-xdist workers that gathered them to the process
that prints them. `make test` runs the suite in several workers; the recovery figure
(tests/support/recovery_figure.py) and the security tests' figures (tests/security/figures.py)
are gathered where the tests run, so each worker hands its figures over as plain values when its
session ends (`workeroutput`), and the controlling process adds them to its own as each worker
goes down, before its summary and its CI verdict. Without xdist neither hook has anything to do."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security import figures
from tests.support import recovery_figure

KEY = "seam_figures"


def pytest_sessionfinish(session: pytest.Session) -> None:
    output: dict[str, Any] | None = getattr(session.config, "workeroutput", None)
    if output is None:  # not an xdist worker
        return
    output[KEY] = {
        "recovery": [row.as_plain() for row in recovery_figure.FIGURE.rows],
        "security": figures.as_plain(),
    }


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    gathered = getattr(node, "workeroutput", {}).get(KEY)
    if gathered is None:  # the worker died before its session ended: its tests failed anyway
        return
    recovery_figure.FIGURE.rows.extend(recovery_figure.Row.from_plain(row) for row in gathered["recovery"])
    figures.add_plain(gathered["security"])
