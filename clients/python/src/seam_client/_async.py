"""The asynchronous client: the same names and rules as seam_client._sync, as coroutines, over
httpx.AsyncClient; the heartbeat is an asyncio task (`async with run.heartbeat(...)`)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

import httpx

from . import _protocol as api
from ._common import TOO_SOON_WAIT, HeartbeatState, RunState, TooSoon, http_options, intent_of, next_page
from ._errors import ErrorClass, IntentInDoubt, OutcomeNotRecorded, SeamError, SeamRefused
from ._resume import HonoursKey, HonoursKeys, KeyRefused, SettleWait, declared_for, honours_keys, settle_bound
from ._sync import RUN_LISTS, list_page
from ._types import AsyncCall, Handover, Intent, Outcome


class AsyncSeamClient:
    """SeamClient for asyncio: one per process (it keeps its HTTP connections). `honours_key`,
    `wait_for_settle` and `too_soon_wait` as SeamClient's."""

    def __init__(
        self,
        base_url: str,
        token: str,
        timeout: float = 10.0,
        retries: int = 5,
        *,
        backoff: float = 0.2,
        transport: httpx.AsyncBaseTransport | None = None,
        honours_key: HonoursKeys = (),
        wait_for_settle: float = 0.0,
        too_soon_wait: float = TOO_SOON_WAIT,
    ) -> None:
        self.retries = retries
        self.too_soon_wait = too_soon_wait
        self.backoff = backoff
        self.honours_key = honours_keys(honours_key)
        self.wait_for_settle = settle_bound(wait_for_settle)
        self._http = httpx.AsyncClient(**http_options(base_url, token, timeout), transport=transport)

    async def __aenter__(self) -> AsyncSeamClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, request: api.Request, *, retries: int | None = None) -> api.Answer:
        """Send one request, retrying as its Request allows; the final answer, or the error."""
        attempts = api.Attempts(
            request, retries=self.retries if retries is None else retries, backoff=self.backoff
        )
        while True:
            try:
                response = await self._http.request(
                    request.method, request.path.lstrip("/"), json=request.json, params=request.params
                )
            except httpx.TransportError as exc:
                delay = attempts.transport_failed(exc)
            else:
                wait = attempts.retry_after(response)
                if wait is None:
                    return attempts.answer(response)
                delay = wait
            await asyncio.sleep(delay)

    async def start_run(
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
    ) -> AsyncRun:
        """Open a run (idempotent on `external_id`; without one, the client makes one)."""
        answer = await self.send(
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
        return AsyncRun(self, str(answer.body["id"]), data=answer.body, created=answer.status == 201)

    async def runs(
        self, *, ticket_id: str | None = None, order_id: str | None = None, status: str | None = None
    ) -> list[AsyncRun]:
        """The tenant's runs for a ticket or an order (and in a status), newest first, every page."""
        found: list[AsyncRun] = []
        page = 1
        while True:
            request = api.run_list(ticket_id=ticket_id, order_id=order_id, status=status, page=page)
            body = (await self.send(request)).body
            items, more = next_page(body)
            found += [AsyncRun(self, str(item["id"]), data=item) for item in items]
            if not more:
                return found
            page += 1

    def run(self, run_id: str) -> AsyncRun:
        """A handle on an existing run (no request is made: `await fetch()` reads it)."""
        return AsyncRun(self, str(run_id))


class AsyncRun(RunState):
    """One run, as Run, with coroutines."""

    def __init__(
        self,
        client: AsyncSeamClient,
        run_id: str,
        *,
        data: dict[str, Any] | None = None,
        created: bool = False,
    ) -> None:
        super().__init__(run_id, data=data, created=created)
        self.client = client

    async def fetch(self) -> dict[str, Any]:
        """As Run.fetch: the run with all its intents and customer messages, every page read."""
        data = dict((await self.client.send(api.run_get(self.id))).body)
        for key, path in RUN_LISTS:
            rows = list(data.get(key) or [])
            cursor = data.get(f"{key}_next")
            while cursor:
                body = (await self.client.send(list_page(self.id, path, str(cursor)))).body
                rows += body["results"]
                cursor = body.get("next")
            data[key], data[f"{key}_next"] = rows, None
        self.data = data
        return self.data

    async def _record_intent(
        self, tool: str, args: Mapping[str, Any], *, turn: int, occurrence: int | None
    ) -> tuple[Intent, bool]:
        # One request, sent again as it is after a retry_too_soon refusal (the occurrence is
        # derived once): the same intent, admitted once its failure is far enough behind.
        request = self.intent_request(tool, args, turn=turn, occurrence=occurrence)
        too_soon = TooSoon(self.client.too_soon_wait)
        while True:
            try:
                answer = await self.client.send(request)
            except SeamRefused as refused:
                delay = too_soon.delay(refused)
                if delay is None:
                    raise
                await asyncio.sleep(delay)
            else:
                return intent_of(answer), answer.after_lost_answer

    async def record_intent(
        self, tool: str, args: Mapping[str, Any], *, turn: int, occurrence: int | None = None
    ) -> Intent:
        return (await self._record_intent(tool, args, turn=turn, occurrence=occurrence))[0]

    async def record_outcome(
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
        answer = await self.client.send(
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

    async def perform(
        self,
        tool: str,
        args: Mapping[str, Any],
        call: AsyncCall,
        *,
        turn: int,
        occurrence: int | None = None,
        call_id: str = "",
        honours_key: HonoursKey | bool | None = None,
        wait_for_settle: float | None = None,
    ) -> Intent:
        """Run.perform's rules; `call` may be a coroutine function or a plain one."""
        intent, after_lost_answer = await self._record_intent(tool, args, turn=turn, occurrence=occurrence)
        if intent.settled:
            return intent
        honours = declared_for(tool, honours_key, self.client.honours_key)
        wait = self.client.wait_for_settle if wait_for_settle is None else settle_bound(wait_for_settle)
        doubt = self.found_open(intent, after_lost_answer=after_lost_answer, honours=honours)
        if doubt is not None:
            return await self._settled_by_seam(intent, doubt, wait)
        try:
            return await self._send(intent, call, call_id=call_id, again=intent.replayed)
        except KeyRefused as refused:
            return await self._settled_by_seam(intent, refused, wait)

    async def _send(self, intent: Intent, call: AsyncCall, *, call_id: str, again: bool) -> Intent:
        try:
            returned = call(dict(intent.args), intent.idempotency_key)
            result = (await returned if inspect.isawaitable(returned) else returned) or Outcome()
        except Exception as exc:
            request, refused = self.failure_to_record(intent, exc, call_id=call_id, again=again)
            try:
                await self.client.send(request)
            except SeamError as lost:
                self.failure_not_recorded(refused or exc, lost)
            if refused is not None:
                raise refused from exc
            raise
        try:
            answer = await self.client.send(self.success_outcome(intent, result, call_id=call_id))
        except SeamRefused:
            raise
        except SeamError as exc:
            raise OutcomeNotRecorded(intent, result, exc) from exc
        return Intent.from_json(answer.body, replayed=False)

    async def _settled_by_seam(self, intent: Intent, doubt: IntentInDoubt, wait: float) -> Intent:
        if wait <= 0:
            raise doubt
        waiting = SettleWait(intent, doubt, timeout=wait)
        with self.beats_held():
            while True:
                settled = waiting.verdict(await self.fetch())
                if settled is not None:
                    return settled
                await asyncio.sleep(waiting.next_delay())

    async def tell_customer(
        self,
        channel: str,
        body: str,
        about_steps: Sequence[str] = (),
        told_at: datetime | str | None = None,
    ) -> dict[str, Any]:
        answer = await self.client.send(
            api.customer_message(
                self.id, channel=channel, body=body, about_steps=about_steps, told_at=told_at
            )
        )
        return dict(answer.body)

    async def beat(self) -> dict[str, Any]:
        return dict((await self.client.send(api.heartbeat(self.id))).body)

    def heartbeat(self, every: float = 15.0) -> AsyncHeartbeat:
        """`async with run.heartbeat(every=15.0):` beats now and every `every` seconds."""
        return AsyncHeartbeat(self, every)

    async def count(self, kind: str) -> dict[str, Any]:
        self.data = dict((await self.client.send(api.count(self.id, kind))).body)
        return self.data

    async def complete(self) -> dict[str, Any]:
        self.data = dict((await self.client.send(api.complete(self.id))).body)
        return self.data

    async def cancel(self, reason: str) -> dict[str, Any]:
        cancelled = dict((await self.client.send(api.cancel(self.id, reason))).body)
        self.data = dict(cancelled["run"])
        return cancelled

    async def handover(self) -> Handover:
        return Handover.from_json((await self.client.send(api.handover(self.id))).body)


class AsyncHeartbeat(HeartbeatState):
    """An asyncio task that beats for a run while the `async with` block runs. A failed beat is
    logged and counted, never raised."""

    def __init__(self, run: AsyncRun, every: float) -> None:
        super().__init__(run.id, every)
        self.run = run
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AsyncHeartbeat:
        self._task = asyncio.create_task(self._loop(), name=f"seam-heartbeat-{self.run.id}")
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _loop(self) -> None:
        while not self._stop.is_set():
            if self.run.beating_held:
                self.held += 1
            else:
                try:
                    await self.run.client.send(self.request(), retries=0)
                except SeamError as exc:
                    self.failed(exc)
                else:
                    self.beats += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.every)
