"""A small client for agent runtimes in other processes: the journal over REST, with the same
`perform` semantics as the in-process service (intent committed before the call; outcome
after; a settled intent is replayed, an open one is never re-sent).

It imports no Django, so a runtime can vendor this one file (plus tool_errors.py).

    seam = SeamClient("http://127.0.0.1:8000", token)
    run = seam.create_run(task_type="returns", versions={...}, plan=[...], ticket_id="T-40912")
    seam.perform(run["id"], "issue_refund", {"amount": "14.95"}, dispatch, turn=3)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import requests

from journal.tool_errors import DispatchResult, ToolError

Dispatch = Callable[[dict[str, Any], str], DispatchResult]


class SeamError(Exception):
    """The journal refused a request (a 4xx) or could not be reached within the retry budget."""

    def __init__(self, message: str, *, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class IntentInDoubt(SeamError):
    """The intent is recorded and open: someone else is on it, or died on it. Not re-sent."""


@dataclass(frozen=True)
class ClientPerformed:
    intent: dict[str, Any]
    replayed: bool


class SeamClient:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        retries: int = 5,
        backoff: float = 0.2,
        session: requests.Session | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/") + "/api/v1"
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.session = session or requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    # Every write here is idempotent on the server (same intent → same row, same outcome → no
    # change), so a request whose answer was lost is simply sent again.
    def _request(self, method: str, path: str, json: Any = None, params: dict[str, Any] | None = None) -> Any:
        return self._send(method, path, json=json, params=params)[1]

    def _send(
        self, method: str, path: str, json: Any = None, params: dict[str, Any] | None = None
    ) -> tuple[int, Any]:
        last_error: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                response = self.session.request(
                    method, self.base_url + path, json=json, params=params, timeout=self.timeout
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                last_error = exc
            else:
                if response.status_code < 500:
                    body = response.json() if response.content else None
                    if response.status_code >= 400:
                        raise SeamError(
                            f"{method} {path} → {response.status_code}: {body}",
                            status=response.status_code,
                            body=body,
                        )
                    return response.status_code, body
                last_error = SeamError(
                    f"{method} {path} → {response.status_code}", status=response.status_code
                )
            time.sleep(self.backoff * (2**attempt))
        raise SeamError(f"{method} {path} failed after {self.retries + 1} attempts: {last_error}")

    def create_run(self, **fields: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._request("POST", "/runs/", json=fields)
        return result

    def get_run(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/runs/{run_id}/")
        return result

    def record_intent(
        self, run_id: str, tool: str, args: dict[str, Any], *, turn: int, occurrence: int = 0
    ) -> tuple[dict[str, Any], bool]:
        """The intent row, and whether this request created it (201) or found it (200)."""
        status, body = self._send(
            "POST",
            f"/runs/{run_id}/intents/",
            json={"tool": tool, "args": args, "turn": turn, "occurrence": occurrence},
        )
        return body, status == 201

    def record_outcome(
        self,
        run_id: str,
        step_id: str,
        *,
        ok: bool,
        summary: str = "",
        receipt: dict[str, Any] | None = None,
        error_class: str = "",
        request_id: str = "",
        evidence_at: datetime | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "ok": ok,
            "summary": summary,
            "receipt": receipt or {},
            "error_class": error_class,
            "request_id": request_id,
        }
        if evidence_at is not None:
            body["evidence_at"] = evidence_at.isoformat()
        result: dict[str, Any] = self._request(
            "POST", f"/runs/{run_id}/intents/{step_id}/outcome/", json=body
        )
        return result

    def tell_customer(
        self, run_id: str, *, channel: str, body: str, about_steps: list[str] | None = None
    ) -> dict[str, Any]:
        """Record what the customer was told; `about_steps` names the run's steps whose effects
        the message reports, so the handover can flag it if one is undone."""
        payload: dict[str, Any] = {"channel": channel, "body": body}
        if about_steps:
            payload["about_steps"] = about_steps
        result: dict[str, Any] = self._request("POST", f"/runs/{run_id}/customer-messages/", json=payload)
        return result

    def heartbeat(self, run_id: str) -> None:
        self._request("POST", f"/runs/{run_id}/heartbeat/")

    def complete(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("POST", f"/runs/{run_id}/complete/")
        return result

    def perform(
        self,
        run_id: str,
        tool: str,
        args: dict[str, Any],
        dispatch: Dispatch,
        *,
        turn: int,
        occurrence: int = 0,
    ) -> ClientPerformed:
        """Record the intent (committed when the server answers), call `dispatch(args, key)`,
        record the outcome. Same rules as journal.services.perform."""
        intent, created = self.record_intent(run_id, tool, args, turn=turn, occurrence=occurrence)
        if intent["status"] != "intended":
            return ClientPerformed(intent=intent, replayed=True)
        # Found open, not created by us. That includes our own row when the first answer was
        # lost and the request was retried: we cannot tell the two apart, so we do not gamble.
        if not created:
            raise IntentInDoubt(
                f"intent {intent['step_id']} is already recorded and open; it will be settled by "
                "reconciliation, not re-sent",
                body=intent,
            )
        try:
            result = dispatch(intent["args"], intent["idempotency_key"])
        except ToolError as exc:
            if exc.error_class != "ambiguous":
                self.record_outcome(
                    run_id,
                    intent["step_id"],
                    ok=False,
                    summary=exc.message,
                    error_class=exc.error_class,
                    request_id=exc.request_id,
                )
            raise
        settled = self.record_outcome(
            run_id,
            intent["step_id"],
            ok=True,
            summary=result.summary,
            receipt=result.receipt,
            request_id=result.request_id,
            evidence_at=result.evidence_at,
        )
        return ClientPerformed(intent=settled, replayed=False)
