"""The REST contract without I/O, shared by the sync and async clients: each operation as a
Request (method, path, body, and whether sending it twice is harmless), and the retry rules as
Attempts, which reads each failed attempt and says how long to wait or raises."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from ._errors import ErrorClass, SeamError, SeamRefused, SeamUnavailable

API_PREFIX = "/api/v1"
USER_AGENT = "seam-client/0.1.0"
# 503 means the server (or a proxy in front of it) did not take the request; after a 502 or 504
# the request may have reached Seam and been committed.
RETRY_STATUSES = frozenset({502, 503, 504})
NOT_TAKEN_STATUSES = frozenset({503})
MAX_BACKOFF = 5.0
MAX_RETRY_AFTER = 30.0
MAX_SUMMARY_CHARS = 4000
COUNTER_KINDS = ("retry", "repair", "replan", "reflection")


def api_base(base_url: str) -> str:
    """`http://seam:8000` or `http://seam:8000/api/v1` → `http://seam:8000/api/v1`."""
    base = base_url.rstrip("/")
    return base if base.endswith(API_PREFIX) else base + API_PREFIX


def headers_for(token: str) -> dict[str, str]:
    if not token or token != token.strip():
        raise ValueError("token must be an agent token (manage.py create_agent_token prints one)")
    return {"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT, "Accept": "application/json"}


@dataclass(frozen=True)
class Request:
    """One API call. `idempotent`: Seam answers a repeat with the first one's result (same intent
    → same row, same outcome → 200, complete/cancel/heartbeat again → the same state), so a request
    whose answer was lost may be sent again. A customer message or a counter is not: it is sent
    again only when it certainly never reached Seam."""

    method: str
    path: str
    json: Any = None
    idempotent: bool = True
    params: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    # An earlier attempt may have reached Seam and lost its answer: a 200 "found" may be our own.
    after_lost_answer: bool


def _iso(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        raise ValueError("a datetime sent to Seam must carry a time zone")
    return value.isoformat()


def start_run(
    *,
    task_type: str,
    versions: Mapping[str, str],
    plan: Sequence[Mapping[str, Any]],
    ticket_id: str | None,
    order_id: str | None,
    external_id: str | None,
    deadline: datetime | str | None,
    customer_ref: str | None,
) -> Request:
    # Without an external id a retried create would open a second run; with one, Seam returns the
    # first. So the client names every run it opens.
    body: dict[str, Any] = {
        "task_type": task_type,
        "versions": dict(versions),
        "plan": [dict(step) for step in plan],
        "external_id": external_id or f"seam-client:{uuid.uuid4()}",
    }
    if ticket_id:
        body["ticket_id"] = ticket_id
    if order_id:
        body["order_id"] = order_id
    if customer_ref:
        body["customer_ref"] = customer_ref
    if deadline is not None:
        body["deadline"] = _iso(deadline)
    return Request("POST", "/runs/", body)


def run_list(*, ticket_id: str | None, order_id: str | None, status: str | None, page: int) -> Request:
    params = {"ticket_id": ticket_id, "order_id": order_id, "status": status, "page": str(page)}
    return Request("GET", "/runs/", params={name: value for name, value in params.items() if value})


def run_get(run_id: str) -> Request:
    return Request("GET", f"/runs/{run_id}/")


def intent(run_id: str, tool: str, args: Mapping[str, Any], *, turn: int, occurrence: int) -> Request:
    body = {"tool": tool, "args": dict(args), "turn": turn, "occurrence": occurrence}
    return Request("POST", f"/runs/{run_id}/intents/", body)


def outcome(
    run_id: str,
    step_id: str,
    *,
    ok: bool,
    summary: str,
    receipt: Mapping[str, Any] | None,
    error_class: ErrorClass | str | None,
    request_id: str,
    evidence_at: datetime | str | None = None,
) -> Request:
    if not ok and not error_class:
        raise ValueError("a failed outcome needs its error_class")
    body: dict[str, Any] = {
        "ok": ok,
        "summary": summary[:MAX_SUMMARY_CHARS],
        "receipt": dict(receipt or {}),
        "error_class": ErrorClass(error_class).value if error_class else "",
        "request_id": request_id,
    }
    if evidence_at is not None:  # when the downstream says the state it reports came to be
        body["evidence_at"] = _iso(evidence_at)
    return Request("POST", f"/runs/{run_id}/intents/{step_id}/outcome/", body)


def customer_message(
    run_id: str, *, channel: str, body: str, about_steps: Sequence[str], told_at: datetime | str | None
) -> Request:
    payload: dict[str, Any] = {"channel": channel, "body": body, "about_steps": list(about_steps)}
    if told_at is not None:
        payload["told_at"] = _iso(told_at)
    return Request("POST", f"/runs/{run_id}/customer-messages/", payload, idempotent=False)


def heartbeat(run_id: str) -> Request:
    return Request("POST", f"/runs/{run_id}/heartbeat/")


def complete(run_id: str) -> Request:
    return Request("POST", f"/runs/{run_id}/complete/")


def cancel(run_id: str, reason: str) -> Request:
    return Request("POST", f"/runs/{run_id}/cancel/", {"reason": reason})


def count(run_id: str, kind: str) -> Request:
    if kind not in COUNTER_KINDS:
        raise ValueError(f"kind must be one of {', '.join(COUNTER_KINDS)}, not {kind!r}")
    return Request("POST", f"/runs/{run_id}/counters/", {"kind": kind}, idempotent=False)


def handover(run_id: str) -> Request:
    return Request("GET", f"/runs/{run_id}/handover/")


# Errors raised before the request was written to the connection: the server never saw it.
_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


class Attempts:
    """The retry budget of one request. After each failed attempt it returns the seconds to wait
    before the next, or raises: SeamUnavailable when the budget is spent or a request that is not
    idempotent may have landed. `answer` reads a final response."""

    def __init__(self, request: Request, *, retries: int, backoff: float) -> None:
        self.request = request
        self.retries = retries
        self.backoff = backoff
        self.attempt = 0
        self.maybe_applied = False

    def _what(self) -> str:
        return f"{self.request.method} {self.request.path}"

    def _next(self, why: str, *, maybe_applied: bool, status: int | None, wait: float = 0.0) -> float:
        self.attempt += 1
        self.maybe_applied = self.maybe_applied or maybe_applied
        if maybe_applied and not self.request.idempotent:
            raise SeamUnavailable(
                f"{self._what()}: {why}; it may have been recorded, so it is not sent again",
                maybe_applied=True,
                status=status,
            )
        if self.attempt > self.retries:
            raise SeamUnavailable(
                f"{self._what()} failed after {self.attempt} attempts: {why}",
                maybe_applied=self.maybe_applied,
                status=status,
            )
        delay: float = min(self.backoff * 2 ** (self.attempt - 1), MAX_BACKOFF)
        return max(delay * (0.5 + random.random() / 2), wait)

    def transport_failed(self, exc: httpx.TransportError) -> float:
        if isinstance(exc, httpx.LocalProtocolError):  # refused by this side before sending
            raise SeamError(f"{self._what()}: {exc}", error_class=ErrorClass.BUG) from exc
        return self._next(
            f"{type(exc).__name__}: {exc}", maybe_applied=not isinstance(exc, _NEVER_SENT), status=None
        )

    def retry_after(self, response: httpx.Response) -> float | None:
        """None when the response is the answer; otherwise the seconds to wait before retrying."""
        if response.status_code not in RETRY_STATUSES:
            return None
        wait = 0.0
        header = response.headers.get("Retry-After", "")
        if header.isdigit():
            wait = min(float(header), MAX_RETRY_AFTER)
        return self._next(
            f"HTTP {response.status_code}",
            maybe_applied=response.status_code not in NOT_TAKEN_STATUSES,
            status=response.status_code,
            wait=wait,
        )

    def _redirected(self, response: httpx.Response) -> SeamError:
        """A 3xx is not followed: a redirected POST may be re-sent as a GET, or its body dropped,
        and a token sent to wherever the answer points. Name where it points instead."""
        location = response.headers.get("Location", "")
        target = str(response.request.url.join(location)) if location else ""
        asked = API_PREFIX + self.request.path
        base = target.split("?")[0].removesuffix(asked) if target.split("?")[0].endswith(asked) else ""
        advice = f"use {base} as the base URL" if base else "use the address it names as the base URL"
        return SeamError(
            f"{self._what()} → {response.status_code}, redirected to {target or '(no Location)'}; "
            f"seam-client follows no redirects: {advice}",
            error_class=ErrorClass.PERMANENT,
            status=response.status_code,
            body=target,
        )

    def answer(self, response: httpx.Response) -> Answer:
        status = response.status_code
        try:
            body = response.json() if response.content else None
        except ValueError:
            body = response.text
        if 300 <= status < 400:
            raise self._redirected(response)
        if status < 400:
            return Answer(status, body, self.maybe_applied)
        if status < 500:
            raise SeamRefused(f"{self._what()} → {status}: {body}", status=status, body=body)
        raise SeamError(
            f"{self._what()} → {status}: {body}", error_class=ErrorClass.BUG, status=status, body=body
        )
