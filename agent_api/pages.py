"""Keyset pages of a run's intents and customer messages for the REST API: each list ordered by
its time and id, a page of at most `limit` rows, and an opaque cursor naming the last row given.
The next page starts strictly after that (time, id), never at an OFFSET: a row written while a
caller walks the pages does not shift the rows still to come, so each row is given once."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Model, Q, QuerySet

from journal.models import CustomerMessage, Intent, Run

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
# Rows fetched per round trip from the export's server-side cursor.
EXPORT_CHUNK = 1000
MAX_ROW_ID = 2**63 - 1


class PageRefused(ValueError):
    """A cursor or limit the API did not give or does not take: a 400 naming the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Listing:
    """One of a run's lists: its model and the time it is ordered by (then its id)."""

    name: str
    model: type[Model]
    time_field: str

    def rows(self, run: Run) -> QuerySet[Any]:
        return self.model._default_manager.filter(run=run).order_by(self.time_field, "id")


INTENTS = Listing("intents", Intent, "intended_at")
CUSTOMER_MESSAGES = Listing("customer_messages", CustomerMessage, "told_at")


@dataclass(frozen=True)
class Page:
    rows: list[Any]
    next: str | None


def cursor_of(at: datetime, row_id: int) -> str:
    """The opaque cursor after the row (at, row_id): base64url of a JSON pair, unpadded."""
    raw = json.dumps([at.isoformat(), row_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def position_of(cursor: str) -> tuple[datetime, int]:
    """The (time, id) a cursor names; PageRefused for anything cursor_of did not write."""
    try:
        raw = base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode("ascii"))
        at_text, row_id = json.loads(raw)
        at = datetime.fromisoformat(at_text)
    except (ValueError, TypeError) as exc:  # binascii, Unicode and JSON errors are ValueErrors
        raise PageRefused("cursor", "not a cursor this API gave (use `next` as given)") from exc
    if at.tzinfo is None or type(row_id) is not int or not 0 < row_id <= MAX_ROW_ID:
        raise PageRefused("cursor", "not a cursor this API gave (use `next` as given)")
    return at, row_id


def limit_of(text: str | None) -> int:
    """The page size a query asked for: DEFAULT_LIMIT when absent, else 1 to MAX_LIMIT."""
    if text is None or text == "":
        return DEFAULT_LIMIT
    if not (text.isascii() and text.isdigit() and len(text) <= 6 and 1 <= int(text) <= MAX_LIMIT):
        raise PageRefused("limit", f"must be a whole number from 1 to {MAX_LIMIT}")
    return int(text)


def page(listing: Listing, run: Run, *, cursor: str | None = None, limit: int = DEFAULT_LIMIT) -> Page:
    """The rows after `cursor` (from the first without one), at most `limit`, in one query."""
    rows = listing.rows(run)
    if cursor:
        at, row_id = position_of(cursor)
        field = listing.time_field
        rows = rows.filter(Q(**{f"{field}__gt": at}) | Q(**{field: at, "id__gt": row_id}))
    found = list(rows[: limit + 1])
    if len(found) <= limit:
        return Page(found, None)
    last = found[limit - 1]
    return Page(found[:limit], cursor_of(getattr(last, listing.time_field), last.pk))


def every_row(listing: Listing, run: Run) -> Iterator[Any]:
    """Every row of the list in order, read through a server-side cursor in chunks."""
    return listing.rows(run).iterator(chunk_size=EXPORT_CHUNK)
