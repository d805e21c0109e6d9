"""A subscription provider without idempotency keys, as many are: its state is a SQLite file,
and cancelling a subscription the customer already cancelled answers success with the time it
was cancelled, not an error. Its connector reports that time as the send's evidence, so the
engine can tell a cancellation the run caused from one the customer made before the run
(issue 29, finding 7). Its tools are declared by `tools()` below (tests.support.plugins); the file is
$SUBSCRIPTIONS_DB."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from journal.tool_errors import DispatchResult, ToolError
from tools.connectors import LookupQuery, LookupResult, NotPerformed, Performed, Unknown
from tools.registry import ToolSpec

SCHEMA = "CREATE TABLE IF NOT EXISTS subscription (id TEXT PRIMARY KEY, status TEXT, changed_at TEXT)"


class Subscriptions:
    """The provider's own state: each subscription's status and when it last changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._db() as db:
            db.execute(SCHEMA)

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, isolation_level=None)

    def put(self, subscription: str, status: str, changed_at: datetime) -> None:
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO subscription VALUES (?, ?, ?)",
                (subscription, status, changed_at.isoformat()),
            )

    def get(self, subscription: str) -> tuple[str, datetime] | None:
        with self._db() as db:
            row = db.execute(
                "SELECT status, changed_at FROM subscription WHERE id = ?", (subscription,)
            ).fetchone()
        return None if row is None else (row[0], datetime.fromisoformat(row[1]))

    def set_status(self, subscription: str, status: str) -> datetime:
        """Move the subscription to `status`; when it got there (now, or earlier when it already
        was so: the provider answers success either way)."""
        current = self.get(subscription)
        if current is None:
            raise ToolError("invalid_input", f"no subscription {subscription}")
        if current[0] == status:
            return current[1]
        now = datetime.now(UTC)
        self.put(subscription, status, now)
        return now


@dataclass(frozen=True)
class StatusConnector:
    """Sets a subscription's status; the answer's time is the evidence."""

    status: str

    def perform(self, args: Mapping[str, Any], idempotency_key: str) -> DispatchResult:
        subscription = str(args["subscription"])
        at = store().set_status(subscription, self.status)
        return DispatchResult(
            summary=f"subscription {subscription} {self.status}",
            receipt={"subscription": subscription, "changed_at": at.isoformat()},
            evidence_at=at,
        )

    def lookup(self, query: LookupQuery) -> LookupResult:
        current = store().get(str(query.args["subscription"]))
        if current is None:
            return Unknown(reason="no such subscription")
        if current[0] != self.status:
            return NotPerformed()
        return Performed(receipt={"subscription": query.args["subscription"]}, evidence_at=current[1])


def store() -> Subscriptions:
    return Subscriptions(Path(os.environ["SUBSCRIPTIONS_DB"]))


ARGS = {
    "type": "object",
    "required": ["subscription"],
    "properties": {"subscription": {"type": "string"}},
    "additionalProperties": False,
}


def tools() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="cancel_subscription",
            kind="write",
            args_schema=ARGS,
            connector=StatusConnector("cancelled"),
            receipt_fields=("subscription", "changed_at"),
        ),
        ToolSpec(
            name="reactivate_subscription",
            kind="write",
            args_schema=ARGS,
            connector=StatusConnector("active"),
            receipt_fields=("subscription", "changed_at"),
        ),
    ]
