"""journal.transitions: the one owner of intent and run statuses. The allowed transitions are
exactly the tables' (listed here), a forbidden one is refused with nothing written, an allowed
one is a compare-and-swap that bumps the run's version and writes its event, and no other module
of the product writes a status by hand."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from journal import services, transitions
from journal import sql as journal_sql
from journal.models import Intent, IntentStatus, JournalEvent, Run, RunStatus
from journal.services import Actor, Conflict
from journal.transitions import TransitionRefused
from tests.test_layers import ROOT, SEAM_PACKAGES

pytestmark = pytest.mark.django_db

SYSTEM = Actor.system("test-transitions")


# --- the tables -------------------------------------------------------------------------------


def test_the_intent_table_lists_exactly_the_allowed_transitions() -> None:
    expected = {
        (IntentStatus.INTENDED, IntentStatus.PERFORMED),
        (IntentStatus.INTENDED, IntentStatus.FAILED),
        (IntentStatus.INTENDED, IntentStatus.NOT_PERFORMED),
        (IntentStatus.INTENDED, IntentStatus.UNKNOWN),
        (IntentStatus.INTENDED, IntentStatus.ALREADY_SO),
        (IntentStatus.INTENDED, IntentStatus.INTENDED),
        (IntentStatus.UNKNOWN, IntentStatus.PERFORMED),
        (IntentStatus.UNKNOWN, IntentStatus.NOT_PERFORMED),
        (IntentStatus.UNKNOWN, IntentStatus.ALREADY_SO),
        (IntentStatus.UNKNOWN, IntentStatus.INTENDED),
        (IntentStatus.NOT_PERFORMED, IntentStatus.INTENDED),
    }
    assert expected == transitions.INTENT_TRANSITIONS


def test_the_run_table_lists_exactly_the_allowed_transitions() -> None:
    expected = {
        (RunStatus.RUNNING, RunStatus.COMPLETED),
        (RunStatus.RUNNING, RunStatus.ESCALATED),
        (RunStatus.RUNNING, RunStatus.COMPENSATED),
        (RunStatus.RUNNING, RunStatus.CANCELLED),
        (RunStatus.RUNNING, RunStatus.RUNNING),
        (RunStatus.ESCALATED, RunStatus.RUNNING),
        (RunStatus.ESCALATED, RunStatus.COMPENSATED),
        (RunStatus.ESCALATED, RunStatus.ESCALATED),
        (RunStatus.COMPENSATED, RunStatus.RUNNING),
        (RunStatus.COMPENSATED, RunStatus.ESCALATED),
        (RunStatus.COMPLETED, RunStatus.ESCALATED),
        (RunStatus.CANCELLED, RunStatus.CANCELLED),
    }
    assert expected == transitions.RUN_TRANSITIONS


def test_every_edge_says_why_and_ends_stay_ends() -> None:
    for edges in (transitions.INTENT_EDGES, transitions.RUN_EDGES):
        assert all(why.strip() for why in edges.values())
    # A settled call is never reopened, a finished run never returned to its agent.
    assert not {
        (s, t)
        for s, t in transitions.INTENT_TRANSITIONS
        if s in (IntentStatus.PERFORMED, IntentStatus.FAILED, IntentStatus.ALREADY_SO)
    }
    assert not {
        (s, t)
        for s, t in transitions.RUN_TRANSITIONS
        if s in (RunStatus.COMPLETED, RunStatus.CANCELLED) and t == RunStatus.RUNNING
    }


# --- refused ----------------------------------------------------------------------------------


def _snapshot(run: Run) -> tuple[Any, ...]:
    fresh = Run.objects.get(pk=run.pk)
    return (
        fresh.status,
        fresh.version,
        fresh.updated_at,
        list(JournalEvent.objects.filter(run=run).values_list("pk", flat=True)),
    )


def test_a_forbidden_run_transition_is_refused_and_changes_nothing(make_run: Any, agent_actor: Actor) -> None:
    run = services.run_complete(run=make_run(plan=[]), actor=agent_actor)
    before = _snapshot(run)

    with pytest.raises(TransitionRefused) as refused:
        transitions.run_transition(
            run=run,
            source=RunStatus.COMPLETED,
            target=RunStatus.RUNNING,
            actor=SYSTEM,
            event=JournalEvent.Kind.RUN_RESUMED,
        )

    assert isinstance(refused.value, Conflict) and refused.value.status_code == 409
    assert "completed → running" in refused.value.message
    assert _snapshot(run) == before
    assert run.status == RunStatus.COMPLETED  # the caller's copy is left alone too


def test_one_forbidden_source_refuses_the_whole_change(make_run: Any) -> None:
    run = make_run(plan=[])
    before = _snapshot(run)
    with pytest.raises(TransitionRefused, match="cancelled → completed"):
        transitions.run_transition(
            run=run,
            source=(RunStatus.RUNNING, RunStatus.CANCELLED),
            target=RunStatus.COMPLETED,
            actor=SYSTEM,
            event=JournalEvent.Kind.RUN_COMPLETED,
        )
    assert _snapshot(run) == before


def test_a_forbidden_intent_transition_is_refused_and_changes_nothing(
    make_run: Any, agent_actor: Actor
) -> None:
    run = make_run(plan=[])
    intent = services.intent_record(run=run, tool="note_call", args={}, turn=1, actor=agent_actor).intent
    services.outcome_record(intent=intent, ok=True, summary="done", actor=agent_actor)
    before = (Intent.objects.get(pk=intent.pk).status, _snapshot(run))

    for target in (IntentStatus.INTENDED, IntentStatus.FAILED, IntentStatus.UNKNOWN):
        with pytest.raises(TransitionRefused, match=f"performed → {target}"):
            transitions.intent_transition(
                intent=intent,
                source=IntentStatus.PERFORMED,
                target=target,
                actor=SYSTEM,
                event=JournalEvent.Kind.INTENT_READMITTED,
            )

    assert (Intent.objects.get(pk=intent.pk).status, _snapshot(run)) == before


def test_status_and_version_cannot_be_passed_as_other_changes(make_run: Any) -> None:
    run = make_run(plan=[])
    for smuggled in ({"status": RunStatus.COMPLETED}, {"version": 99}):
        with pytest.raises(ValueError, match="written by the transition"):
            transitions.run_transition(
                run=run,
                source=RunStatus.RUNNING,
                target=RunStatus.CANCELLED,
                actor=SYSTEM,
                event=JournalEvent.Kind.RUN_CANCELLED,
                changes=smuggled,
            )
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


# --- moved, or not --------------------------------------------------------------------------


def test_a_run_transition_bumps_the_version_and_writes_its_event(make_run: Any) -> None:
    run = make_run(plan=[])
    version = run.version

    moved = transitions.run_transition(
        run=run,
        source=RunStatus.RUNNING,
        target=RunStatus.CANCELLED,
        actor=SYSTEM,
        event=JournalEvent.Kind.RUN_CANCELLED,
        data={"reason": "customer withdrew"},
        changes={"outcome_detail": "customer withdrew"},
    )

    stored = Run.objects.get(pk=run.pk)
    assert moved.moved and moved.target == RunStatus.CANCELLED
    assert (stored.status, stored.outcome_detail, stored.version) == (
        RunStatus.CANCELLED,
        "customer withdrew",
        version + 1,
    )
    assert (run.status, run.version) == (stored.status, stored.version)  # the caller's copy follows
    event = JournalEvent.objects.filter(run=run).latest("id")
    assert moved.event == event
    assert (event.kind, event.actor_name, event.data, event.intent_id) == (
        JournalEvent.Kind.RUN_CANCELLED,
        "test-transitions",
        {"reason": "customer withdrew"},
        None,
    )


def test_a_row_already_moved_is_not_moved_and_nothing_is_written(make_run: Any, agent_actor: Actor) -> None:
    run = make_run(plan=[])
    stale = Run.objects.get(pk=run.pk)
    services.run_cancel(run=run, reason="customer withdrew", actor=agent_actor)
    before = _snapshot(run)

    # The stale copy still says running: the compare-and-swap finds the row moved by someone else.
    moved = transitions.run_transition(
        run=stale,
        source=stale.status,
        target=RunStatus.COMPLETED,
        actor=SYSTEM,
        event=JournalEvent.Kind.RUN_COMPLETED,
    )

    assert (moved.moved, moved.event) == (False, None)
    assert _snapshot(run) == before
    assert stale.status == RunStatus.RUNNING


def test_an_intent_transition_writes_its_event_and_leaves_the_run_version(
    make_run: Any, agent_actor: Actor
) -> None:
    run = make_run(plan=[])
    intent = services.intent_record(run=run, tool="note_call", args={}, turn=1, actor=agent_actor).intent
    version = Run.objects.get(pk=run.pk).version

    moved = transitions.intent_transition(
        intent=intent,
        source=IntentStatus.INTENDED,
        target=IntentStatus.UNKNOWN,
        actor=SYSTEM,
        event=JournalEvent.Kind.INTENT_RECONCILED,
        data={"status": IntentStatus.UNKNOWN},
        changes={"unknown_reason": "the provider cannot say"},
    )
    again = transitions.intent_transition(
        intent=Intent.objects.get(pk=intent.pk),
        source=IntentStatus.INTENDED,
        target=IntentStatus.NOT_PERFORMED,
        actor=SYSTEM,
        event=JournalEvent.Kind.INTENT_RECONCILED,
    )

    stored = Intent.objects.get(pk=intent.pk)
    assert (stored.status, stored.unknown_reason) == (IntentStatus.UNKNOWN, "the provider cannot say")
    assert (intent.status, intent.unknown_reason) == (IntentStatus.UNKNOWN, "the provider cannot say")
    assert moved.moved and moved.event is not None
    assert (moved.event.kind, moved.event.intent_id, moved.event.run_id) == (
        JournalEvent.Kind.INTENT_RECONCILED,
        intent.pk,
        run.pk,
    )
    assert not again.moved  # the second sweeper's settle finds the row settled
    assert JournalEvent.objects.filter(intent=intent, kind=JournalEvent.Kind.INTENT_RECONCILED).count() == 1
    assert Run.objects.get(pk=run.pk).version == version


# --- the hot path -----------------------------------------------------------------------------


def test_the_hot_path_settles_from_the_status_the_table_names() -> None:
    assert transitions.outcome_source(target=IntentStatus.PERFORMED) == IntentStatus.INTENDED
    assert transitions.outcome_source(target=IntentStatus.FAILED) == IntentStatus.INTENDED
    with pytest.raises(TransitionRefused):
        transitions.outcome_source(target="settled_somehow")
    # SETTLE_INTENT binds the expected status rather than spelling it out.
    assert "'intended'" not in journal_sql.SETTLE_INTENT
    created = timezone.now()
    params = journal_sql.settle_intent_params(
        intent_id=7,
        run_created_at=created,
        source=transitions.OUTCOME_SOURCE,
        settled=journal_sql.settled_columns(
            status=IntentStatus.PERFORMED,
            error_class="",
            summary="",
            receipt_json="{}",
            request_id="",
            now=timezone.now(),
        ),
        actor_kind="agent",
        actor_name="bot",
        user_id=None,
    )
    assert params[6:9] == (7, created, "intended")


# --- nobody else writes a status --------------------------------------------------------------

OWNER = Path("journal/transitions.py")
ROW_WRITES = {"update", "create", "get_or_create", "update_or_create", "bulk_create", "bulk_update"}
ROW_NAMES = {"Run", "Intent", "intents", "runs", "run", "intent", "locked"}
STATUS_TYPES = {"RunStatus", "IntentStatus"}


def _callee(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else ast.unparse(call.func)


def _forwarders(tree: ast.AST) -> set[str]:
    """Functions of the module that pass their **keywords on to an update of a run or an intent
    (console.actions' `_bump`): called with a `status`, they write it by hand too."""
    found = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or function.args.kwarg is None:
            continue
        for call in ast.walk(function):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr in ROW_WRITES
                and _names(call.func.value) & ROW_NAMES
                and any(
                    k.arg is None and isinstance(k.value, ast.Name) and k.value.id == function.args.kwarg.arg
                    for k in call.keywords
                )
            ):
                found.add(function.name)
    return found


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def hand_written_status_changes(source: str) -> Iterator[tuple[int, str]]:
    """(line, code) for each write of a run's or an intent's status outside journal.transitions:
    an ORM write naming `status` on a run or intent queryset (or with a RunStatus / IntentStatus
    value), a call with a `status` to a helper that forwards its keywords to such a write, an
    assignment of a status to a run or intent, a save() of its status. A status hidden in a
    dictionary spread into a write (`.update(**columns)`) is not seen."""
    tree = ast.parse(source)
    forwarders = _forwarders(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and _callee(node) in forwarders
            and any(keyword.arg == "status" for keyword in node.keywords)
        ):
            yield node.lineno, ast.unparse(node)[:120]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = _names(node.func.value)
            if node.func.attr in ROW_WRITES:
                for keyword in node.keywords:
                    if keyword.arg == "status" and (
                        receiver & ROW_NAMES or _names(keyword.value) & STATUS_TYPES
                    ):
                        yield node.lineno, ast.unparse(node)[:120]
            if node.func.attr == "save" and receiver & ROW_NAMES:
                for keyword in node.keywords:
                    if keyword.arg == "update_fields" and "'status'" in ast.unparse(keyword.value):
                        yield node.lineno, ast.unparse(node)[:120]
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for element in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if not (isinstance(element, ast.Attribute) and element.attr == "status"):
                        continue
                    if _names(element.value) & ROW_NAMES or (
                        node.value and _names(node.value) & STATUS_TYPES
                    ):
                        yield node.lineno, ast.unparse(node)[:120]


def _product_modules() -> Iterator[Path]:
    for package in SEAM_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts and path.relative_to(ROOT) != OWNER:
                yield path


def test_no_module_but_the_owner_writes_a_run_or_intent_status() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {code}"
        for path in _product_modules()
        for line, code in hand_written_status_changes(path.read_text())
    ]
    assert found == [], "change these statuses through journal.transitions:\n" + "\n".join(found)


def test_the_check_finds_a_hand_written_compare_and_swap() -> None:
    source = (
        "Intent.objects.filter(pk=pk, status=IntentStatus.INTENDED).update(status=status)\n"
        "Run.objects.filter(pk=run.pk).update(version=F('version') + 1, status=RunStatus.ESCALATED)\n"
        "locked.status = RunStatus.CANCELLED\n"
        "locked.save(update_fields=['status', 'version'])\n"
        "intent.status, intent.note = status, ''\n"
        "queryset.update(status=RunStatus.COMPLETED)\n"
        "def _bump(run, **changes):\n"
        "    Run.objects.filter(pk=run.pk).update(version=F('version') + 1, **changes)\n"
        "_bump(run, status=RunStatus.RUNNING, ended_at=None)\n"
        "_bump(run, awaiting_person=False)\n"
        # Reads, and statuses of other rows, are not status changes of a run or an intent:
        "Run.objects.filter(status=RunStatus.RUNNING).update(last_heartbeat_at=now)\n"
        "FanOutBranch.objects.filter(pk=row.pk, status=BranchStatus.PENDING).update(status=row.status)\n"
        "row.status = BranchStatus.OK\n"
    )
    assert sorted(line for line, _ in hand_written_status_changes(source)) == [1, 2, 3, 4, 5, 6, 9]
