"""The run page reads plainly (issue 19, item 2), on the demo's runs: what was undone apart from
what still stands (with the loss of a partial undo), each time saying what it is, one date
format with its time zone, the deadline as time left, plain words with keys and ids behind a
disclosure, a coverage block that never promises what was since undone; and styled 403, 404
and 500 pages, with a favicon, with DEBUG off."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, RequestFactory
from django.urls import reverse
from django.views.defaults import server_error

from compensations.models import Compensation, CompensationStatus
from handover import handover_for, run_state_token
from journal import services
from journal.models import Run
from tests.support.stuck_runs import demo_ticket

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}
ONE_FORMAT = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d UTC$")
COUNTDOWN = re.compile(r"^(\d+ d|\d+ h|\d+ min| )+ left$|^passed .+ ago$|^under a minute left$")
HEX_KEY = re.compile(r"\b[0-9a-f]{64}\b")


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _page(client: Client, run: Run) -> str:
    response = client.get(reverse("handover:run_detail", args=[run.pk]))
    assert response.status_code == 200
    return str(response.content.decode())


def _section(body: str, css: str) -> str:
    start = body.index(f'<section class="{css}"')
    return body[start : body.index("</section>", start)]


def _words_people_read(body: str) -> str:
    """The page's text outside the disclosures that hold keys and ids, without its markup."""
    body = re.sub(r'<details class="raw">.*?</details>', "", body, flags=re.S)
    body = re.sub(r"<script.*?</script>", "", body, flags=re.S)
    return re.sub(r"<[^>]+>", " ", body)


@pytest.fixture
def t41207(sandbox_tools: str) -> Run:
    return demo_ticket(sandbox_tools, "T-41207")


def test_t41207_shows_its_cancelled_reship_apart_and_promises_nothing_from_it(
    t41207: Run, persona: Any
) -> None:
    body = _page(_client(persona("support_staff", t41207.tenant)), t41207)

    completed = _section(body, "completed")
    standing = completed.split('<ul class="standing">')[1].split("</ul>")[0]
    undone = completed.split('<ul class="undone">')[1].split("</ul>")[0]
    assert 'id="completed-issue_credit"' in standing and "reship" not in standing
    assert 'id="completed-reship"' in undone and "undone at" in undone
    assert "Completed <small>1</small>" in completed and "Undone since <small>1</small>" in completed
    coverage = _section(body, "coverage")
    assert "may be promised" not in coverage
    assert "since undone (“Ship a replacement”): promise nothing from it" in coverage
    assert "Coverage 4/4" in coverage


def test_a_partial_undo_is_listed_as_undone_with_what_still_stands(
    make_run: Any, persona: Any, agent_actor: Any
) -> None:
    run = make_run(ticket_id="T-1", plan=[])
    intent = services.intent_record(
        run=run, tool="reship", args={"order_id": "SU-1"}, turn=1, actor=agent_actor
    ).intent
    services.outcome_record(intent=intent, ok=True, receipt={"shipment_id": "SH-1"}, actor=agent_actor)
    Compensation.objects.create(
        original=intent, status=CompensationStatus.PARTIAL, not_undone="recall fee: 4.50 GBP"
    )

    body = _page(_client(persona("support_staff", run.tenant)), run)

    undone = _section(body, "completed").split('<ul class="undone">')[1]
    assert "partly undone" in undone and "still stands: recall fee: 4.50 GBP" in undone
    assert "Nothing the run did still stands." in _section(body, "completed")


def test_a_step_marked_performed_says_when_it_was_marked_not_when_it_happened(
    sandbox_tools: str, persona: Any
) -> None:
    run = demo_ticket(sandbox_tools, "T-41518")
    client = _client(persona("support_staff", run.tenant, "sam"))
    step = handover_for(run).uncertain[0].step_id
    client.post(
        reverse("handover:run_act", args=[run.pk, "mark-performed"]),
        {"state": run_state_token(run), "step_id": step, "note": "portal shows it"},
        headers=HTMX,
    )

    completed = _section(_page(client, run), "completed")
    times = completed.split('<div class="times">')[1].split("</div>")[0]
    assert "marked performed at" in times and "by sam" in times
    assert "(when it happened is not known)" in times and "happened at" not in times.split("(")[0]
    assert "sent " in times


def test_every_time_on_the_run_page_has_one_format_with_its_zone_and_the_deadline_counts_down(
    t41207: Run, persona: Any
) -> None:
    body = _page(_client(persona("support_staff", t41207.tenant)), t41207)

    times = re.findall(r"<time\b([^>]*)>(.*?)</time>", body)
    assert len(times) > 10
    deadline = [text for attrs, text in times if "countdown" in attrs]
    others = [text for attrs, text in times if "countdown" not in attrs]
    assert len(deadline) == 1 and COUNTDOWN.match(deadline[0]), deadline
    assert all(ONE_FORMAT.match(text) for text in others), [t for t in others if not ONE_FORMAT.match(t)]


def test_the_run_page_speaks_plainly_with_keys_and_ids_behind_a_disclosure(t41207: Run, persona: Any) -> None:
    client = _client(persona("support_staff", t41207.tenant))
    body = _page(client, t41207)
    words = _words_people_read(body)

    for jargon in ("HTTP 409", "compensations-executor", "manage.py reconcile", "with a new key"):
        assert jargon not in words, jargon
    assert not HEX_KEY.search(words), HEX_KEY.search(words)
    assert f"{t41207.pk}:" not in words  # no raw step id: "step 3, “Issue a credit”"
    assert "step 3, “Issue a credit”" in words
    # The keys are still there for whoever needs them.
    assert all(i.idempotency_key in body for i in t41207.intents.all())
    credit = t41207.intents.get(tool="issue_credit").step_id
    letters = client.get(reverse("handover:dead_letters")).content.decode()
    assert "HTTP 409" not in letters and "credit memo" in letters
    undo = client.get(
        reverse("handover:run_confirm", args=[t41207.pk, "compensate-step"]), {"step": credit}, headers=HTMX
    )
    assert "with a new key" not in undo.content.decode()


def test_a_disabled_button_says_why_in_words(t41207: Run, persona: Any) -> None:
    body = _page(_client(persona("support_staff", t41207.tenant)), t41207)

    offer = body.split('<span class="blocked-offer">')[1].split("</span>")[0]
    assert "disabled" in offer and "Resume" in offer
    assert 'class="blocked-why" id="resume-blocked">Not possible now: ' in offer


@pytest.mark.parametrize(
    ("role", "path", "status", "says"),
    [
        ("support_staff", "/audit/", 403, "<h1>Not allowed</h1>"),
        ("support_staff", f"/runs/{uuid.UUID(int=7)}/", 404, "There is nothing here"),
    ],
)
def test_403_and_404_pages_are_styled_with_debug_off(
    role: str, path: str, status: int, says: str, tenant: Any, persona: Any
) -> None:
    assert settings.DEBUG is False
    response = _client(persona(role, tenant)).get(path)

    assert response.status_code == status
    body = response.content.decode()
    assert says in body
    assert '<header class="top">' in body and "seam.css" in body and "favicon.svg" in body
    assert "Back to the queue" in body


def test_the_500_page_is_styled_with_debug_off() -> None:
    assert settings.DEBUG is False
    response = server_error(RequestFactory().get("/"))

    assert response.status_code == 500
    body = response.content.decode()
    assert "Something went wrong on our side" in body
    assert '<header class="top">' in body and "favicon.svg" in body


def test_the_favicon_is_served(client: Client) -> None:
    response = client.get("/static/favicon.svg")
    assert response.status_code == 200
    assert b"<svg" in b"".join(response.streaming_content)  # type: ignore[attr-defined]


def test_the_queue_run_list_and_audit_pages_write_times_one_way_and_steps_in_words(
    t41207: Run, persona: Any
) -> None:
    lead = persona("team_lead", t41207.tenant, "lead")
    client = _client(lead)
    letter = t41207.intents.get(tool="issue_credit").compensations.get().dead_letter
    taken = client.post(
        reverse("handover:dead_letter_act", args=[letter.pk, "take"]),
        {"state": letter.state_token},
        headers=HTMX,
    )  # an audit row naming the step
    assert taken.status_code == 200, taken.content

    for name in ("handover:queue", "handover:run_list", "handover:audit"):
        body = client.get(reverse(name)).content.decode()
        times = re.findall(r"<time\b([^>]*)>(.*?)</time>", body)
        assert times, name
        for attrs, text in times:
            pattern = COUNTDOWN if "countdown" in attrs else ONE_FORMAT
            assert pattern.match(text), (name, text)
    audit = _words_people_read(client.get(reverse("handover:audit")).content.decode())
    assert "step 3, “Issue a credit”" in audit and f"{t41207.pk}:" not in audit
