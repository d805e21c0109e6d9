"""The insights page (insights.views): who may see it, its filters, the table beside each
chart, the CSV of each table (neutralised against spreadsheet formulas, as the audit's is), bad
input refused with a 400 naming the field, and a fixed number of queries."""

from __future__ import annotations

import csv
import html as html_text
import io
import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from audit.chain import audit_record
from audit.models import AuditAction
from insights.views import PANELS
from journal.models import Escalation, Run, Tenant

pytestmark = pytest.mark.django_db

URL = reverse("insights:page")
CSV_URL = reverse("insights:csv")
HTMX = {"HX-Request": "true"}


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _csv(response: Any) -> list[list[str]]:
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def _section(html: str, key: str) -> str:
    found = re.search(rf'<section class="insight" id="insight-{key}".*?</section>', html, re.S)
    assert found, f"no {key} panel"
    return found[0]


def _table_rows(section: str) -> list[list[str]]:
    """The rows of a panel's table, each cell's text."""
    body = re.search(r"<tbody>(.*?)</tbody>", section, re.S)
    assert body
    return [
        [
            html_text.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        ]
        for row in re.findall(r"<tr>(.*?)</tr>", body[1], re.S)
    ]


@pytest.fixture
def seen(make_run: Any, tenant: Tenant, other_tenant: Tenant) -> dict[str, Run]:
    """Escalations of two task types in November, and one of another tenant."""
    returns = make_run(task_type="returns", ticket_id="T-1")
    warranty = make_run(task_type="warranty", ticket_id="T-2")
    acme = make_run(tenant=other_tenant, task_type="returns", ticket_id="T-9")
    for run, reason, day in [
        (returns, "unknown_outcome", 3),
        (returns, "unknown_outcome", 3),
        (warranty, "policy", 5),
        (acme, "policy", 5),
    ]:
        Escalation.objects.create(
            run=run,
            reason=reason,
            created_at=datetime(2026, 11, day, 9, tzinfo=UTC),
            resolved_at=datetime(2026, 11, day, 15, tzinfo=UTC),
        )
    return {"returns": returns, "warranty": warranty, "acme": acme}


NOVEMBER = {"since": "2026-11-02", "until": "2026-11-08"}


# --- who may see it ---------------------------------------------------------------------------


def test_leads_and_admins_see_the_page_and_support_gets_403(tenant: Tenant, persona: Any) -> None:
    lead, admin, support = (persona(role, tenant) for role in ("team_lead", "admin", "support_staff"))

    page = _client(lead).get(URL)
    assert page.status_code == 200
    html = page.content.decode()
    assert [key for key in PANELS if f'id="insight-{key}"' in html] == list(PANELS)
    assert html.count('<svg class="bars"') == len(PANELS) and html.count(
        '<table class="insight-table">'
    ) == len(PANELS)
    assert _client(admin).get(URL).status_code == 200
    refused = _client(support).get(URL)
    assert refused.status_code == 403
    # The console's own 403 page (templates/403.html), inside the header, not a bare "403 Forbidden".
    assert "<h1>Not allowed</h1>" in refused.content.decode()
    assert 'class="top"' in refused.content.decode()
    assert _client(support).get(CSV_URL, {"chart": "escalations"}).status_code == 403
    anonymous = Client().get(URL)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")


def test_the_header_links_the_page_for_leads_only(tenant: Tenant, persona: Any) -> None:
    queue = reverse("handover:queue")
    assert f'href="{URL}"' in _client(persona("team_lead", tenant)).get(queue).content.decode()
    assert f'href="{URL}"' not in _client(persona("support_staff", tenant)).get(queue).content.decode()


def test_a_lead_sees_only_their_tenants_numbers(
    seen: dict[str, Run], tenant: Tenant, other_tenant: Tenant, persona: Any
) -> None:
    ours = _section(_client(persona("team_lead", tenant)).get(URL, NOVEMBER).content.decode(), "escalations")
    theirs = _section(
        _client(persona("team_lead", other_tenant)).get(URL, NOVEMBER).content.decode(), "escalations"
    )

    assert [r for r in _table_rows(ours) if r[0] in ("2026-11-03", "2026-11-05")] == [
        ["2026-11-03", "2", "0"],
        ["2026-11-05", "0", "1"],
    ]
    assert [r for r in _table_rows(theirs) if r[0] == "2026-11-05"] == [["2026-11-05", "1"]]
    assert [r for r in _table_rows(theirs) if r[0] == "2026-11-03"] == [["2026-11-03", "0"]]


# --- filters ----------------------------------------------------------------------------------


def test_the_period_and_task_type_filters_apply_to_every_table(
    seen: dict[str, Run], tenant: Tenant, persona: Any
) -> None:
    client = _client(persona("team_lead", tenant))

    html = client.get(URL, NOVEMBER).content.decode()
    rows = _table_rows(_section(html, "escalations"))
    assert [r[0] for r in rows] == [f"2026-11-0{d}" for d in range(2, 9)]  # seven days
    assert _table_rows(_section(html, "resolve-time")) == [["week of 2026-11-02", "6.0", "6.0", "3"]]

    only = client.get(URL, {**NOVEMBER, "task_type": "warranty"}, headers=HTMX)
    assert only.status_code == 200
    partial = only.content.decode()
    assert "<h1>" not in partial and partial.lstrip().startswith('<div id="insights">')
    assert [r for r in _table_rows(_section(partial, "escalations")) if r[1] != "0"] == [["2026-11-05", "1"]]
    assert _table_rows(_section(partial, "resolve-time")) == [["week of 2026-11-02", "6.0", "6.0", "1"]]

    later = client.get(URL, {"since": "2026-11-06", "until": "2026-11-08"}).content.decode()
    assert all(cell == "0" for row in _table_rows(_section(later, "escalations")) for cell in row[1:])


def test_without_filters_the_period_is_the_last_30_days(tenant: Tenant, persona: Any) -> None:
    html = _client(persona("team_lead", tenant)).get(URL).content.decode()
    rows = _table_rows(_section(html, "escalations"))
    today = timezone.localdate()
    assert len(rows) == 30
    assert (rows[0][0], rows[-1][0]) == ((today - timedelta(days=29)).isoformat(), today.isoformat())


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"since": "2026-13-01"}, "since"),
        ({"until": "yesterday"}, "until"),
        ({"since": "2026-11-09", "until": "2026-11-02"}, "until"),
        ({"since": "2024-01-01", "until": "2026-11-02"}, "since"),
        ({"task_type": "no such/type"}, "task_type"),
    ],
)
def test_bad_filters_are_a_400_naming_the_field(
    tenant: Tenant, persona: Any, query: dict[str, str], field: str
) -> None:
    client = _client(persona("team_lead", tenant))

    page = client.get(URL, query)
    assert page.status_code == 400
    html = page.content.decode()
    assert re.search(rf'<div class="error" role="alert"><p>{field}: ', html), html
    assert 'class="insight"' not in html  # nothing computed
    csv_answer = client.get(CSV_URL, {**query, "chart": "escalations"})
    assert csv_answer.status_code == 400
    assert csv_answer.content.decode().startswith(f"{field}: ")


def test_the_csv_needs_a_known_chart(tenant: Tenant, persona: Any) -> None:
    client = _client(persona("team_lead", tenant))
    for chart in ("", "everything"):
        answer = client.get(CSV_URL, {"chart": chart})
        assert answer.status_code == 400
        assert answer.content.decode() == "chart: choose one of " + ", ".join(PANELS) + ".\n"


# --- the CSV ----------------------------------------------------------------------------------


def test_each_csv_holds_its_tables_numbers(seen: dict[str, Run], tenant: Tenant, persona: Any) -> None:
    client = _client(persona("team_lead", tenant))
    html = client.get(URL, NOVEMBER).content.decode()

    for key in PANELS:
        answer = client.get(CSV_URL, {**NOVEMBER, "chart": key})
        assert answer.status_code == 200
        assert answer["Content-Type"] == "text/csv"
        assert (
            answer["Content-Disposition"]
            == f'attachment; filename="seam-insights-{key}-20261102-20261108.csv"'
        )
        rows = _csv(answer)
        table = [["—" if cell == "" else cell for cell in row] for row in rows[1:]]
        section = _section(html, key)
        expected = _table_rows(section)
        if expected == [["None in this period."]]:
            expected = []
        assert table == expected, key
        header = [html_text.unescape(h) for h in re.findall(r'<th scope="col"[^>]*>(.*?)</th>', section)]
        assert rows[0] == header
        assert f'href="{CSV_URL}?chart={key}&amp;since=2026-11-02&amp;until=2026-11-08"' in section

    escalations = _csv(client.get(CSV_URL, {**NOVEMBER, "chart": "escalations"}))
    assert escalations[0] == ["Day", "A call's outcome is unknown", "Policy says a person decides"]
    assert escalations[2] == ["2026-11-03", "2", "0"]


def test_csv_cells_that_a_spreadsheet_would_evaluate_are_neutralised(
    seen: dict[str, Run], tenant: Tenant, persona: Any
) -> None:
    lead = persona("team_lead", tenant)
    formulas = ["=HYPERLINK(1)", "+1", "-2", "@SUM(A1)", "\tx", "\rx"]
    people = [persona("support_staff", tenant, username=name) for name in formulas]
    with transaction.atomic():
        for person in people:
            audit_record(
                user=person, tenant=tenant, action=AuditAction.ASSIGN, run=seen["returns"], note="=1+1"
            )
    today = timezone.localdate().isoformat()
    client = _client(lead)

    rows = _csv(client.get(CSV_URL, {"since": today, "until": today, "chart": "actions"}))
    assert sorted(row[0] for row in rows[1:]) == sorted("'" + name for name in formulas)
    assert all(row[1:] == ["1", "1"] for row in rows[1:])  # numbers stay numbers

    audit = _csv(client.get(reverse("handover:audit_csv")))
    assert sorted(row[2] for row in audit[1:]) == sorted("'" + name for name in formulas)
    assert {row[9] for row in audit[1:]} == {"'=1+1"}


def test_names_in_the_charts_and_tables_are_escaped(
    seen: dict[str, Run], tenant: Tenant, persona: Any
) -> None:
    person = persona("support_staff", tenant, username='<img src=x onerror="alert(1)">')
    with transaction.atomic():
        audit_record(user=person, tenant=tenant, action=AuditAction.ASSIGN, run=seen["returns"])
    html = _client(persona("team_lead", tenant)).get(URL).content.decode()
    actions = _section(html, "actions")
    assert "<img" not in actions
    assert actions.count("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;") >= 2  # the table and the bar


# --- cost -------------------------------------------------------------------------------------


def test_the_page_runs_a_fixed_number_of_queries(
    seen: dict[str, Run], tenant: Tenant, persona: Any, django_assert_max_num_queries: Any
) -> None:
    client = _client(persona("team_lead", tenant))
    client.get(URL, NOVEMBER)  # warm: the content types and permissions caches
    # Session, user, permissions (2), tenant, the task types, one query per chart, and for the two
    # error charts a second each: the calls of the runs with a failure (insights.errors); for
    # each of the three error charts the rollup's state (insights.error_counts: never folded here,
    # so everything is counted live); and for the recoveries per task type a second: the runs
    # finished by a machine, apart from those handed to a person (insights.recoveries).
    budget = 6 + len(PANELS) + 2 + 3 + 1
    with django_assert_max_num_queries(budget):
        assert client.get(URL, NOVEMBER).status_code == 200
    with transaction.atomic():
        for n in range(20):
            run = Run.objects.filter(pk=seen["returns"].pk).get()
            Escalation.objects.create(
                run=run,
                reason="policy",
                created_at=datetime(2026, 11, 2 + n % 7, 9, tzinfo=UTC),
                resolved_at=datetime(2026, 11, 7, 9, tzinfo=UTC),
            )
    with django_assert_max_num_queries(budget):
        assert client.get(URL, NOVEMBER).status_code == 200
    assert date(2026, 11, 2).weekday() == 0  # the period's first day is a Monday
