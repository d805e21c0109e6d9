"""Dates typed as the person's locale writes them (console.dates): the audit and insights
filters show and read dd/mm/yyyy for en-GB, mm/dd/yyyy for en-US, dd.mm.yyyy for German, and
ISO from anyone; a date that does not exist is refused naming the order expected."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from console import actions
from console.dates import ISO, date_input_for_language
from handover import run_state_token

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(
    ("language", "placeholder", "typed"),
    [
        ("en-us", "mm/dd/yyyy", "12/03/2026"),
        ("en", "mm/dd/yyyy", "12/03/2026"),
        ("en-gb", "dd/mm/yyyy", "03/12/2026"),
        ("de", "dd.mm.yyyy", "03.12.2026"),
        ("fr", "dd/mm/yyyy", "03/12/2026"),
        ("ja", "yyyy-mm-dd", "2026-12-03"),
    ],
)
def test_each_language_writes_a_date_in_its_own_order(language: str, placeholder: str, typed: str) -> None:
    date_input = date_input_for_language(language)
    assert date_input.placeholder == placeholder
    assert date_input.show(date(2026, 12, 3)) == typed
    assert ISO in date_input.input_formats


def _lead(persona: Any, tenant: Any, language: str) -> Client:
    client = Client(headers={"Accept-Language": language})
    client.force_login(persona("team_lead", tenant, "lena-lead"))
    return client


def _count(body: str) -> int:
    match = re.search(r"(\d+) actions? match", body)
    assert match is not None, body[:500]
    return int(match[1])


@pytest.mark.parametrize(("language", "pattern"), [("en-US", "%m/%d/%Y"), ("en-GB", "%d/%m/%Y")])
def test_the_audit_filter_reads_and_shows_dates_in_the_persons_order(
    make_run: Any, persona: Any, tenant: Any, language: str, pattern: str
) -> None:
    run = make_run(ticket_id="T-dates")
    ctx = actions.StaffContext(user=persona("support_staff", tenant, "ana"), tenant=tenant)
    actions.run_assign(ctx, run_id=run.pk, state=run_state_token(run))
    lead = _lead(persona, tenant, language)
    today = timezone.localdate()
    typed_today, typed_tomorrow = today.strftime(pattern), (today + timedelta(days=1)).strftime(pattern)

    page = lead.get(reverse("handover:audit"), {"since": typed_today}).content.decode()
    later = lead.get(reverse("handover:audit"), {"since": typed_tomorrow}).content.decode()
    iso = lead.get(reverse("handover:audit"), {"since": today.isoformat()}).content.decode()
    export = lead.get(reverse("handover:audit_csv"), {"since": typed_tomorrow})

    assert (_count(page), _count(later), _count(iso)) == (1, 0, 1)
    placeholder = pattern.replace("%m", "mm").replace("%d", "dd").replace("%Y", "yyyy")
    # The field is typed in the person's order and shown back in it, whichever way it came.
    for body in (page, iso):
        assert 'name="since" inputmode="numeric"' in body
        assert f'placeholder="{placeholder}" value="{typed_today}"' in body
    assert 'type="date"' not in page
    assert export.status_code == 200
    assert b"T-dates" not in b"".join(export.streaming_content)  # type: ignore[attr-defined]


def test_a_date_in_the_other_order_is_refused_naming_the_order_expected(persona: Any, tenant: Any) -> None:
    # 25 December, typed the British way, is no date to an American browser's reader.
    us = _lead(persona, tenant, "en-US").get(reverse("handover:audit"), {"since": "25/12/2026"})
    gb = Client(headers={"Accept-Language": "en-GB"})
    gb.force_login(persona("team_lead", tenant, "lee-lead"))
    gb = gb.get(reverse("handover:audit"), {"since": "25/12/2026"})

    assert us.status_code == 400
    assert "since must be a real date, as mm/dd/yyyy or yyyy-mm-dd" in us.content.decode()
    assert gb.status_code == 200


@pytest.mark.parametrize(("language", "typed"), [("de-DE,de;q=0.9", "02.11.2026"), ("en-US", "11/02/2026")])
def test_the_insights_filter_takes_the_persons_order(
    persona: Any, tenant: Any, language: str, typed: str
) -> None:
    lead = _lead(persona, tenant, language)

    page = lead.get(reverse("insights:page"), {"since": typed, "until": "2026-11-15"})
    wrong = lead.get(reverse("insights:page"), {"since": "31.31.2026"})

    assert page.status_code == 200
    body = page.content.decode()
    assert f'value="{typed}"' in body
    assert date_input_for_language("de" if language.startswith("de") else "en").placeholder in body
    assert wrong.status_code == 400
