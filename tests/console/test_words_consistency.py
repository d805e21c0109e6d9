"""The words the demo's runs show hold together: over every run `manage.py seed_demo` leaves (as
`make demo` seeds them, then one reconciliation sweep), the run page and the handover API's
sentences never contradict themselves and never make a person read the machine's terms:

- no "reversible" beside "undo not offered", and no Undo button for a step whose undo is not
  offered; nothing under "customer told" that was not performed;
- no step id, idempotency key or other raw id outside a <details> disclosure;
- every moment shown with its zone;
- no tool by its registered snake_case name in the prose: tools are named by their labels."""

from __future__ import annotations

import re
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from journal.models import AgentToken, Intent, IntentStatus, Run
from tests.support.demo_runs import seed_the_demo
from tools.registry import all_tools

pytestmark = pytest.mark.django_db(transaction=True)

RAW_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{24,}\b")
MOMENT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?")
ZONE_AFTER = re.compile(r"\s?(?:[A-Z]{2,5}\b|[+-]\d{2}:?\d{2}|Z\b)")
WEEKDAY_DATE = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d{2} [A-Z][a-z]{2} \d{2}:\d{2}\b")


class _Visible(HTMLParser):
    """The text a person reads without opening anything: outside <details> (its <summary>
    aside), <script>, <style>, <template> and <head>. Per completed step (`li` with data-step
    in the Completed list), its text and its buttons too."""

    HIDDEN = {"script", "style", "template", "head"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.stack: list[str] = []
        self.details = 0
        self.summary = 0
        self.hidden = 0
        self.steps: list[dict[str, Any]] = []
        self.in_completed = 0
        self.step_depth = 0
        self.button = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag in ("br", "input", "meta", "link", "img", "hr"):
            return
        self.stack.append(tag)
        if tag == "details":
            self.details += 1
        elif tag == "summary":
            self.summary += 1
        elif tag in self.HIDDEN:
            self.hidden += 1
        if tag == "ul" and "standing" in (attributes.get("class") or "").split():
            self.in_completed = len(self.stack)
        if tag == "li" and self.in_completed and "data-step" in attributes and not self.step_depth:
            self.step_depth = len(self.stack)
            self.steps.append({"step": attributes["data-step"], "text": [], "buttons": []})
        if tag == "button" and self.step_depth:
            self.button = True
            self.steps[-1]["buttons"].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.stack:
            return
        while self.stack:
            depth = len(self.stack)
            closed = self.stack.pop()
            if closed == "details":
                self.details -= 1
            elif closed == "summary":
                self.summary -= 1
            elif closed in self.HIDDEN:
                self.hidden -= 1
            elif closed == "button":
                self.button = False
            if depth == self.step_depth:
                self.step_depth = 0
            if depth == self.in_completed:
                self.in_completed = 0
            if closed == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.hidden or (self.details and not self.summary):
            return
        self.parts.append(data)
        if self.step_depth:
            self.steps[-1]["text"].append(data)
            if self.button:
                self.steps[-1]["buttons"][-1] += data

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.parts).split())


def visible(html: str) -> _Visible:
    reader = _Visible()
    reader.feed(html)
    return reader


def moments_without_zone(text: str) -> list[str]:
    missing = [m[0] for m in MOMENT.finditer(text) if not ZONE_AFTER.match(text, m.end())]
    return missing + WEEKDAY_DATE.findall(text)


def tool_names_in(text: str) -> list[str]:
    return sorted(
        name for name in all_tools() if "_" in name and re.search(rf"(?<![\w-]){name}(?![\w-])", text)
    )


@pytest.fixture
def demo_runs(sandbox_tools: str, monkeypatch: pytest.MonkeyPatch) -> list[Run]:
    """Every run the demo shows, seeded and swept as `make demo` does."""
    runs = seed_the_demo(sandbox_tools, monkeypatch)
    return list(
        Run.objects.filter(pk__in=[r.pk for r in runs]).select_related("tenant").order_by("ticket_id")
    )


def _pages(runs: list[Run], persona: Any) -> Iterator[tuple[Run, str]]:
    lead = Client()
    lead.force_login(persona("team_lead", runs[0].tenant, "lena-lead"))
    for run in runs:
        response = lead.get(reverse("handover:run_detail", args=[run.pk]), {"all": "1"})
        assert response.status_code == 200, run.ticket_id
        yield run, response.content.decode()


# The handover API's sentences; every other field is the machine's (names, ids, codes, times).
PROSE_FIELDS = {
    "text",
    "why",
    "detail",
    "reason_detail",
    "reason_answered",
    "warnings",
    "reversible",
    "sentence",
}


def _prose(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for name, inner in value.items():
            yield from _prose(inner, name)
    elif isinstance(value, list):
        for inner in value:
            yield from _prose(inner, key)
    elif isinstance(value, str) and key in PROSE_FIELDS:
        yield key, value


def test_the_demos_run_pages_say_nothing_contradictory_nor_raw(demo_runs: list[Run], persona: Any) -> None:
    problems: list[str] = []
    for run, html in _pages(demo_runs, persona):
        page = visible(html)
        # A task type is the integrator's name for a kind of run, not a tool (T-41311's is called
        # order_status, like the tool it calls; its flow version, order_status-1, is no tool either).
        text = re.sub(r"Task type \S+", "", page.text)
        for step in page.steps:
            said = " ".join(" ".join(step["text"]).split())
            if "undo not offered" in said:
                if re.search(r"\breversible\b", said):
                    problems.append(f"{run.ticket_id}: 'reversible' beside 'undo not offered': {said}")
                if any(b.strip().startswith("Undo") for b in step["buttons"]):
                    problems.append(f"{run.ticket_id}: an Undo button where the undo is not offered: {said}")
        problems += [f"{run.ticket_id}: raw id outside a disclosure: {m}" for m in RAW_ID.findall(text)]
        problems += [f"{run.ticket_id}: a moment without its zone: {m}" for m in moments_without_zone(text)]
        problems += [
            f"{run.ticket_id}: a tool by its name: …{text[max(0, text.index(m) - 80) : text.index(m) + 40]}…"
            for m in tool_names_in(text)
        ]
        told = re.findall(r'<li class="told"[^>]*data-step="([^"]+)"', html)
        for step_id in told:
            status = Intent.objects.get(run=run, step_id=step_id).status
            if status != IntentStatus.PERFORMED:
                problems.append(f"{run.ticket_id}: customer told by a call that is {status}")
    assert problems == []


def test_the_demos_handover_sentences_name_tools_by_label(demo_runs: list[Run]) -> None:
    secret = AgentToken.new_secret()
    AgentToken.objects.create(tenant=demo_runs[0].tenant, name="bot", digest=AgentToken.digest_of(secret))
    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    problems: list[str] = []
    checked = 0
    for run in demo_runs:
        body = agent.get(f"/api/v1/runs/{run.pk}/handover/").json()
        for key, said in _prose(body):
            checked += 1
            problems += [f"{run.ticket_id} {key}: raw id: {m} in {said!r}" for m in RAW_ID.findall(said)]
            problems += [
                f"{run.ticket_id} {key}: no zone: {m} in {said!r}" for m in moments_without_zone(said)
            ]
            problems += [f"{run.ticket_id} {key}: tool by name: {m} in {said!r}" for m in tool_names_in(said)]
        # The machine's fields keep the names.
        assert all(step["tool"] in all_tools() for step in body["completed"]), run.ticket_id
        told = [m for m in body["customer_told"] if m.get("step_id")]
        for message in told:
            status = Intent.objects.get(run=run, step_id=message["step_id"]).status
            if status != IntentStatus.PERFORMED:
                problems.append(f"{run.ticket_id}: customer told by a call that is {status}")
    assert checked > 10
    assert problems == []


def test_the_checks_above_can_fail() -> None:
    """The readers find what they look for."""
    html = (
        '<ul class="standing"><li data-step="s1">reversible: yes <div>undo not offered: x</div>'
        "<button>Undo “Start the return”…</button> sent 2026-12-03 16:03 · step "
        "2fcf4fa9-1c1f-4a43-9d34-0f3f4b7c2e11:2:start_return"
        "<details><summary>Details</summary>f3a9c0ffee0123456789abcdef0123456789</details></li></ul>"
    )
    page = visible(html)
    [step] = page.steps
    assert step["buttons"] == ["Undo “Start the return”…"]
    assert RAW_ID.findall(page.text) == ["2fcf4fa9-1c1f-4a43-9d34-0f3f4b7c2e11"]
    assert moments_without_zone(page.text) == ["2026-12-03 16:03"]
    assert moments_without_zone("at 2026-12-03 16:03 UTC, Thu 03 Dec 16:03") == ["Thu 03 Dec 16:03"]
    assert "Details" in page.text and "f3a9c0ffee" not in page.text
