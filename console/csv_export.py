"""Every CSV Seam writes goes through here, so that no cell runs when a spreadsheet opens it, in
any locale.

A cell whose text begins with `=`, `+`, `-`, `@`, a tab or a carriage return is taken as a
formula by Excel, LibreOffice and Google Sheets (OWASP, "CSV Injection"). Ticket ids, notes and
customer messages come from agents and staff, so any of them can carry `=HYPERLINK(...)`. Such a
cell is written with a leading apostrophe: the spreadsheet shows the text and runs nothing, and a
script reading the file back sees the apostrophe and can strip it.

That covers the start of a cell, but not where a spreadsheet thinks a cell starts (issue 33,
item 5). Where the locale's list separator is `;` (most of Europe), or the file is opened as
tab-separated, Seam's commas separate nothing and the quotes around a cell count only at the
start of a line; a `;` or a tab inside a cell then starts a new cell there, and a line break a
new row, whatever the quotes say. `'-1-1;=2*3` is two cells there, the second `=2*3`. So:

- every cell is quoted (csv.QUOTE_ALL), so that where commas do separate, a `;`, a tab, a line
  break or a quote inside a cell splits nothing;
- inside a cell, where a `;`, a tab or a line break (and any spaces after it) is followed by a
  formula's first character or a quote, an apostrophe goes in before that character, so the
  piece a `;` or tab spreadsheet makes of it starts with the apostrophe too: `a;=2*3` is written
  `a;'=2*3`. A comma needs none: where commas separate, the quotes hold.

Use `csv_writer(file)` in place of `csv.writer(file)`, or `csv_streaming_response(...)` for a
download streamed row by row.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from django.http import StreamingHttpResponse

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
# A `;`, a tab or a line break, and the spaces after it, where a formula's first character or a
# quote follows: where a spreadsheet would start a new cell that runs.
_PIECE_THAT_WOULD_RUN = re.compile(r"([;\t\r\n] *)(?=[=+\-@\t\r\"])")


def csv_cell(value: object) -> object:
    """The value as it may stand in a cell: text a spreadsheet would run, from its start or from
    a `;`, a tab or a line break inside it, gets an apostrophe before it; numbers and everything
    else pass unchanged (csv writes them with str())."""
    if not isinstance(value, str):
        return value
    value = _PIECE_THAT_WOULD_RUN.sub(r"\1'", value)
    return "'" + value if value.lstrip(" ").startswith(FORMULA_PREFIXES) else value


class _Writable(Protocol):
    def write(self, value: str, /) -> Any: ...


class SafeCsvWriter:
    """csv.writer whose every cell has passed csv_cell and is quoted. writerow returns what the
    file's write returned, as csv.writer does (the streaming response relies on it)."""

    def __init__(self, file: _Writable, **fmtparams: Any) -> None:
        if fmtparams.get("quoting", csv.QUOTE_ALL) != csv.QUOTE_ALL:
            raise ValueError("Seam's CSV quotes every cell: a bare cell splits where ';' separates.")
        self._writer = csv.writer(file, **{**fmtparams, "quoting": csv.QUOTE_ALL})

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
