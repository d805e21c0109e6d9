"""CSV downloads of the console (the audit trail, the insights tables), streamed, every text cell
neutralised against spreadsheet formulas (OWASP "CSV injection"): a cell that begins with `=`,
`+`, `-`, `@`, a tab or a carriage return gets a leading apostrophe, so a spreadsheet shows it as
text instead of evaluating it. Numbers are written as they are: a count or a duration is data,
and a negative number is a number, not a formula."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from typing import Any

from django.http import StreamingHttpResponse

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """The cell as written: text that a spreadsheet would read as a formula is prefixed with an
    apostrophe; numbers and empty cells are left alone."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        text = str(value)
        return "'" + text if text.startswith(FORMULA_STARTS) else text
    return value


class _Echo:
    """A file-like object whose write returns what it was given, so csv.writer yields lines."""

    def write(self, value: str) -> str:
        return value


def csv_response(
    *, filename: str, header: Sequence[Any], rows: Iterable[Sequence[Any]]
) -> StreamingHttpResponse:
    """A streamed CSV download: the header, then each row, every cell through csv_cell. `rows`
    may be a lazy iterator (a queryset's), so a long export never sits in memory."""
    writer = csv.writer(_Echo())

    def lines() -> Iterable[str]:
        yield writer.writerow([csv_cell(cell) for cell in header])
        for row in rows:
            yield writer.writerow([csv_cell(cell) for cell in row])

    response = StreamingHttpResponse(lines(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
