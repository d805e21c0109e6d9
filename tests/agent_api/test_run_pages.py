"""The run detail API at size (issue 34): the detail gives the first page of a run's intents and
customer messages with a cursor, the paged endpoints give the rest by keyset (each row once, in
order, even while rows are written), and the export streams every row as JSON lines."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone
from rest_framework.test import APIClient

from agent_api import pages
from journal.models import CustomerMessage, Intent, Run, Tenant
from tests import factories
from tests.factories import BENCH_PLAN, VERSIONS

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = "/api/v1/runs/"


def _run(client: APIClient, external_id: str = "pages-1") -> str:
    body = {"task_type": "returns", "versions": VERSIONS, "plan": BENCH_PLAN, "external_id": external_id}
    response = client.post(RUNS, body, format="json")
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def _bulk_intents(run_id: str, count: int, *, same_time_every: int = 1, start: int = 0) -> None:
    """`count` intents in one insert; every `same_time_every` of them share an intended_at, so
    the id decides their order."""
    factories.bulk_call_rows(
        run_id,
        range(start, start + count),
        base=timezone.now() - timedelta(days=1),
        same_time_every=same_time_every,
    )


def _early_intent(run_id: str, n: int) -> str:
    step_id = f"{run_id}:{n}:early"
    at = timezone.now() - timedelta(days=2)
    Intent.objects.create(
        run_id=run_id,
        step_id=step_id,
        turn=n,
        tool="early",
        args={},
        idempotency_key=f"e-{run_id}-{n}",
        intended_at=at,
    )
    return step_id


def _ordered(run_id: str) -> list[str]:
    return list(
        Intent.objects.filter(run_id=run_id).order_by("intended_at", "id").values_list("step_id", flat=True)
    )


def _page(client: APIClient, run_id: str, **query: Any) -> Any:
    return client.get(f"{RUNS}{run_id}/intents/", query)


def test_a_big_runs_detail_gives_its_first_100_intents_and_a_cursor_that_walks_the_rest(
    agent_client: APIClient,
) -> None:
    run_id = _run(agent_client)
    _bulk_intents(run_id, 2500)

    detail = agent_client.get(f"{RUNS}{run_id}/")

    assert detail.status_code == 200
    body = detail.json()
    every = _ordered(run_id)
    assert [i["step_id"] for i in body["intents"]] == every[:100]
    assert body["intents_next"] and body["customer_messages"] == [] and body["customer_messages_next"] is None
    seen = [i["step_id"] for i in body["intents"]]
    cursor, pages_read = body["intents_next"], 0
    while cursor:
        answer = _page(agent_client, run_id, cursor=cursor, limit=1000)
        assert answer.status_code == 200
        seen += [i["step_id"] for i in answer.json()["results"]]
        cursor, pages_read = answer.json()["next"], pages_read + 1
    assert seen == every and len(seen) == 2500
    assert pages_read == 3  # 100 + 1000 + 1000 + 400


def test_the_walk_gives_each_intent_once_in_order_while_new_intents_are_written(
    agent_client: APIClient,
) -> None:
    run_id = _run(agent_client)
    _bulk_intents(run_id, 40, same_time_every=5)  # ties on intended_at: the id orders them
    seen: list[str] = []
    cursor: str | None = None
    written = 0
    early: list[str] = []
    while True:
        answer = _page(agent_client, run_id, **({"cursor": cursor} if cursor else {}), limit=6).json()
        seen += [i["step_id"] for i in answer["results"]]
        cursor = answer["next"]
        if len(seen) in (12, 24):
            # New calls land mid-walk: through the API (now, after every row) and in bulk.
            for _ in range(2):
                body = {"tool": "start_return", "args": {"order_id": f"SU-{written}"}, "turn": 100 + written}
                response = agent_client.post(f"{RUNS}{run_id}/intents/", body, format="json")
                assert response.status_code == 201
                written += 1
            _bulk_intents(run_id, 1, start=1000 + written)  # later than the cursor, in bulk
            written += 1
            # And one dated before every row (a late writer's clock): an OFFSET would now give
            # a row twice; the cursor goes on after the last row given.
            early.append(_early_intent(run_id, written))
        if cursor is None:
            break
    assert written == 6 and len(early) == 2
    assert seen == [step for step in _ordered(run_id) if step not in early]
    assert len(seen) == len(set(seen)) == 46


def test_the_limit_is_100_by_default_at_most_1000_and_a_bad_one_is_a_400_naming_it(
    agent_client: APIClient,
) -> None:
    run_id = _run(agent_client)
    _bulk_intents(run_id, 1200)

    assert len(_page(agent_client, run_id).json()["results"]) == pages.DEFAULT_LIMIT == 100
    assert len(_page(agent_client, run_id, limit=1).json()["results"]) == 1
    assert len(_page(agent_client, run_id, limit=1000).json()["results"]) == pages.MAX_LIMIT == 1000
    for bad in ("0", "1001", "-5", "ten", "1.5", "²", "9" * 40):
        refused = _page(agent_client, run_id, limit=bad)
        assert refused.status_code == 400, bad
        assert list(refused.json()) == ["limit"]


def test_a_cursor_the_api_did_not_give_is_a_400_naming_the_cursor(agent_client: APIClient) -> None:
    run_id = _run(agent_client)
    _bulk_intents(run_id, 3)

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    for bad in (
        "not-a-cursor",
        "%%%",
        b64(b"[1, 2]"),
        b64(b'["2026-12-01T10:00:00", 5]'),  # no time zone
        b64(b'["2026-12-01T10:00:00+00:00", "5"]'),
        b64(b'["2026-12-01T10:00:00+00:00", 0]'),
        b64(b'["2026-12-01T10:00:00+00:00", 99999999999999999999]'),
        b64(b'{"at": 1}'),
        b64(b"\xff\xfe"),
        "ü",
    ):
        refused = _page(agent_client, run_id, cursor=bad)
        assert refused.status_code == 400, bad
        assert list(refused.json()) == ["cursor"]


def test_another_tenants_run_is_not_found_in_its_pages_or_export(
    agent_client: APIClient, other_agent_client: APIClient
) -> None:
    run_id = _run(agent_client)
    _bulk_intents(run_id, 3)
    cursor = pages.cursor_of(timezone.now(), 1)

    for path in ("", "intents/", "customer-messages/", "export/"):
        assert other_agent_client.get(f"{RUNS}{run_id}/{path}", {"cursor": cursor}).status_code == 404, path
    assert APIClient().get(f"{RUNS}{run_id}/export/").status_code == 401


def test_a_page_costs_the_same_queries_at_any_size(
    agent_client: APIClient, django_assert_max_num_queries: Any
) -> None:
    run_id = _run(agent_client)
    _bulk_intents(run_id, 2500)
    cursor = agent_client.get(f"{RUNS}{run_id}/").json()["intents_next"]

    # token (with the run) + the page; the detail: + the first page of each list
    with django_assert_max_num_queries(3):
        assert len(_page(agent_client, run_id, cursor=cursor, limit=1000).json()["results"]) == 1000
    with django_assert_max_num_queries(4):
        assert len(agent_client.get(f"{RUNS}{run_id}/").json()["intents"]) == 100


def test_customer_messages_are_paged_too(agent_client: APIClient, tenant: Tenant) -> None:
    run_id = _run(agent_client)
    told = timezone.now() - timedelta(hours=1)
    CustomerMessage.objects.bulk_create(
        [
            CustomerMessage(
                run_id=run_id, channel="email", body=f"update {n}", told_at=told + timedelta(seconds=n)
            )
            for n in range(150)
        ]
    )

    body = agent_client.get(f"{RUNS}{run_id}/").json()
    rest = agent_client.get(f"{RUNS}{run_id}/customer-messages/", {"cursor": body["customer_messages_next"]})

    assert rest.status_code == 200 and rest.json()["next"] is None
    bodies = [m["body"] for m in body["customer_messages"] + rest.json()["results"]]
    assert bodies == [f"update {n}" for n in range(150)]


def test_the_export_streams_the_run_then_every_intent_and_message_as_json_lines(
    agent_client: APIClient, support_user: Any
) -> None:
    run_id = _run(agent_client)
    _bulk_intents(run_id, 2500)
    agent_client.post(
        f"{RUNS}{run_id}/customer-messages/", {"channel": "email", "body": "On its way."}, format="json"
    )

    response = agent_client.get(f"{RUNS}{run_id}/export/")

    assert response.status_code == 200
    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert len(lines) == 1 + 2500 + 1
    assert lines[0]["run"]["id"] == run_id and "intents" not in lines[0]["run"]
    assert [line["intent"]["step_id"] for line in lines[1:-1]] == _ordered(run_id)
    assert lines[-1] == {"customer_message": lines[-1]["customer_message"]}
    assert lines[-1]["customer_message"]["body"] == "On its way."
    # The tenant's staff read it too, as they read the detail.
    staff = APIClient()
    staff.force_login(support_user)
    assert staff.get(f"{RUNS}{run_id}/export/").status_code == 200


def test_the_export_read_line_by_line_gives_each_row_as_the_paged_api_does(agent_client: APIClient) -> None:
    run_id = _run(agent_client)
    _bulk_intents(run_id, 1500, same_time_every=7)
    agent_client.post(
        f"{RUNS}{run_id}/customer-messages/", {"channel": "sms", "body": "Sent."}, format="json"
    )
    paged: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        answer = _page(agent_client, run_id, limit=1000, **({"cursor": cursor} if cursor else {})).json()
        paged += answer["results"]
        if not (cursor := answer["next"]):
            break
    detail = agent_client.get(f"{RUNS}{run_id}/").json()

    response = agent_client.get(f"{RUNS}{run_id}/export/")
    assert isinstance(response, StreamingHttpResponse)
    stream = iter(response.streaming_content)
    # Read as a client reads a stream: one chunk at a time, each one whole JSON line.
    first = next(stream)
    assert first.endswith(b"\n") and first.count(b"\n") == 1
    assert json.loads(first)["run"]["id"] == run_id
    intents: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for chunk in stream:
        assert chunk.endswith(b"\n") and chunk.count(b"\n") == 1
        line = json.loads(chunk)
        if "intent" in line:
            assert not messages  # every intent before the first message
            intents.append(line["intent"])
        else:
            messages.append(line["customer_message"])
    assert intents == paged and len(intents) == 1500
    assert [i["step_id"] for i in intents] == _ordered(run_id)
    assert messages == detail["customer_messages"] and messages[0]["body"] == "Sent."


def test_the_export_reads_its_rows_through_a_server_side_cursor(
    agent_client: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _run(agent_client)
    _bulk_intents(run_id, 5)
    chunks: list[tuple[str, int | None]] = []
    iterator = QuerySet.iterator

    def spy(self: QuerySet[Any], chunk_size: int | None = None) -> Any:
        chunks.append((self.model.__name__, chunk_size))
        return iterator(self, chunk_size=chunk_size)

    monkeypatch.setattr(QuerySet, "iterator", spy)
    response = agent_client.get(f"{RUNS}{run_id}/export/")
    assert isinstance(response, StreamingHttpResponse)
    assert chunks == []  # nothing is read before the response is streamed
    assert len(b"".join(response.streaming_content).splitlines()) == 1 + 5
    assert chunks == [("Intent", pages.EXPORT_CHUNK), ("CustomerMessage", pages.EXPORT_CHUNK)]


def test_a_run_created_again_answers_with_its_first_page(agent_client: APIClient) -> None:
    run_id = _run(agent_client, "pages-again")
    _bulk_intents(run_id, 150)
    body = {"task_type": "returns", "versions": VERSIONS, "plan": BENCH_PLAN, "external_id": "pages-again"}

    again = agent_client.post(RUNS, body, format="json")

    assert again.status_code == 200
    assert len(again.json()["intents"]) == 100 and again.json()["intents_next"]
    assert Run.objects.count() == 1
