"""A person's decision on a dead letter and a worker's send race, and the person's decision wins.

The finding (issue 33, item 1): a lead retried a dead letter, then resolved it "undone by hand,
do NOT send anything" while the worker was busy; the worker still sent the undo, and when it
failed the letter was reopened and the resolution (who, when, note) wiped. Had the retry
succeeded, the refund would have been reversed twice.

Here the lead retries, then resolves, with the worker stopped at each point of its way to the
provider: not started yet (the message queued, or lost and found again), paused or killed before
it claims the send, paused or killed inside the send. The worker runs in a thread of its own with
its own database connection; "killed" is a BaseException raised at that point, so nothing after
it runs and its open transaction is rolled back, as when the process dies. After each, the
sandbox's ledger (the world) holds at most what the last decision a person was allowed to make
allows: no reversal after an accepted "resolve, do not send", and the resolution survives."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse

from audit.models import AuditAction, AuditEntry
from compensations import services
from compensations.models import Compensation, CompensationStatus, DeadLetter, DroppedSend
from compensations.services import (
    CompensationPending,
    compensation_claim_stalled,
    compensation_execute,
    compensation_request,
)
from journal import services as journal
from journal.models import Intent
from reconciliation.services import reconcile_sweep
from sandbox.catalogue import catalogue_seed_defaults
from tools import connectors
from tools import services as tools

pytestmark = pytest.mark.django_db(transaction=True)

EXECUTOR = journal.Actor.system("test-executor")
REFUND = {"order_id": "SU-90317", "amount": "14.95", "currency": "USD"}
DO_NOT_SEND = "undone by hand, do NOT send anything"
HTMX = {"HX-Request": "true"}
WAIT = 20  # seconds: a paused worker that never reaches its pause point fails the test, not hangs it


class WorkerKilled(BaseException):
    """The worker process dying at this point: nothing after it runs (not an Exception, so no
    handler of the code under test catches it)."""


@dataclass
class World:
    original: Intent
    letter: DeadLetter
    lead: Any
    sandbox: str
    # Tallies, over the whole case: what the report gives.
    overwritten: int = 0
    sends_after_do_not_send: int = 0
    # (resolved_by, resolved_at, reversals in the world then) of each accepted resolution
    accepted: list[tuple[Any, Any, int]] = field(default_factory=list)

    def undos(self) -> int:
        from sandbox.models import Effect

        return Effect.objects.filter(undoes__idempotency_key=self.original.idempotency_key).count()

    def compensation(self) -> Compensation:
        return Compensation.objects.get(pk=self.letter.compensation_id)

    def fresh(self) -> DeadLetter:
        return DeadLetter.objects.get(pk=self.letter.pk)


@pytest.fixture
def world(sandbox_tools: str, make_run: Callable[..., Any], persona: Any, tenant: Any) -> World:
    """A refund whose reversal failed for good (the provider answered 503, with a budget of one
    attempt): a dead letter owned by the team lead."""
    catalogue_seed_defaults()
    lead = persona("team_lead", tenant, "lead")
    original = tools.tool_perform(
        run=make_run(), tool="issue_refund", args=REFUND, turn=1, actor=EXECUTOR
    ).intent
    _fail_next_reversal(sandbox_tools)
    with override_settings(SEAM_COMPENSATION_MAX_ATTEMPTS=1):
        failed = compensation_execute(
            compensation=compensation_request(original=original, actor=EXECUTOR), actor=EXECUTOR
        )
    assert failed.status == CompensationStatus.DEAD_LETTERED
    letter = DeadLetter.objects.get(compensation=failed)
    assert letter.owner == lead
    return World(original=original, letter=letter, lead=lead, sandbox=sandbox_tools)


def _fail_next_reversal(sandbox: str) -> None:
    rule = {"provider": "payments", "operation": "reverse", "fault": "fail_before", "remaining": 1}
    requests.post(f"{sandbox}/sandbox/api/faults/", json=rule, timeout=5).raise_for_status()


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """compensate_step's messages, held instead of sent: the test delivers them (or loses them)."""
    from compensations.tasks import compensate_step

    messages: list[int] = []
    monkeypatch.setattr(compensate_step, "delay", lambda pk: messages.append(pk))
    return messages


def _post(world: World, action: str, state: str, note: str = "") -> Any:
    client = Client()
    client.force_login(world.lead)
    url = reverse("handover:dead_letter_act", args=[world.letter.pk, action])
    return client.post(url, {"state": state, "note": note}, headers=HTMX)


def _retry(world: World) -> str:
    """The lead retries from a fresh page; returns the state the page shows afterwards."""
    response = _post(world, "retry", world.fresh().state_token)
    assert response.status_code == 200, response.content.decode()[:500]
    return world.fresh().state_token


def _resolve(world: World, state: str) -> Any:
    """The lead resolves "do not send" with the page's state; an accepted resolution is noted,
    with the ledger as it was, to check after everything has run."""
    before = world.undos()
    response = _post(world, "resolve", state, DO_NOT_SEND)
    if response.status_code == 200:
        letter = world.fresh()
        world.accepted.append((letter.resolved_by_id, letter.resolved_at, before))
    return response


def _deliver(world: World) -> Compensation | None:
    """A worker takes the message (compensations.tasks.compensate_step's body)."""
    try:
        return compensation_execute(compensation=world.compensation(), actor=EXECUTOR)
    except CompensationPending:
        return None


def _tally(world: World) -> None:
    """After everything ran: every accepted resolution is still there, as it was written, and
    nothing reached the provider after it."""
    letter = world.fresh()
    for resolved_by, resolved_at, undos_then in world.accepted:
        kept = (letter.resolved_by_id, letter.resolved_at, letter.resolution_note) == (
            resolved_by,
            resolved_at,
            DO_NOT_SEND,
        )
        world.overwritten += 0 if kept else 1
        world.sends_after_do_not_send += world.undos() - undos_then


class Paused:
    """A worker thread stopped at a point of its way: `reached` is set when it gets there, and
    it waits there until `resume()` (or dies there, if `kill`)."""

    def __init__(self, kill: bool = False) -> None:
        self.reached = threading.Event()
        self.go = threading.Event()
        self.kill = kill
        self.error: BaseException | None = None
        self.result: Compensation | None = None
        self.thread: threading.Thread | None = None

    def point(self) -> None:
        self.reached.set()
        if self.kill:
            raise WorkerKilled
        assert self.go.wait(WAIT), "the test never resumed the worker"

    def start(self, world: World) -> None:
        def work() -> None:
            try:
                self.result = _deliver(world)
            except BaseException as exc:
                self.error = exc
            finally:
                connection.close()

        self.thread = threading.Thread(target=work, daemon=True)
        self.thread.start()
        assert self.reached.wait(WAIT), "the worker never reached its pause point"

    def resume(self) -> None:
        self.go.set()
        assert self.thread is not None
        self.thread.join(WAIT)
        assert not self.thread.is_alive()


@pytest.fixture
def before_claim(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[bool], Paused]]:
    """Pause (or kill) the worker after it read the compensation, before it claims the send."""

    def make(kill: bool) -> Paused:
        paused = Paused(kill)
        real = services.compensation_args

        def args(*a: Any, **k: Any) -> Any:
            paused.point()
            return real(*a, **k)

        monkeypatch.setattr(services, "compensation_args", args)
        return paused

    yield make


@pytest.fixture
def in_send(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[bool], Paused]]:
    """Pause (or kill) the worker inside the connector's call of the reversal, before it leaves."""

    def make(kill: bool) -> Paused:
        paused = Paused(kill)
        real = connectors.HttpConnector.perform

        def perform(self: Any, args: Any, idempotency_key: str) -> Any:
            if self.path == "payments/reverse":
                paused.point()
            return real(self, args, idempotency_key)

        monkeypatch.setattr(connectors.HttpConnector, "perform", perform)
        return paused

    yield make


def _assert_dropped_for(world: World) -> None:
    """The worker gave way to the person, on the record."""
    dropped = DroppedSend.objects.get(compensation_id=world.letter.compensation_id)
    assert (dropped.resolved_by_id, dropped.reason) == (world.lead.pk, "resolved_by_person")


def _assert_withdrawn_by(world: World) -> None:
    """The person's resolution withdrew the queued retry, on the record (their audit row)."""
    entry = AuditEntry.objects.get(action=AuditAction.DEAD_LETTER_RESOLVE)
    assert entry.user_id == world.lead.pk and entry.note == DO_NOT_SEND
    assert (entry.old_state["compensation_status"], entry.new_state["compensation_status"]) == (
        CompensationStatus.PENDING,
        CompensationStatus.DEAD_LETTERED,
    )


# --- the points ---------------------------------------------------------------------------------


def test_resolved_while_the_retry_is_queued_the_worker_drops_the_send(
    world: World, queued: list[int]
) -> None:
    state = _retry(world)
    assert queued == [world.letter.compensation_id]

    assert _resolve(world, state).status_code == 200
    # The queued retry is withdrawn with the decision: the compensation is back where it was.
    assert world.compensation().status == CompensationStatus.DEAD_LETTERED
    _deliver(world)  # the message arrives anyway

    _tally(world)
    assert world.undos() == 0
    assert (world.overwritten, world.sends_after_do_not_send) == (0, 0)
    assert world.fresh().resolved_by_id == world.lead.pk
    _assert_withdrawn_by(world)


def test_resolved_while_the_message_is_lost_nothing_requeues_it(world: World, queued: list[int]) -> None:
    state = _retry(world)
    queued.clear()  # the broker restarted empty
    assert _resolve(world, state).status_code == 200

    assert compensation_claim_stalled(quiet_for=timedelta(0)) == []
    _tally(world)
    assert world.undos() == 0
    assert (world.overwritten, world.sends_after_do_not_send) == (0, 0)


@pytest.mark.parametrize("kill", [False, True], ids=["paused", "killed"])
def test_resolved_while_the_worker_is_stopped_before_its_claim_the_send_is_dropped(
    world: World, queued: list[int], before_claim: Callable[[bool], Paused], kill: bool
) -> None:
    state = _retry(world)
    worker = before_claim(kill)
    worker.start(world)

    response = _resolve(world, state)
    assert response.status_code == 200, response.content.decode()[:500]
    worker.resume()
    if kill:
        assert isinstance(worker.error, WorkerKilled)
        worker.kill = False
        worker.go.set()
        _deliver(world)  # redelivered: acks_late, the killed worker never acknowledged it
    else:
        assert worker.error is None

    _tally(world)
    assert world.undos() == 0
    assert (world.overwritten, world.sends_after_do_not_send) == (0, 0)
    # Paused, the worker was past its first look and gives way at its claim; killed, the
    # redelivered message finds the retry withdrawn by the resolution.
    _assert_withdrawn_by(world)
    if not kill:
        _assert_dropped_for(world)
    letter = world.fresh()
    assert letter.resolved_at is not None and letter.resolution_note == DO_NOT_SEND


def test_paused_inside_the_send_the_resolution_is_refused_and_the_undo_happens_once(
    world: World, queued: list[int], in_send: Callable[[bool], Paused]
) -> None:
    state = _retry(world)
    worker = in_send(False)
    worker.start(world)

    stale = _resolve(world, state)  # decided on the page drawn before the send was claimed
    assert stale.status_code == 409
    assert "changed since you loaded it" in stale.content.decode()
    assert "being sent" in stale.content.decode()
    fresh = _resolve(world, world.fresh().state_token)  # and from a page that shows the send
    assert fresh.status_code == 409
    assert "cannot be called back" in fresh.content.decode()
    worker.resume()

    assert worker.error is None and worker.result is not None
    assert worker.result.status == CompensationStatus.DONE
    _tally(world)
    # The last decision a person could make was the retry: one reversal, no resolution to keep.
    assert world.undos() == 1
    assert world.accepted == [] and world.overwritten == 0
    assert world.fresh().resolved_by_id is None  # answered by the retry, not by a person


def test_paused_inside_a_send_that_fails_again_then_resolved_the_resolution_stands(
    world: World, queued: list[int], in_send: Callable[[bool], Paused]
) -> None:
    _retry(world)
    _fail_next_reversal(world.sandbox)
    worker = in_send(False)
    with override_settings(SEAM_COMPENSATION_MAX_ATTEMPTS=1):
        worker.start(world)
        worker.resume()
    assert worker.result is not None and worker.result.status == CompensationStatus.DEAD_LETTERED
    assert world.fresh().resolved_at is None  # reopened: no person had resolved it

    assert _resolve(world, world.fresh().state_token).status_code == 200
    _deliver(world)  # a duplicate message, after the decision
    _tally(world)
    assert world.undos() == 0
    assert (world.overwritten, world.sends_after_do_not_send) == (0, 0)


def test_killed_inside_the_send_the_resolution_waits_and_the_undo_happens_at_most_once(
    world: World, queued: list[int], in_send: Callable[[bool], Paused]
) -> None:
    state = _retry(world)
    worker = in_send(True)
    worker.start(world)
    worker.thread.join(WAIT)  # type: ignore[union-attr]
    assert isinstance(worker.error, WorkerKilled)

    # The send was claimed and may be on its way: a person cannot resolve it now.
    assert _resolve(world, state).status_code == 409
    assert _resolve(world, world.fresh().state_token).status_code == 409
    # Redelivered: the call is in doubt until reconciliation settles it, then sent under its key.
    worker.kill = False
    worker.go.set()
    assert _deliver(world) is None
    reconcile_sweep(older_than=timedelta(0), actor=EXECUTOR)
    _deliver(world)

    _tally(world)
    assert world.undos() <= 1
    assert world.accepted == [] and world.overwritten == 0


def test_a_worker_failing_never_rewrites_a_persons_resolution(world: World) -> None:
    """Defence in depth: whatever path a failing worker takes, a resolved letter is kept."""
    letter = world.fresh()
    resolved = _resolve(world, letter.state_token)
    assert resolved.status_code == 200
    kept = world.fresh()
    Compensation.objects.filter(pk=letter.compensation_id).update(status=CompensationStatus.PENDING)

    services._dead_letter(
        compensation=world.compensation(), error_class="permanent", error="refused again", actor=EXECUTOR
    )

    after = world.fresh()
    assert (after.resolved_at, after.resolved_by_id, after.resolution_note, after.error) == (
        kept.resolved_at,
        kept.resolved_by_id,
        DO_NOT_SEND,
        kept.error,
    )
