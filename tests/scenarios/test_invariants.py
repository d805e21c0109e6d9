"""scenarios.invariants: the world check asks each intent's own connector, so a flow on a
provider other than the sandbox (here a tiny gift-card provider in this process, keeping its own
state) is checked by its lookups and shows no false violations, while a call its provider denies
is still a violation."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from journal.models import IntentStatus, Tenant
from scenarios.flows import Flow, Step
from scenarios.invariants import check_run
from scenarios.runner import InProcessJournal, KillPlan, run_ticket
from scenarios.tickets import Ticket
from tests.support.plugins import declaring
from tools.connectors import HttpConnector
from tools.registry import ToolSpec

pytestmark = pytest.mark.django_db(transaction=True)


class GiftCards:
    """A provider that is not the sandbox: it issues gift cards under an idempotency key and
    answers lookups by key from its own memory."""

    def __init__(self) -> None:
        self.issued: dict[str, dict[str, Any]] = {}
        cards = self

        class Handler(BaseHTTPRequestHandler):
            def _json(self, status: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers["Idempotency-Key"]
                card = cards.issued.setdefault(key, {"card_id": f"gc_{len(cards.issued) + 1}", **body})
                self._json(201, card)

            def do_GET(self) -> None:
                match = re.fullmatch(r"/cards/lookup/(.+)", self.path)
                if match is None:
                    self._json(404, {})
                elif match[1] in cards.issued:
                    self._json(200, {"status": "performed", "receipt": cards.issued[match[1]]})
                else:
                    self._json(200, {"status": "not_performed"})

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"


PROVIDER: GiftCards | None = None


# This module also declares the integrator's tool and flow, as its app's seam.py would (tests.support.plugins).
def tools() -> list[ToolSpec]:
    assert PROVIDER is not None
    return [
        ToolSpec(
            name="issue_gift_card",
            kind="write",
            args_schema={"type": "object", "required": ["customer", "amount"]},
            connector=HttpConnector(
                base_url=PROVIDER.url,
                path="customers/{customer}/cards",
                lookup_path="cards/lookup/{key}",
                receipt_fields=("card_id",),
            ),
            receipt_fields=("card_id",),
        )
    ]


def flows() -> list[Flow]:
    step = Step("issue_gift_card", "act", {"customer": "$customer", "amount": "$amount"}, "gift card")
    return [Flow(task_type="goodwill", version="1", steps=(step,))]


def tickets() -> list[Ticket]:
    return [Ticket("G-100", "goodwill", {"customer": "C-7", "amount": "20.00"})]


@pytest.fixture
def gift_cards() -> Iterator[GiftCards]:
    global PROVIDER
    PROVIDER = GiftCards()
    thread = threading.Thread(target=PROVIDER.server.serve_forever, daemon=True)
    thread.start()
    with declaring(__name__):
        yield PROVIDER
    PROVIDER.server.shutdown()
    PROVIDER.server.server_close()
    PROVIDER = None


def test_a_flow_on_another_provider_is_checked_by_its_own_lookups(
    gift_cards: GiftCards, tenant: Tenant
) -> None:
    report = run_ticket("G-100", journal_writer=InProcessJournal(tenant))

    run = tenant.runs.get(pk=report.run_id)
    assert [card["amount"] for card in gift_cards.issued.values()] == ["20.00"]
    world = check_run(run)
    assert world.violations == ()
    assert (world.performed, world.open, world.effects, world.unconfirmed) == (1, 0, 1, ())


def test_a_call_its_provider_denies_is_a_violation(gift_cards: GiftCards, tenant: Tenant) -> None:
    report = run_ticket("G-100", journal_writer=InProcessJournal(tenant))
    gift_cards.issued.clear()  # the provider lost it

    run = tenant.runs.get(pk=report.run_id)
    world = check_run(run)

    assert world.effects == 0
    step_id = run.intents.get().step_id
    assert world.violations == (f"{step_id} is recorded as performed but its provider says it was not",)


def test_an_intent_killed_before_its_call_is_open_and_not_performed(
    gift_cards: GiftCards, tenant: Tenant
) -> None:
    class Killed(BaseException):
        pass

    def kill() -> None:
        raise Killed

    with pytest.raises(Killed):
        run_ticket(
            "G-100",
            journal_writer=InProcessJournal(tenant),
            kill=KillPlan(between_intent_and_call=1, kill=kill),
        )

    run = tenant.runs.get()
    assert run.intents.get().status == IntentStatus.INTENDED
    world = check_run(run)
    assert (world.performed, world.open, world.effects, world.violations) == (0, 1, 0, ())
    assert gift_cards.issued == {}
