"""The synchronous client: one SeamClient per process (it keeps its HTTP connections), a Run
handle per run, and a heartbeat thread while a run is being worked."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import Any

import httpx

from . import _protocol as api
from ._common import TOO_SOON_WAIT, HeartbeatState, RunState, TooSoon, http_options, intent_of, next_page
from ._errors import ErrorClass, IntentInDoubt, OutcomeNotRecorded, SeamError, SeamRefused
from ._resume import HonoursKey, HonoursKeys, KeyRefused, SettleWait, declared_for, honours_keys, settle_bound
from ._types import Call, Handover, Intent, Outcome

# The run detail's paged lists (its key, its endpoint under /runs/{id}/), and rows per page read.
RUN_LISTS = (("intents", "intents"), ("customer_messages", "customer-messages"))
LIST_PAGE_LIMIT = 1000


def list_page(run_id: str, path: str, cursor: str) -> api.Request:
    """GET /runs/{id}/<path>/: the page of a run's list after `cursor`."""
    return api.Request(
        "GET", f"/runs/{run_id}/{path}/", params={"cursor": cursor, "limit": str(LIST_PAGE_LIMIT)}
    )


class SeamClient:
    """Seam's REST API with an agent token. Every write is retried by the rules of
    seam_client._protocol.Attempts; a refusal raises SeamRefused naming the fields.

    `honours_key` declares, for every run's `perform`, the tools whose downstream honours their
    idempotency key (tool names, or each tool's HonoursKey with its key lifetime): a call of one
    found open is sent again under its key. `wait_for_settle` is how many seconds `perform` waits,
    by default, for Seam to settle a call found open that is not sent again (0: it raises
    IntentInDoubt at once). `too_soon_wait` bounds, in seconds, how long recording one intent
    waits out Seam's `retry_too_soon` refusals (each for its `retry_after` and a random part more,
    at most three): past it, or at 0, the SeamRefused is raised with its code."""

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: float = 10.0,
        retries: int = 5,
        *,
        backoff: float = 0.2,
        transport: httpx.BaseTransport | None = None,
        honours_key: HonoursKeys = (),
        wait_for_settle: float = 0.0,
        too_soon_wait: float = TOO_SOON_WAIT,
    ) -> None:
        self.retries = retries
        self.too_soon_wait = too_soon_wait
        self.backoff = backoff
        self.honours_key = honours_keys(honours_key)
        self.wait_for_settle = settle_bound(wait_for_settle)
        self._http = httpx.Client(**http_options(base_url, token, timeout), transport=transport)

    def __enter__(self) -> SeamClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def send(self, request: api.Request, *, retries: int | None = None) -> api.Answer:
        """Send one request, retrying as its Request allows; the final answer, or the error."""
        attempts = api.Attempts(
            request, retries=self.retries if retries is None else retries, backoff=self.backoff
        )
        while True:
            try:
                response = self._http.request(
                    request.method, request.path.lstrip("/"), json=request.json, params=request.params
                )
            except httpx.TransportError as exc:
                delay = attempts.transport_failed(exc)
            else:
                wait = attempts.retry_after(response)
                if wait is None:
                    return attempts.answer(response)
                delay = wait
            time.sleep(delay)

    def start_run(
        self,
        *,
        task_type: str,
        versions: Mapping[str, str],
        plan: Sequence[Mapping[str, Any]] = (),
        ticket_id: str | None = None,
        order_id: str | None = None,
        external_id: str | None = None,
        deadline: datetime | str | None = None,
        customer_ref: str | None = None,
    ) -> Run:
        """Open a run (idempotent on `external_id`: the same one again returns the first run,
        `created` false). Without one, the client makes one, so its own retries are safe."""
        answer = self.send(
            api.start_run(
                task_type=task_type,
                versions=versions,
                plan=plan,
                ticket_id=ticket_id,
                order_id=order_id,
                external_id=external_id,
                deadline=deadline,
                customer_ref=customer_ref,
            )
        )
        return Run(self, str(answer.body["id"]), data=answer.body, created=answer.status == 201)

    def runs(
        self, *, ticket_id: str | None = None, order_id: str | None = None, status: str | None = None
    ) -> list[Run]:
        """The tenant's runs for a ticket or an order (and in a status), newest first, every page."""
        found: list[Run] = []
        page = 1
        while True:
            body = self.send(
                api.run_list(ticket_id=ticket_id, order_id=order_id, status=status, page=page)
            ).body
            items, more = next_page(body)
            found += [Run(self, str(item["id"]), data=item) for item in items]
            if not more:
                return found
            page += 1

    def run(self, run_id: str) -> Run:
        """A handle on an existing run (no request is made: `fetch()` reads it)."""
        return Run(self, str(run_id))


class Run(RunState):
    """One run: record its intents and outcomes, tell the customer, keep it alive, end it."""

    def __init__(
        self, client: SeamClient, run_id: str, *, data: dict[str, Any] | None = None, created: bool = False
    ) -> None:
        super().__init__(run_id, data=data, created=created)
        self.client = client

    def fetch(self) -> dict[str, Any]:
        """GET /runs/{id}/: the run with all its intents and customer messages. The detail gives
        the first page of each list and its cursor (`intents_next`); the rest is read page by page
        (GET /runs/{id}/intents/?cursor=...), so `intents` holds every intent, oldest first."""
        data = dict(self.client.send(api.run_get(self.id)).body)
        for key, path in RUN_LISTS:
            rows = list(data.get(key) or [])
            cursor = data.get(f"{key}_next")
            while cursor:
                body = self.client.send(list_page(self.id, path, str(cursor))).body
                rows += body["results"]
                cursor = body.get("next")
            data[key], data[f"{key}_next"] = rows, None
        self.data = data
        return self.data

    def _record_intent(
        self, tool: str, args: Mapping[str, Any], *, turn: int, occurrence: int | None
    ) -> tuple[Intent, bool]:
        # One request, sent again as it is after a retry_too_soon refusal (the occurrence is
        # derived once): the same intent, admitted once its failure is far enough behind.
        request = self.intent_request(tool, args, turn=turn, occurrence=occurrence)
        too_soon = TooSoon(self.client.too_soon_wait)
        while True:
            try:
                answer = self.client.send(request)
            except SeamRefused as refused:
                delay = too_soon.delay(refused)
                if delay is None:
                    raise
                time.sleep(delay)
            else:
                return intent_of(answer), answer.after_lost_answer

    def record_intent(
        self, tool: str, args: Mapping[str, Any], *, turn: int, occurrence: int | None = None
    ) -> Intent:
        """Record the intent; committed when this returns. The same intent again returns the same
        row (`replayed`); a different one in a taken step is refused (SeamRefused, 409).

        Without `occurrence`, this handle derives it: the same tool and (canonical) arguments at
        a turn already seen is that call again (the same intent); at a new turn it is the next
        occurrence, a new intent with its own key. An explicit `occurrence` is sent as given."""
        return self._record_intent(tool, args, turn=turn, occurrence=occurrence)[0]

    def record_outcome(
        self,
        step_id: str,
        *,
        ok: bool = True,
        summary: str = "",
        receipt: Mapping[str, Any] | None = None,
        error_class: ErrorClass | str | None = None,
        request_id: str = "",
        evidence_at: datetime | None = None,
    ) -> Intent:
        """Settle an intent: performed (`ok`), or failed with its error class. `ambiguous` (the
        tool answered with an error and may have acted) settles nothing: Seam keeps the intent
        open with the summary as evidence. The same outcome again is harmless. `evidence_at`: see
        Outcome."""
        answer = self.client.send(
            api.outcome(
                self.id,
                step_id,
                ok=ok,
                summary=summary,
                receipt=receipt,
                error_class=error_class,
                request_id=request_id,
                evidence_at=evidence_at,
            )
        )
        return Intent.from_json(answer.body, replayed=False)

    def perform(
        self,
        tool: str,
        args: Mapping[str, Any],
        call: Call,
        *,
        turn: int,
        occurrence: int | None = None,
        call_id: str = "",
        honours_key: HonoursKey | bool | None = None,
        wait_for_settle: float | None = None,
    ) -> Intent:
        """Record the intent (committed), then `call(args, idempotency_key)`, then its outcome.
        The occurrence is derived as `record_intent` says: identical calls at different turns are
        two intents and two calls; the same turn again, or a new handle on the run making the same
        calls in the same order, finds the intents already recorded.

        A settled intent is returned as it is, `replayed`, and `call` is not made. An open one
        (another process is on it or died on it, or this client's answer was lost) is:
        - sent again under the same key when the tool honours its key (`honours_key`: a
          HonoursKey, True for the default lifetime of a day, False for not; None: the client's
          declaration) and the intent is younger than the key's lifetime; its answer is the
          outcome. A conflict answered to it is recorded as evidence and raises KeyRefused;
        - otherwise not sent: with `wait_for_settle` seconds (None: the client's), `perform` waits
          while Seam's reconciliation settles it, printing its progress on stderr and holding the
          run's heartbeat (a beating run is not reconciled). Settled performed (or already_so, or
          failed): returned, `replayed`. Settled not_performed: IntentNotPerformed. Settled
          unknown, or the run handed to a person: IntentInDoubt (`person_decides`). Still open at
          the end of the wait, or with no wait: IntentInDoubt.

        A ToolError is recorded with its class and raised; an `ambiguous` one, or any other
        exception, is recorded as evidence (its text) and leaves the intent open for
        reconciliation. If the outcome cannot be recorded after the call, OutcomeNotRecorded: do
        not call again.

        `call_id`, the framework's own id of this tool call, is recorded with the outcome (the
        receipt's `_call_id`) and given back as `Intent.call_id`, never in `Intent.receipt`."""
        intent, after_lost_answer = self._record_intent(tool, args, turn=turn, occurrence=occurrence)
        if intent.settled:
            return intent
        honours = declared_for(tool, honours_key, self.client.honours_key)
        wait = self.client.wait_for_settle if wait_for_settle is None else settle_bound(wait_for_settle)
        doubt = self.found_open(intent, after_lost_answer=after_lost_answer, honours=honours)
        if doubt is not None:
            return self._settled_by_seam(intent, doubt, wait)
        try:
            return self._send(intent, call, call_id=call_id, again=intent.replayed)
        except KeyRefused as refused:
            return self._settled_by_seam(intent, refused, wait)

    def _send(self, intent: Intent, call: Call, *, call_id: str, again: bool) -> Intent:
        """Make the call under the intent's key and record what came of it."""
        try:
            result = call(dict(intent.args), intent.idempotency_key) or Outcome()
        except Exception as exc:
            request, refused = self.failure_to_record(intent, exc, call_id=call_id, again=again)
            try:
                self.client.send(request)
            except SeamError as lost:
                self.failure_not_recorded(refused or exc, lost)
            if refused is not None:
                raise refused from exc
            raise
        try:
            return Intent.from_json(
                self.client.send(self.success_outcome(intent, result, call_id=call_id)).body, replayed=False
            )
        except SeamRefused:
            raise  # settled meanwhile, differently (reconciliation, a person): Seam says so
        except SeamError as exc:
            raise OutcomeNotRecorded(intent, result, exc) from exc

    def _settled_by_seam(self, intent: Intent, doubt: IntentInDoubt, wait: float) -> Intent:
        """Wait, at most `wait` seconds, for Seam to settle an open call that is not sent."""
        if wait <= 0:
            raise doubt
        waiting = SettleWait(intent, doubt, timeout=wait)
        with self.beats_held():
            while True:
                settled = waiting.verdict(self.fetch())
                if settled is not None:
                    return settled
                time.sleep(waiting.next_delay())

    def tell_customer(
        self,
        channel: str,
        body: str,
        about_steps: Sequence[str] = (),
        told_at: datetime | str | None = None,
    ) -> dict[str, Any]:
        """Record what the customer was told (channel: email, chat, sms, phone, portal);
        `about_steps` names the steps whose effects it reports. Not idempotent: a request whose
        answer was lost is not sent again (SeamUnavailable with `maybe_applied`)."""
        answer = self.client.send(
            api.customer_message(
                self.id, channel=channel, body=body, about_steps=about_steps, told_at=told_at
            )
        )
        return dict(answer.body)

    def beat(self) -> dict[str, Any]:
        """One heartbeat: the runtime is alive and working this run."""
        return dict(self.client.send(api.heartbeat(self.id)).body)

    @contextmanager
    def heartbeat(self, every: float = 15.0) -> Iterator[Heartbeat]:
        """Beat now and every `every` seconds from a background thread until the block ends."""
        beating = Heartbeat(self, every)
        beating.start()
        try:
            yield beating
        finally:
            beating.stop()

    def count(self, kind: str) -> dict[str, Any]:
        """Raise the run's retry, repair, replan or reflection counter by one; the run."""
        self.data = dict(self.client.send(api.count(self.id, kind)).body)
        return self.data

    def complete(self) -> dict[str, Any]:
        """The run is finished (refused, 409, while an intent has no outcome)."""
        self.data = dict(self.client.send(api.complete(self.id)).body)
        return self.data

    def cancel(self, reason: str) -> dict[str, Any]:
        """Admit no more steps: {run, completed, uncertain, cleanup_scheduled}. Nothing is undone."""
        cancelled = dict(self.client.send(api.cancel(self.id, reason)).body)
        self.data = dict(cancelled["run"])
        return cancelled

    def handover(self) -> Handover:
        """What a person needs to finish the run (GET /runs/{id}/handover/)."""
        return Handover.from_json(self.client.send(api.handover(self.id)).body)


class Heartbeat(HeartbeatState):
    """A daemon thread that beats for a run. A failed beat is logged and counted, never raised:
    the next one tries again."""

    def __init__(self, run: Run, every: float) -> None:
        super().__init__(run.id, every)
        self.run = run
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"seam-heartbeat-{run.id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.run.beating_held:
                self.held += 1
            else:
                try:
                    self.run.client.send(self.request(), retries=0)
                except SeamError as exc:
                    self.failed(exc)
                else:
                    self.beats += 1
            self._stop.wait(self.every)
