"""What `perform` does with a call it finds open (its intent recorded by an earlier request, with
no outcome: the agent died between sending it and recording what came of it).

- Sent again, under the same key, when the agent's code declared the tool to honour its key
  (`HonoursKey`) and the intent is younger than the key's lifetime: the downstream answers a
  repeated key with the first call's result and acts once, so the answer is the outcome.
  Past the lifetime the downstream may have forgotten the key and would act a second time: never.
- A key the downstream refuses when it is sent again (a ToolError of class `conflict`) is
  evidence that a call under it reached the downstream: recorded as such (`ambiguous`, the intent
  left open for reconciliation's lookup) and never sent a third time (`KeyRefused`).
- Otherwise waited for, bounded (`wait_for_settle` seconds, `SettleWait`), while Seam's
  reconciliation settles it; or, without a wait, IntentInDoubt at once.

One rule for the sync and async clients, the adapters and the MCP proxy."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from ._errors import ErrorClass, IntentInDoubt, IntentNotPerformed, ToolError
from ._types import OPEN, Intent

# Stripe keeps an idempotency key for 24 hours, then prunes it.
DEFAULT_KEY_LIFETIME = 86400.0
# How often a waiting `perform` asks Seam whether the call is settled (at most).
SETTLE_POLL_SECONDS = 5.0
RUNNING = "running"


@dataclass(frozen=True)
class HonoursKey:
    """The agent's code declares that a tool's downstream honours the idempotency key `perform`
    hands the call: it keeps the key `lifetime` seconds and answers a repeat of it with the first
    call's result without acting again (Stripe's rule). A call of the tool found open is then sent
    again under its key while its intent is younger than `lifetime`; never after."""

    lifetime: float = DEFAULT_KEY_LIFETIME

    def __post_init__(self) -> None:
        if isinstance(self.lifetime, bool) or not self.lifetime > 0:
            raise ValueError(f"a key's lifetime is a positive number of seconds, not {self.lifetime!r}")

    def covers(self, intent: Intent, *, now: datetime | None = None) -> bool:
        """Whether the downstream still keeps the intent's key."""
        return within_key_lifetime(intent, self.lifetime, now=now)


# How the agent's code names the tools that honour their keys: tool names (each with the default
# lifetime), or each tool's HonoursKey.
HonoursKeys = Mapping[str, HonoursKey] | Collection[str]


def honours_keys(declared: HonoursKeys) -> dict[str, HonoursKey]:
    """The declarations as one mapping of tool name to HonoursKey."""
    if isinstance(declared, str):
        raise TypeError(f"honours_key names tools: a collection of names, not the string {declared!r}")
    if isinstance(declared, Mapping):
        for name, honours in declared.items():
            if not isinstance(honours, HonoursKey):
                raise TypeError(f"honours_key[{name!r}] must be a HonoursKey, not {honours!r}")
        return {str(name): honours for name, honours in declared.items()}
    return {str(name): HonoursKey() for name in declared}


def declared_for(
    tool: str, given: HonoursKey | bool | None, registry: Mapping[str, HonoursKey]
) -> HonoursKey | None:
    """What `perform` was told about `tool`: its own `honours_key=` (True: the default lifetime,
    False: not honoured, whatever the client's registry says), else the client's registry."""
    if given is None:
        return registry.get(tool)
    if isinstance(given, bool):
        return HonoursKey() if given else None
    return given


def within_key_lifetime(intent: Intent, lifetime: float, *, now: datetime | None = None) -> bool:
    """Whether the downstream still keeps the intent's key: the intent was recorded less than
    `lifetime` seconds ago. An intent whose time is not known is not."""
    if intent.intended_at is None:
        return False
    return ((now or datetime.now(UTC)) - intent.intended_at).total_seconds() < lifetime


def found_open(
    intent: Intent, *, after_lost_answer: bool, honours: HonoursKey | None
) -> IntentInDoubt | None:
    """A call found open: None when it is sent again under its key; else why it is not."""
    if honours is None:
        return IntentInDoubt(intent, own_retry=after_lost_answer)
    if honours.covers(intent):
        return None
    return IntentInDoubt(
        intent,
        own_retry=after_lost_answer,
        why=(
            f"{intent.tool or 'its tool'} honours its key for {honours.lifetime:g} s, and the intent is "
            "older than that (or its time is unknown): the key may be forgotten, so it is not sent "
            "again; reconciliation settles it by asking the downstream system"
        ),
    )


class KeyRefused(IntentInDoubt):
    """A call sent again under its key was refused by the downstream as a conflict over the key:
    evidence that a call under that key reached it, recorded on the still open intent, which is
    never sent a third time."""

    def __init__(self, intent: Intent, refusal: ToolError) -> None:
        super().__init__(
            intent,
            own_retry=False,
            why=(
                f"sent again under its key, the downstream refused the key ({refusal.message}); that is "
                "recorded as evidence and it is not sent again: reconciliation settles it"
            ),
        )
        self.refusal = refusal


def refused_key(intent: Intent, error: Exception, *, again: bool) -> tuple[Exception, KeyRefused | None]:
    """What a call's exception records: itself, except a conflict answered to a call sent again,
    recorded as `ambiguous` evidence (the intent stays open) and raised as KeyRefused."""
    if not again or not isinstance(error, ToolError) or error.error_class is not ErrorClass.CONFLICT:
        return error, None
    evidence = ToolError(
        ErrorClass.AMBIGUOUS,
        f"sent again under its key, refused as a conflict: {error.message}",
        request_id=error.request_id,
    )
    return evidence, KeyRefused(intent, error)


class SettleWait:
    """A bounded wait for Seam to settle a call found open. Each look at the run says whether the
    call is settled (`verdict`); between looks, `next_delay` prints the progress on stderr and
    says how long to sleep, or, once `timeout` seconds have passed, raises IntentInDoubt."""

    def __init__(
        self,
        intent: Intent,
        doubt: IntentInDoubt,
        *,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
        out: TextIO | None = None,
    ) -> None:
        self.intent = intent
        self.doubt = doubt
        self.timeout = timeout
        self.clock = clock
        self.out = out
        self.started = clock()
        self.poll = min(SETTLE_POLL_SECONDS, max(timeout / 10, 0.2))

    def verdict(self, run: Mapping[str, Any]) -> Intent | None:
        """The settled intent (replayed), or None while it is open and its run running. Raises
        IntentNotPerformed (settled not_performed) or IntentInDoubt (unknown, or its run ended)."""
        rows = [row for row in run.get("intents") or [] if row.get("step_id") == self.intent.step_id]
        status = str(rows[0].get("status")) if rows else OPEN
        if status == OPEN:
            run_status = str(run.get("status") or RUNNING)
            if run_status != RUNNING:
                raise self._doubt(
                    f"its run is {run_status}, so a person decides what became of it; it is not sent again",
                    person_decides=True,
                )
            return None
        settled = Intent.from_json(rows[0], replayed=True)
        if status == "not_performed":
            raise IntentNotPerformed(settled)
        if status == "unknown":
            raise self._doubt(
                "reconciliation could not find out whether the call happened (settled unknown), so a "
                "person decides; it is not sent again",
                person_decides=True,
                intent=settled,
            )
        return settled

    def next_delay(self) -> float:
        elapsed = self.clock() - self.started
        if elapsed >= self.timeout:
            raise self._doubt(
                f"Seam did not settle it within {self.timeout:g} s of waiting; it is not sent again: "
                "reconciliation settles it by asking the downstream system"
            )
        print(
            f"waiting for Seam to settle {self.intent.tool or 'a call'} (key {self.intent.idempotency_key}): "
            f"{int(elapsed)} s of {self.timeout:g} s",
            file=self.out or sys.stderr,
            flush=True,
        )
        return min(self.poll, self.timeout - elapsed)

    def _doubt(
        self, why: str, *, person_decides: bool = False, intent: Intent | None = None
    ) -> IntentInDoubt:
        return IntentInDoubt(
            intent or self.intent,
            own_retry=self.doubt.own_retry,
            why=why,
            waited=self.clock() - self.started,
            person_decides=person_decides,
        )


def settle_bound(seconds: float) -> float:
    """A `wait_for_settle`: a number of seconds, 0 for none."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise ValueError(f"wait_for_settle is a number of seconds (0 for no wait), not {seconds!r}")
    return float(seconds)
