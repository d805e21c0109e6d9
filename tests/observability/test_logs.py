"""Structured logs: a journaled call's log lines carry its run and step ids (so do lines logged by
anything the call runs), web requests get an X-Request-ID echoed back and carried in their log
lines, and Celery tasks' lines carry the task and what it works on."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory
from django.utils import timezone

from journal import services as journal
from journal.models import Intent, Run
from journal.tool_errors import DispatchResult
from observability.context import log_context
from observability.logs import ContextFilter, JsonFormatter, PlainFormatter
from observability.middleware import RequestIdMiddleware
from reconciliation.tasks import reconcile_intent

AGENT = journal.Actor.agent("returns-bot")


@pytest.fixture
def json_lines() -> Iterator[Callable[[], list[dict[str, Any]]]]:
    """Everything logged (DEBUG and up) while the test runs, as the production handler writes it."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


@pytest.mark.django_db
def test_a_journaled_call_logs_json_lines_with_its_run_and_step(
    make_run: Callable[..., Run], json_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    run = make_run()

    def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
        logging.getLogger("tools.payments").info("refund sent")
        return DispatchResult(receipt={"refund_id": "RF-1"})

    intent = journal.perform(
        run=run, tool="issue_refund", args={"amount": "14.95"}, turn=3, actor=AGENT, dispatch=dispatch
    ).intent

    lines = json_lines()
    journal_lines = [line for line in lines if line["logger"] == "seam.journal"]
    assert [line["msg"].split(":")[0] for line in journal_lines] == ["intent recorded", "outcome recorded"]
    tool_line = next(line for line in lines if line["logger"] == "tools.payments")
    for line in [*journal_lines, tool_line]:
        assert line["run_id"] == str(run.pk)
        assert line["step_id"] == intent.step_id == f"{run.pk}:3:issue_refund"
        assert line["level"] in {"DEBUG", "INFO"}
        assert line["ts"].endswith("+00:00")
    # Outside the call, nothing claims to be about it.
    logging.getLogger("elsewhere").warning("after")
    assert "run_id" not in json_lines()[-1]


@pytest.mark.django_db
def test_a_request_id_is_echoed_or_made_and_carried_in_the_request_s_log_lines(
    json_lines: Callable[[], list[dict[str, Any]]],
) -> None:
    def view(request: HttpRequest) -> HttpResponse:
        logging.getLogger("console.views").info("page drawn")
        return HttpResponse("ok")

    middleware = RequestIdMiddleware(view)
    given = middleware(RequestFactory().get("/", HTTP_X_REQUEST_ID="lb-7f3a.42"))
    assert given["X-Request-ID"] == "lb-7f3a.42"
    assert json_lines()[-1]["request_id"] == "lb-7f3a.42"

    made = middleware(RequestFactory().get("/", HTTP_X_REQUEST_ID="no spaces <please>"))
    assert made["X-Request-ID"] != "no spaces <please>" and len(made["X-Request-ID"]) == 32
    assert json_lines()[-1]["request_id"] == made["X-Request-ID"]

    # Installed for every page: the real stack answers with one too.
    assert Client().get("/healthz")["X-Request-ID"]


@pytest.mark.django_db(transaction=True)
def test_a_celery_task_s_lines_carry_the_task_and_the_run_and_step_it_works_on(
    make_run: Callable[..., Run], json_lines: Callable[[], list[dict[str, Any]]]
) -> None:
    run = make_run()
    intent = journal.intent_record(run=run, tool="send_fax", args={"to": "+44"}, turn=1, actor=AGENT).intent
    then = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=run.pk).update(last_heartbeat_at=then)
    Intent.objects.filter(pk=intent.pk).update(intended_at=then)

    result = reconcile_intent.apply(args=[intent.pk])

    line = next(line for line in json_lines() if line["msg"].startswith("intent reconciled"))
    assert line["level"] == "WARNING"  # unknown: a person must decide
    assert line["task"] == "reconciliation.reconcile_intent"
    assert line["task_id"] == result.id
    assert line["intent_id"] == str(intent.pk)
    assert line["run_id"] == str(run.pk)
    assert line["step_id"] == intent.step_id


def test_the_readable_format_appends_the_ids_and_json_keeps_exceptions_on_one_line() -> None:
    record = logging.LogRecord("seam.journal", logging.INFO, __file__, 1, "outcome recorded", None, None)
    with log_context(run_id="r-1", step_id="r-1:2:issue_refund"):
        ContextFilter().filter(record)
    assert (
        PlainFormatter()
        .format(record)
        .endswith("INFO seam.journal outcome recorded [run_id=r-1 step_id=r-1:2:issue_refund]")
    )
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    text = JsonFormatter().format(failed)
    assert "\n" not in text and "ValueError: boom" in json.loads(text)["exc"]
