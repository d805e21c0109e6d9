"""The guide's connector contract holds as written: docs/integrating.md's OrderCancelConnector,
run through reconciliation against a provider that keeps an order's state, settles a cancel the
run made as performed, and a cancel the customer made before the run as already so (not the
run's work, never offered for undo): the causation rule the page explains."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from journal import services as journal
from journal.models import IntentStatus
from reconciliation.services import intent_reconcile
from tests.support.plugins import declaring
from tests.tools import contract_tools
from tests.tools.test_connectors_requests import Provider

pytestmark = pytest.mark.django_db


@pytest.fixture
def provider() -> Iterator[Provider]:
    provider = Provider()
    thread = threading.Thread(target=provider.server.serve_forever, daemon=True)
    thread.start()
    contract_tools.PROVIDER_URL = provider.url
    with declaring("tests.tools.contract_tools"):
        yield provider
    provider.server.shutdown()
    provider.server.server_close()


def _intent(make_run: Any, agent_actor: journal.Actor) -> Any:
    run = make_run()
    return journal.intent_record(
        run=run, tool="cancel_order", args={"order_id": "SU-1"}, turn=1, actor=agent_actor
    ).intent


def _order(state: str, cancelled_at: Any = None) -> dict[str, Any]:
    body = {"id": "SU-1", "state": state}
    if cancelled_at is not None:
        body["cancelled_at"] = cancelled_at.isoformat()
    return body


def test_the_guide_block_declares_the_real_lookup_signature() -> None:
    lookup = contract_tools.guide_module().OrderCancelConnector.lookup
    assert list(inspect.signature(lookup).parameters) == ["self", "query"]


def test_a_cancel_the_customer_made_before_the_run_is_already_so(
    provider: Provider, make_run: Any, agent_actor: journal.Actor
) -> None:
    intent = _intent(make_run, agent_actor)
    provider.answers["/api/orders/SU-1"] = (200, _order("cancelled", intent.intended_at - timedelta(days=1)))

    intent_reconcile(intent_id=intent.pk, actor=agent_actor)

    intent.refresh_from_db()
    assert intent.status == IntentStatus.ALREADY_SO
    assert [seen.path for seen in provider.seen] == ["/api/orders/SU-1"]  # asked, nothing sent


def test_a_cancel_made_after_the_intent_is_the_runs_and_performed(
    provider: Provider, make_run: Any, agent_actor: journal.Actor
) -> None:
    intent = _intent(make_run, agent_actor)
    provider.answers["/api/orders/SU-1"] = (200, _order("cancelled", timezone.now() + timedelta(seconds=1)))

    intent_reconcile(intent_id=intent.pk, actor=agent_actor)

    intent.refresh_from_db()
    assert intent.status == IntentStatus.PERFORMED
    assert intent.receipt == {"order_id": "SU-1"}


@pytest.mark.parametrize(("state", "status"), [("open", "not_performed"), ("shipped", "unknown")])
def test_an_open_order_was_not_cancelled_and_another_state_is_for_a_person(
    provider: Provider, make_run: Any, agent_actor: journal.Actor, state: str, status: str
) -> None:
    intent = _intent(make_run, agent_actor)
    provider.answers["/api/orders/SU-1"] = (200, _order(state))

    intent_reconcile(intent_id=intent.pk, actor=agent_actor)

    intent.refresh_from_db()
    assert intent.status == status
