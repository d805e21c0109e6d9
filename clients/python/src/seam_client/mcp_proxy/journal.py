"""The run of one MCP client session, and how each tools/call is journaled in it.

Identity. Each journaled call is `run.perform(tool, args, send, turn=n)`: the proxy numbers the
session's calls 1, 2, … (the turn) and the client derives the occurrence (the nth call of this
tool with these arguments in the run), so two identical calls are two intents, two keys, two
effects; a settled call met again is answered from the journal.

Resuming. A session over streamable HTTP is keyed by the client's `Mcp-Session-Id`: its run's
external id is `mcp-session-<id>`, so after a proxy restart the session's next call finds the
same run. The turns continue from the run's recorded intents, and the occurrences are counted on
from them. The first call after a resume that repeats the run's last journaled call (same tool,
same arguments) is taken as the retry of that call: it gets that call's turn, so its key, and is
answered from the journal (or, found open, not sent again). Any other call counts on.

Refusals. A call whose intent Seam refuses is not sent: the client gets an error result saying
so, with the refusal's typed code in `_meta` (`seam/refusal_code`, and `seam/retry_after` for a
retry that came too soon) for its runtime to act on, never a sentence to parse.

Errors. A server's error answer (`isError`) from a tool that is not read-only is evidence, not
proof: the tool may have acted before it failed. It is recorded `ambiguous` (the intent stays
open for reconciliation, the error text kept) unless the tool is declared
`errors_mean_not_performed`; the client gets the server's own error result either way. JSON-RPC
refusals (invalid params, unknown method) are `invalid_input`: nothing ran. Other protocol errors
and broken connections are `ambiguous`."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from .._common import canonical_json
from .._errors import ErrorClass, IntentInDoubt, SeamError, SeamRefused, ToolError
from .._resume import within_key_lifetime as within_key_lifetime  # the proxy's name for the core rule
from .._types import Intent, Outcome
from ..adapters import SETTLED_WITHOUT_ERROR, error_answer, replay_text
from .policy import ToolPolicy, capability_version

if TYPE_CHECKING:
    from .. import AsyncRun, AsyncSeamClient

logger = logging.getLogger("seam_client.mcp_proxy")

KEY_META = "seam/idempotency_key"
STEP_META = "seam/step_id"
RUN_META = "seam/run_id"
STATUS_META = "seam/status"
# A call Seam refused to record: the refusal's typed code, and when to come back (seconds).
REFUSAL_META = "seam/refusal_code"
RETRY_AFTER_META = "seam/retry_after"
# Where the proxy's own notes go in an outcome's receipt, beside the server's structured result.
HINTS_RECEIPT_KEY = "_mcp"
CALL_ID_RECEIPT_KEY = "_call_id"
SUMMARY_LIMIT = 4000
# JSON-RPC errors that say the server refused the request before any tool ran.
REFUSED_CODES = {types.INVALID_PARAMS, types.METHOD_NOT_FOUND, types.INVALID_REQUEST, types.PARSE_ERROR}


class SessionEnded(Exception):
    """The session's run is no longer running (completed, cancelled, decided): nothing more is
    journaled in it, so nothing more is sent for it."""


@dataclass
class ForwardedCall:
    """One call as forwarded to the server: what the server answered (a result, a protocol
    error, or nothing), and how that answer reads as an outcome."""

    upstream: ClientSession
    name: str
    policy: ToolPolicy
    key: str = ""
    result: types.CallToolResult | None = None
    protocol_error: MCPError | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    async def send(self, args: dict[str, Any], key: str) -> Outcome:
        self.key = key
        try:
            result = await forward(self.upstream, self.name, args, meta={KEY_META: key})
        except MCPError as exc:
            self.protocol_error = exc
            if exc.code in REFUSED_CODES:
                raise ToolError(ErrorClass.INVALID_INPUT, f"{self.name} refused: {exc.message}") from exc
            raise ToolError(
                ErrorClass.AMBIGUOUS, f"{self.name}: the server answered with a protocol error: {exc}"
            ) from exc
        except Exception as exc:  # the connection broke: the server may have acted
            raise ToolError(
                ErrorClass.AMBIGUOUS, f"{self.name}: no answer from the server ({exc!r})"
            ) from exc
        self.result = result
        return self.outcome()

    def outcome(self) -> Outcome:
        assert self.result is not None
        text = text_of(self.result)
        if self.result.is_error:
            # Evidence, not proof: only a tool that cannot act, or one declared to refuse before
            # acting, is known not to have done anything.
            raise error_answer(
                text or f"{self.name} answered with an error",
                errors_mean_not_performed=self.policy.errors_are_refusals,
            )
        receipt = dict(self.result.structured_content or {})
        receipt[HINTS_RECEIPT_KEY] = self.policy.hints()
        return Outcome(summary=text[:SUMMARY_LIMIT], receipt=receipt)

    def answer_for(self, failure: ToolError, run_id: str) -> types.CallToolResult:
        """The client's answer to a call that failed: the server's own answer when there was
        one, else a sentence saying what is known."""
        if self.result is not None:
            return with_meta(
                self.result, {RUN_META: run_id, KEY_META: self.key, STATUS_META: _status(failure)}
            )
        if self.protocol_error is not None:
            raise self.protocol_error  # relayed to the client as the server's JSON-RPC error
        if failure.error_class is ErrorClass.AMBIGUOUS:
            return refusal(
                f"{self.name}: {failure.message}. The call may have been carried out; it is recorded "
                "as in doubt and Seam's reconciliation finds out what became of it. Do not call it again."
            )
        return refusal(failure.message)


def _status(failure: ToolError) -> str:
    return "intended" if failure.error_class is ErrorClass.AMBIGUOUS else "failed"


class RunDefaults(Protocol):
    """What a session's run is opened with."""

    @property
    def task_type(self) -> str: ...

    @property
    def versions(self) -> Mapping[str, str]: ...


class SessionHost(Protocol):
    """What a session's journal needs of the proxy serving it (`proxy.Proxy`). Declared here,
    not imported, because the proxy imports this module to make its sessions' journals."""

    @property
    def settings(self) -> RunDefaults: ...

    @property
    def seam(self) -> AsyncSeamClient: ...

    @property
    def tools(self) -> Mapping[str, types.Tool]: ...

    async def policy(self, name: str) -> ToolPolicy: ...

    def keep_alive(self, run: AsyncRun, *, until: anyio.Event) -> None: ...


class SessionJournal:
    """The run of one client session: opened (or found again, by the session's id) at its first
    journaled call, kept alive by a heartbeat while the proxy serves the session, and completed
    when the session ends with every intent settled."""

    def __init__(self, proxy: SessionHost, *, session_id: str = "") -> None:
        self.proxy = proxy
        self.session_id = session_id
        self.external_id = f"mcp-session-{session_id}" if session_id else f"mcp-{uuid.uuid4()}"
        self.run: AsyncRun | None = None
        self.turns = 0
        self.open_calls = 0
        self.last_used = time.monotonic()
        self.closed = anyio.Event()
        self._lock = anyio.Lock()
        # After a resume: the run's last journaled call (tool, canonical args, turn), which the
        # session's first call is the retry of if it repeats it.
        self._retry_of: tuple[str, str, int] | None = None

    async def ensure_run(self) -> AsyncRun:
        async with self._lock:
            if self.run is None:
                settings = self.proxy.settings
                versions = {
                    "schema": "1",
                    "flow": "mcp",
                    "policy": "1",
                    "capability": capability_version(list(self.proxy.tools.values())),
                    **settings.versions,
                }
                run = await self.proxy.seam.start_run(
                    task_type=settings.task_type, versions=versions, plan=[], external_id=self.external_id
                )
                if not run.created:
                    await self._resume(run)
                self.run = run
                self.proxy.keep_alive(run, until=self.closed)
            if self.run.data.get("status", "running") != "running":
                raise SessionEnded(
                    f"this session's run {self.run.id} is {self.run.data['status']}: nothing more is "
                    "sent for it. Start a new session."
                )
            return self.run

    async def _resume(self, run: AsyncRun) -> None:
        """Continue the turns and occurrences from the run's recorded intents."""
        intents = sorted((await run.fetch()).get("intents", []), key=lambda intent: int(intent["turn"]))
        for recorded in intents:  # the occurrences the client derives, replayed from the journal
            run.occurrences.of(recorded["tool"], recorded["args"], int(recorded["turn"]))
        if intents:
            last = intents[-1]
            self.turns = int(last["turn"])
            self._retry_of = (last["tool"], canonical_json(last["args"]), self.turns)
            logger.info("session %s resumed run %s at turn %d", self.session_id, run.id, self.turns)

    def _turn_for(self, name: str, arguments: dict[str, Any]) -> int:
        retry_of, self._retry_of = self._retry_of, None
        if retry_of is not None and retry_of[:2] == (name, canonical_json(arguments)):
            return retry_of[2]
        self.turns += 1
        return self.turns

    async def call(
        self, upstream: ClientSession, name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        self.last_used = time.monotonic()
        policy = await self.proxy.policy(name)
        if not policy.journaled:
            return await forward(upstream, name, arguments, meta=None)
        try:
            run = await self.ensure_run()
        except SessionEnded as exc:
            return refusal(f"{name} was not sent: {exc}")
        except SeamError as exc:
            return refusal(f"Seam could not open a run for this session, so {name} was not sent: {exc}")
        forwarded = ForwardedCall(upstream, name, policy)
        self.open_calls += 1
        try:
            intent = await run.perform(
                name,
                arguments,
                forwarded.send,
                turn=self._turn_for(name, arguments),
                honours_key=policy.honours,
            )
        except IntentInDoubt as exc:
            return await self._in_doubt(run, forwarded, exc.intent)
        except ToolError as exc:
            return forwarded.answer_for(exc, run.id)
        except SeamError as exc:
            if forwarded.result is not None:  # carried out, but the outcome could not be recorded
                return forwarded.result
            return refused_by_seam(name, exc)
        finally:
            self.open_calls -= 1
            self.last_used = time.monotonic()
        result = forwarded.result if forwarded.result is not None else replayed(intent)
        return with_meta(result, intent_meta(run, intent))

    async def _in_doubt(
        self, run: AsyncRun, forwarded: ForwardedCall, intent: Intent
    ) -> types.CallToolResult:
        """A call whose intent is recorded open and that `perform` did not send again (its server
        does not honour its key, or no longer keeps it: `seam_client._resume`): found by the
        tool's lookup if it has one; otherwise left to reconciliation."""
        if forwarded.policy.lookup:
            found = await self._look_up(run, forwarded, intent)
            if found is not None:
                return found
        expired = forwarded.policy.honours_key  # declared, but the key may be forgotten by now
        return refusal(
            f"{forwarded.name} is already recorded without an outcome (step {intent.step_id}); it is not "
            + ("sent again past the key's declared lifetime" if expired else "sent again")
            + ": Seam's reconciliation asks the server about it."
        )

    async def _look_up(
        self, run: AsyncRun, forwarded: ForwardedCall, intent: Intent
    ) -> types.CallToolResult | None:
        """Ask the tool's lookup by key. Found: the call was carried out, recorded performed with
        the server's receipt. Not found proves nothing (the call may still be on its way)."""
        lookup = forwarded.policy.lookup
        try:
            answer = await forward(
                forwarded.upstream, lookup, {"idempotency_key": intent.idempotency_key}, meta=None
            )
        except Exception as exc:
            logger.warning("lookup %s of %s failed: %r", lookup, intent.step_id, exc)
            return None
        found = dict(answer.structured_content or {})
        if (
            answer.is_error
            or found.get("found") is not True
            or found.get("tool", forwarded.name) != forwarded.name
        ):
            return None
        receipt = dict(found.get("receipt") or {})
        summary = f"{forwarded.name} was carried out (found by its key with {lookup})"
        settled = await self._record(
            run,
            intent,
            ok=True,
            summary=summary,
            receipt={**receipt, HINTS_RECEIPT_KEY: forwarded.policy.hints()},
        )
        result = types.CallToolResult(
            content=[types.TextContent(type="text", text=summary)], structured_content=receipt or None
        )
        return with_meta(result, intent_meta(run, settled or intent))

    async def _record(
        self,
        run: AsyncRun,
        intent: Intent,
        *,
        ok: bool,
        summary: str,
        receipt: dict[str, Any] | None = None,
        error_class: ErrorClass | None = None,
    ) -> Intent | None:
        try:
            return await run.record_outcome(
                intent.step_id,
                ok=ok,
                summary=summary[:SUMMARY_LIMIT],
                receipt=receipt,
                error_class=error_class,
            )
        except SeamError as exc:  # reconciliation settles it from the server's record
            logger.warning("outcome of %s not recorded: %s", intent.step_id, exc)
            return None

    async def close(self, *, complete: bool = True) -> None:
        """The session ended: its heartbeat stops. With `complete`, its run is completed if every
        intent it recorded is settled (otherwise it is left running: reconciliation settles what
        is open once the heartbeat has stopped long enough)."""
        self.closed.set()
        if not complete or self.run is None or self.open_calls:
            return
        try:
            await self.run.complete()
        except SeamError as exc:
            logger.warning("run %s left running: %s", self.run.id, exc)


async def forward(
    upstream: ClientSession, name: str, arguments: dict[str, Any], *, meta: dict[str, Any] | None
) -> types.CallToolResult:
    result = await upstream.call_tool(
        name, arguments, meta=cast(types.RequestParamsMeta, meta) if meta else None
    )
    if not isinstance(result, types.CallToolResult):
        raise MCPError(
            types.INTERNAL_ERROR,
            f"{name} answered with a {type(result).__name__}, which the proxy does not relay",
        )
    return result


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def refusal(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def refused_by_seam(name: str, exc: SeamError) -> types.CallToolResult:
    """Seam refused the call's intent, so the call was not sent: said in words for the model,
    and, for the client's runtime to act on, the refusal's typed code in `_meta` (the error
    taxonomy's `permanent_repeated`, `retry_too_soon`, …, and its `retry_after` in seconds)."""
    result = refusal(f"Seam did not record the intent, so {name} was not sent: {exc}")
    code = exc.code if isinstance(exc, SeamRefused) else ""
    if not code:
        return result
    meta: dict[str, Any] = {REFUSAL_META: code}
    if isinstance(exc, SeamRefused) and exc.retry_after is not None:
        meta[RETRY_AFTER_META] = exc.retry_after
    return with_meta(result, meta)


def replayed(intent: Intent) -> types.CallToolResult:
    """A settled intent met again: the call is not made again; the journal answers, in words
    that say what is known (never an empty answer)."""
    receipt = {k: v for k, v in intent.receipt.items() if k not in (HINTS_RECEIPT_KEY, CALL_ID_RECEIPT_KEY)}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=replay_text(intent))],
        structured_content=receipt or None,
        is_error=intent.status not in SETTLED_WITHOUT_ERROR,
    )


def intent_meta(run: AsyncRun, intent: Intent) -> dict[str, Any]:
    return {
        RUN_META: run.id,
        STEP_META: intent.step_id,
        KEY_META: intent.idempotency_key,
        STATUS_META: intent.status,
    }


def with_meta(result: types.CallToolResult, meta: dict[str, Any]) -> types.CallToolResult:
    merged = dict(result.meta or {})
    merged.update(meta)
    return result.model_copy(update={"meta": merged})
