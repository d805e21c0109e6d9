"""The page at /sandbox/ shows people the world: the ledger and each provider's state, newest
first, with counts, escaped, in a fixed number of queries."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from .conftest import SandboxApi

pytestmark = pytest.mark.django_db(transaction=True)


def _section(html: str, anchor: str) -> str:
    start = html.index(f'<h2 id="{anchor}"')
    return html[start : html.index("</table>", start)]


def test_the_page_shows_the_ledger_newest_first_with_counts(api: SandboxApi) -> None:
    first = api.post("returns/start_return", {"order_id": "SU-11111"}, key="a").json()
    second = api.post("returns/start_return", {"order_id": "SU-22222"}, key="b").json()
    api.post("returns/cancel_pickup", {"label": first["label"]}, key="c")

    response = Client().get("/sandbox/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "Ledger (3)" in html
    assert "Returns (2)" in html
    ledger = _section(html, "ledger")
    returns = _section(html, "returns")
    assert ledger.index("cancel_pickup") < ledger.index(second["label"]) < ledger.index(">SU-11111<")
    assert returns.index(second["label"]) < returns.index(first["label"])


def test_the_page_escapes_what_callers_sent(api: SandboxApi) -> None:
    api.post("returns/start_return", {"order_id": "<script>alert(1)</script>"}, key="<b>k</b>")

    html = Client().get("/sandbox/").content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>k</b>" not in html


def test_the_page_runs_a_fixed_number_of_queries(api: SandboxApi, django_assert_max_num_queries: Any) -> None:
    for i in range(6):
        rsv = api.post(
            "warehouse/reserve", {"order_id": f"SU-{i}", "sku": "SKU-1001", "qty": 1}, key=f"r{i}"
        ).json()
        api.post("warehouse/release", {"reservation_id": rsv["reservation_id"]}, key=f"u{i}")

    with django_assert_max_num_queries(30):
        response = Client().get("/sandbox/")

    assert response.status_code == 200
    assert "Reservations (6)" in response.content.decode()
