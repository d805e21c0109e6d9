"""Figures the security tests gather while they run, printed in pytest's closing summary (by
tests/security/conftest.py) for docs/reliability.md."""

from __future__ import annotations

from collections import Counter
from typing import Any

# API fuzzing: operation label → requests sent, and of those, refused with a status >= 400.
FUZZ_TRIED: Counter[str] = Counter()
FUZZ_REFUSED: Counter[str] = Counter()
# The access matrix: (URL patterns, personas, requests made).
MATRIX: dict[str, int] = {}
# The console's fuzzing (test_page_fuzz): URLs, routes, personas, parameters, hostile values,
# requests made, and the responses by status.
PAGE_FUZZ: dict[str, Any] = {}
# The admin's fuzzing (test_page_fuzz): models, requests made, and the responses by status.
ADMIN_FUZZ: dict[str, Any] = {}
# The outbound guard's fuzzing (test_outbound_webhooks): spellings of addresses inside the
# network tried, admin forms that saved one, and requests the listener heard.
OUTBOUND_FUZZ: dict[str, int] = {}


def as_plain() -> dict[str, Any]:
    """Every figure as plain values, for a pytest-xdist worker to send (add_plain takes them in)."""
    return {
        "fuzz_tried": dict(FUZZ_TRIED),
        "fuzz_refused": dict(FUZZ_REFUSED),
        "matrix": MATRIX,
        "page_fuzz": PAGE_FUZZ,
        "admin_fuzz": ADMIN_FUZZ,
        "outbound_fuzz": OUTBOUND_FUZZ,
    }


def add_plain(plain: dict[str, Any]) -> None:
    """Add a worker's figures to this process's: counts add up; each of the other figures comes
    from one test module, which runs in one worker."""
    FUZZ_TRIED.update(plain["fuzz_tried"])
    FUZZ_REFUSED.update(plain["fuzz_refused"])
    MATRIX.update(plain["matrix"])
    PAGE_FUZZ.update(plain["page_fuzz"])
    ADMIN_FUZZ.update(plain["admin_fuzz"])
    OUTBOUND_FUZZ.update(plain["outbound_fuzz"])
