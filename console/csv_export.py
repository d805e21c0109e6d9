"""Every CSV Seam writes goes through here, so that no cell runs when a spreadsheet opens it.

A cell whose text begins with `=`, `+`, `-`, `@`, a tab or a carriage return is taken as a
formula by Excel, LibreOffice and Google Sheets (OWASP, "CSV Injection"). Ticket ids, notes and
customer messages come from agents and staff, so any of them can carry `=HYPERLINK(...)`. Such a
cell is written with a leading apostrophe: the spreadsheet shows the text and runs nothing, and a
script reading the file back sees the apostrophe and can strip it.

Use `csv_writer(file)` in place of `csv.writer(file)`, or `csv_streaming_response(...)` for a
download streamed row by row.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from django.http import StreamingHttpResponse

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """The value as it may stand in a cell: text a spreadsheet would run gets a leading
    apostrophe; numbers and everything else pass unchanged (csv writes them with str())."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


class _Writable(Protocol):
    def write(self, value: str, /) -> Any: ...


class SafeCsvWriter:
    """csv.writer whose every cell has passed csv_cell. writerow returns what the file's write
    returned, as csv.writer does (the streaming response relies on it)."""

    def __init__(self, file: _Writable, **fmtparams: Any) -> None:
        self._writer = csv.writer(file, **fmtparams)

    def writerow(self, row: Iterable[object]) -> Any:
        return self._writer.writerow([csv_cell(value) for value in row])

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(file: _Writable, **fmtparams: Any) -> SafeCsvWriter:
    return SafeCsvWriter(file, **fmtparams)


class _Echo:
    """A file whose write hands the formatted line back, for streaming."""

    def write(self, value: str) -> str:
        return value


def csv_streaming_response(
    *, filename: str, header: Iterable[object], rows: Iterable[Iterable[object]]
) -> StreamingHttpResponse:
    """A CSV download streamed row by row, so a long export never sits in memory. `rows` may be
    a generator: it is consumed only as the response is sent."""
    writer = csv_writer(_Echo())

    def lines() -> Iterator[str]:
        yield writer.writerow(header)
        for row in rows:
            yield writer.writerow(row)

    response = StreamingHttpResponse(lines(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
