"""seam_client._resume's rules on their own, without a Seam: which calls found open are sent
again, how declarations are read, and what a bounded wait makes of each state of the run."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from seam_client import HonoursKey, Intent, IntentInDoubt, IntentNotPerformed, SeamClient, ToolError
from seam_client._resume import SettleWait, declared_for, found_open, honours_keys, refused_key

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def intent(recorded_ago: timedelta | None = timedelta(minutes=5), status: str = "intended") -> Intent:
    return Intent(
        step_id="s-1",
        idempotency_key="k-1",
        status=status,
        replayed=True,
        tool="issue_refund",
        intended_at=None if recorded_ago is None else NOW - recorded_ago,
    )


def test_a_call_found_open_is_sent_again_only_inside_its_keys_lifetime() -> None:
    day = HonoursKey()
    assert day.covers(intent(timedelta(hours=23)), now=NOW)
    assert not day.covers(intent(timedelta(hours=25)), now=NOW)
    assert not day.covers(intent(None), now=NOW)  # when it was recorded is unknown: never
    assert found_open(intent(timedelta(seconds=1)), after_lost_answer=False, honours=None) is not None
    doubt = found_open(intent(timedelta(days=2)), after_lost_answer=True, honours=day)
    assert isinstance(doubt, IntentInDoubt) and doubt.own_retry and "older than that" in str(doubt)


def test_declarations_are_read_from_names_or_honours_keys_and_refused_otherwise() -> None:
    assert honours_keys(["a"]) == {"a": HonoursKey()}
    assert honours_keys({"b": HonoursKey(60)}) == {"b": HonoursKey(60)}
    with pytest.raises(TypeError):
        honours_keys("issue_refund")  # one string is not a collection of names
    with pytest.raises(TypeError):
        honours_keys({"a": 60})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        HonoursKey(0)
    with pytest.raises(ValueError):
        SeamClient("http://127.0.0.1:1", "token", wait_for_settle=-1)
    registry = {"a": HonoursKey(60)}
    assert declared_for("a", None, registry) == HonoursKey(60)
    assert declared_for("a", False, registry) is None  # perform's own word wins
    assert declared_for("b", True, registry) == HonoursKey()


def test_only_a_conflict_answered_to_a_call_sent_again_becomes_evidence() -> None:
    conflict = ToolError("conflict", "idempotency_key_mismatch")
    assert refused_key(intent(), conflict, again=False) == (conflict, None)
    recorded, refused = refused_key(intent(), conflict, again=True)
    assert isinstance(recorded, ToolError) and recorded.error_class == "ambiguous"
    assert refused is not None and refused.refusal is conflict
    permanent = ToolError("permanent", "no such order")
    assert refused_key(intent(), permanent, again=True) == (permanent, None)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def waiting(timeout: float = 10.0) -> tuple[SettleWait, Clock, io.StringIO]:
    clock, out = Clock(), io.StringIO()
    found = intent()
    return (
        SettleWait(found, IntentInDoubt(found, own_retry=False), timeout=timeout, clock=clock, out=out),
        clock,
        out,
    )


def run_body(status: str, run_status: str = "running") -> dict[str, Any]:
    row = {"step_id": "s-1", "idempotency_key": "k-1", "status": status, "tool": "issue_refund"}
    return {"status": run_status, "intents": [row]}


def test_a_wait_returns_what_reconciliation_settled_or_says_who_decides() -> None:
    wait, _clock, _out = waiting()
    assert wait.verdict(run_body("intended")) is None
    settled = wait.verdict(run_body("performed"))
    assert settled is not None and settled.status == "performed" and settled.replayed
    with pytest.raises(IntentNotPerformed):
        wait.verdict(run_body("not_performed"))
    with pytest.raises(IntentInDoubt) as unknown:
        wait.verdict(run_body("unknown"))
    assert unknown.value.person_decides
    with pytest.raises(IntentInDoubt) as escalated:
        wait.verdict(run_body("intended", run_status="escalated"))
    assert escalated.value.person_decides and "escalated" in str(escalated.value)


def test_a_wait_prints_its_progress_and_ends_at_its_bound() -> None:
    wait, clock, out = waiting(timeout=10.0)
    assert wait.next_delay() == 1.0
    clock.now = 9.5
    assert wait.next_delay() == pytest.approx(0.5)
    assert out.getvalue().splitlines() == [
        "waiting for Seam to settle issue_refund (key k-1): 0 s of 10 s",
        "waiting for Seam to settle issue_refund (key k-1): 9 s of 10 s",
    ]
    clock.now = 10.0
    with pytest.raises(IntentInDoubt) as ended:
        wait.next_delay()
    assert ended.value.waited == 10.0 and not ended.value.person_decides
