"""Seam's CSV files run nothing in a spreadsheet of any locale (issue 33, item 5). A spreadsheet
splits a line on its locale's list separator: `,` in English, `;` across most of Europe, a tab
for tab-separated text. A cell written bare as `'-1-1;=2*3` was one cell in English and two under
`;`, the second `=2*3`. Each file is read here as each locale's spreadsheet would read it, and no
cell of any may begin with a character that makes it a formula."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from audit.chain import audit_record
from audit.models import AuditAction
from console.csv_export import csv_streaming_response, csv_writer
from journal.models import Tenant

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
SEPARATORS = [",", ";", "\t"]
# Cells an agent or a person could write: a formula behind each separator, a quote, a line break.
HOSTILE_CELLS = [
    "-1-1;=2*3",
    "a;=2*3",
    "a,=2*3",
    "a\t=2*3",
    "a\t+1",
    'a";=HYPERLINK("https://evil.example")',
    "a\n=1+1",
    "a\r\n@SUM(A1)",
    "=1;=2",
    "plain",
]


def read_as_spreadsheet(text: str, separator: str) -> list[list[str]]:
    """The cells a spreadsheet whose list separator is `separator` makes of `text`."""
    return list(csv.reader(io.StringIO(text, newline=""), delimiter=separator))


def formula_cells(text: str) -> list[tuple[str, str]]:
    return [
        (separator, cell)
        for separator in SEPARATORS
        for row in read_as_spreadsheet(text, separator)
        for cell in row
        if cell.startswith(FORMULA_STARTS)
    ]


@pytest.mark.parametrize("cell", HOSTILE_CELLS)
def test_no_cell_starts_a_formula_under_any_separator(cell: str) -> None:
    out = io.StringIO()
    csv_writer(out).writerow(["T-1", cell, 3])
    assert formula_cells(out.getvalue()) == []
    # Read back with the separator it was written with, the row is the row, and the cell is what
    # was written but for apostrophes before each piece that would run.
    back = read_as_spreadsheet(out.getvalue(), ",")
    assert len(back) == 1 and back[0][0] == "T-1" and back[0][2] == "3"
    assert back[0][1].replace("'", "") == cell.replace("'", "")


def test_every_cell_is_quoted_numbers_too() -> None:
    out = io.StringIO()
    csv_writer(out).writerow(["a;b", -3, None, "plain"])
    assert out.getvalue() == '"a;b","-3","","plain"\r\n'


def test_a_writer_that_would_leave_cells_bare_is_refused() -> None:
    with pytest.raises(ValueError, match="quotes every cell"):
        csv_writer(io.StringIO(), quoting=csv.QUOTE_MINIMAL)


def test_a_streamed_download_quotes_its_header_and_rows() -> None:
    response: Any = csv_streaming_response(filename="x.csv", header=["note;=1"], rows=iter([HOSTILE_CELLS]))
    text = b"".join(response.streaming_content).decode()
    assert formula_cells(text) == []


@pytest.mark.django_db
def test_the_audit_and_insights_downloads_run_nothing_under_any_separator(
    tenant: Tenant, persona: Any
) -> None:
    # Usernames and notes are typed by people: each hostile cell is both.
    people = [
        persona("support_staff", tenant, username=f"p{n}{cell}"[:150]) for n, cell in enumerate(HOSTILE_CELLS)
    ]
    with transaction.atomic():
        for person, cell in zip(people, HOSTILE_CELLS, strict=True):
            audit_record(user=person, tenant=tenant, action=AuditAction.ASSIGN, note=cell)
    client = Client()
    client.force_login(persona("team_lead", tenant))
    today = timezone.localdate().isoformat()
    downloads: dict[str, Any] = {
        "audit": client.get(reverse("handover:audit_csv")),
        "insights": client.get(reverse("insights:csv"), {"since": today, "until": today, "chart": "actions"}),
    }
    for name, response in downloads.items():
        assert response.status_code == 200, name
        text = b"".join(response.streaming_content).decode()
        assert formula_cells(text) == [], name
        assert all(f"p{n}" in text for n in range(len(HOSTILE_CELLS))), name  # every person is there
