"""The contract between the journal and a tool's dispatch, importable without Django so that the
REST client (handover.client) and in-process callers share it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The six classes of seed 002; each decides a different response.
ERROR_CLASSES = ("invalid_input", "conflict", "transient", "ambiguous", "permanent", "bug")


class ToolError(Exception):
    """What a dispatch raises when the downstream refused or failed, classified at the boundary
    that knows. `ambiguous` means the request may have been accepted: the intent stays open and
    is settled later by asking the downstream about its key."""

    def __init__(self, error_class: str, message: str, *, request_id: str = "") -> None:
        if error_class not in ERROR_CLASSES:
            raise ValueError(f"unknown error class {error_class!r}; expected one of {ERROR_CLASSES}")
        super().__init__(message)
        self.error_class = error_class
        self.message = message
        self.request_id = request_id


@dataclass(frozen=True)
class DispatchResult:
    """What a dispatch returns on success: a short summary and the downstream's receipt (its own
    identifiers: label, reservation id, refund id...)."""

    summary: str = ""
    receipt: dict[str, Any] = field(default_factory=dict)
    request_id: str = ""
