"""Runs a scripted ticket the way an agent runtime would: a run with its plan, then each step
through the real journal and the real connectors to the sandbox, in process or over REST, with
what the customer was told recorded as it is said.

The kill-point harness lives here too: `kill_after_writes=N` hard-kills this process (SIGKILL:
no cleanup, no `finally`, no atexit) once N writes have been recorded as performed,
`kill_between_intent_and_call=N` kills it after the Nth write's intent is committed but before
its call leaves (the provider never hears of it: an open intent whose lookup says not
performed), and `kill_between_accept_and_record=N` kills it after the Nth write's provider
accepted the call but before its outcome is committed — the window in which a call's outcome is
ambiguous. Each holds for both transports: the dispatch is this process's in either.
`writes_killed` puts the same kill points into code that is not the runner (a resumption, a
compensation)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import seam_client
from django.utils import timezone

from fanout.services import FanOutResult, fanout_hand_over, fanout_run
from fanout.spec import GroupSpec
from journal import services as journal
from journal.models import Run, Tenant
from journal.tool_errors import DispatchResult, ToolError
from tools import services as tools
from tools.registry import get_tool

from .flows import Flow
from .registry import get_flow, get_ticket
from .tickets import Ticket

AGENT_NAME = "scripted-agent"


def hard_kill() -> None:
    """Die now, as a pod does on eviction: no exception handlers, no cleanup."""
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class KillPlan:
    after_writes: int | None = None
    between_intent_and_call: int | None = None
    between_accept_and_record: int | None = None
    kill: Callable[[], None] = hard_kill


@contextlib.contextmanager
def writes_killed(kill: KillPlan) -> Iterator[None]:
    """While open, every call this process sends through the journal (`journal.services.perform`:
    a resumption's steps, a compensation's undo) counts as a write, and the process is killed at
    the plan's kill point: after the Nth call's outcome is committed, after its intent is
    committed and before it is sent, or after its provider accepted it and before the outcome
    is committed. A call answered from an earlier, settled
    attempt sends nothing and does not count. The harness wraps the journal from outside, so
    production code carries no test-only branch."""
    real_perform = journal.perform
    sent = 0

    def perform(**kwargs: Any) -> journal.Performed:
        nonlocal sent
        real_dispatch = kwargs.pop("dispatch")
        dispatched = False

        def dispatch(call_args: dict[str, Any], key: str) -> DispatchResult:
            nonlocal sent, dispatched
            if kill.between_intent_and_call == sent + 1:
                kill.kill()  # our intent row is committed; the provider never hears of it
            result: DispatchResult = real_dispatch(call_args, key)
            sent += 1
            dispatched = True
            if kill.between_accept_and_record == sent:
                kill.kill()  # the provider has it; our outcome row never will
            return result

        done = real_perform(dispatch=dispatch, **kwargs)
        if dispatched and kill.after_writes == sent:
            kill.kill()
        return done

    journal.perform = perform
    try:
        yield
    finally:
        journal.perform = real_perform


@dataclass
class RunReport:
    run_id: str
    writes_performed: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    # Set when a fan-out's outcome or merged decision handed the run to a person.
    handed_over: FanOutResult | None = None


def prepare_facts(ticket: Ticket) -> dict[str, Any]:
    """The ticket's facts, completed by its preconditions' receipts."""
    facts = dict(ticket.facts)
    for pre in ticket.preconditions:
        receipt = (
            get_tool(pre.tool)
            .get_connector()
            .perform(pre.args, f"precondition:{ticket.ticket_id}:{pre.tool}")
        )
        facts.update({fact: receipt.receipt[name] for fact, name in pre.facts.items()})
    return facts


def _as_call(dispatch: Callable[[dict[str, Any], str], DispatchResult]) -> seam_client.Call:
    """A connector's dispatch as seam_client calls it: its result as an Outcome, its ToolError as
    seam_client's (the original kept as the cause)."""

    def call(args: dict[str, Any], key: str) -> seam_client.Outcome:
        try:
            result = dispatch(args, key)
        except ToolError as exc:
            raise seam_client.ToolError(exc.error_class, exc.message, request_id=exc.request_id) from exc
        return seam_client.Outcome(
            summary=result.summary,
            receipt=result.receipt,
            request_id=result.request_id,
            evidence_at=result.evidence_at,
        )

    return call


class _Journal:
    """The two ways a runtime writes to Seam, behind one interface."""

    def start(self, *, flow: Flow, ticket: Ticket, facts: dict[str, Any], external_id: str) -> str:
        raise NotImplementedError

    def perform(
        self, run_id: str, tool: str, args: dict[str, Any], dispatch: Any, turn: int
    ) -> dict[str, Any]:
        raise NotImplementedError

    def tell(self, run_id: str, body: str, about_steps: list[str]) -> None:
        raise NotImplementedError

    def complete(self, run_id: str) -> None:
        raise NotImplementedError

    def gather(self, run_id: str, spec: GroupSpec, facts: dict[str, Any], turn: int) -> FanOutResult:
        raise NotImplementedError

    def hand_over(self, result: FanOutResult) -> None:
        raise NotImplementedError


class InProcessJournal(_Journal):
    def __init__(self, tenant: Tenant) -> None:
        self.tenant = tenant
        self.actor = journal.Actor.agent(AGENT_NAME)
        self.runs: dict[str, Run] = {}

    def start(self, *, flow: Flow, ticket: Ticket, facts: dict[str, Any], external_id: str) -> str:
        run = journal.run_create(
            tenant=self.tenant,
            task_type=flow.task_type,
            versions=flow.run_versions(),
            plan=flow.plan(facts),
            ticket_id=ticket.ticket_id,
            order_id=ticket.order_id,
            external_id=external_id,
            deadline=timezone.now() + timedelta(hours=4),
            actor=self.actor,
        ).run
        self.runs[str(run.pk)] = run
        return str(run.pk)

    def perform(
        self, run_id: str, tool: str, args: dict[str, Any], dispatch: Any, turn: int
    ) -> dict[str, Any]:
        done = journal.perform(
            run=self.runs[run_id], tool=tool, args=args, dispatch=dispatch, turn=turn, actor=self.actor
        )
        return {"status": done.intent.status, "receipt": done.intent.receipt, "step_id": done.intent.step_id}

    def tell(self, run_id: str, body: str, about_steps: list[str]) -> None:
        journal.customer_message_record(
            run=self.runs[run_id], channel="chat", body=body, about_steps=about_steps, actor=self.actor
        )

    def complete(self, run_id: str) -> None:
        journal.run_complete(run=self.runs[run_id], actor=self.actor)

    def gather(self, run_id: str, spec: GroupSpec, facts: dict[str, Any], turn: int) -> FanOutResult:
        return fanout_run(run=self.runs[run_id], spec=spec, turn=turn, facts=facts, actor=self.actor)

    def hand_over(self, result: FanOutResult) -> None:
        fanout_hand_over(result=result, actor=self.actor)


class RestJournal(_Journal):
    """The journal over REST, through seam_client: what an agent runtime in another process uses."""

    def __init__(self, base_url: str, token: str) -> None:
        self.client = seam_client.SeamClient(base_url, token)
        self.runs: dict[str, seam_client.Run] = {}

    def start(self, *, flow: Flow, ticket: Ticket, facts: dict[str, Any], external_id: str) -> str:
        run = self.client.start_run(
            task_type=flow.task_type,
            versions=flow.run_versions(),
            plan=flow.plan(facts),
            ticket_id=ticket.ticket_id,
            order_id=ticket.order_id,
            external_id=external_id or None,
            deadline=timezone.now() + timedelta(hours=4),
        )
        self.runs[run.id] = run
        return run.id

    def perform(
        self, run_id: str, tool: str, args: dict[str, Any], dispatch: Any, turn: int
    ) -> dict[str, Any]:
        # Occurrence 0, as in process: each step of a flow has a turn of its own.
        done = self.runs[run_id].perform(tool, args, _as_call(dispatch), turn=turn, occurrence=0)
        return {"status": done.status, "receipt": done.receipt, "step_id": done.step_id}

    def tell(self, run_id: str, body: str, about_steps: list[str]) -> None:
        self.runs[run_id].tell_customer("chat", body, about_steps=about_steps)

    def complete(self, run_id: str) -> None:
        self.runs[run_id].complete()

    # Fan-outs have no REST endpoint yet: this runtime, which runs beside Seam's database in the
    # scripted scenarios, records them in process under the same run.
    def gather(self, run_id: str, spec: GroupSpec, facts: dict[str, Any], turn: int) -> FanOutResult:
        run = Run.objects.get(pk=run_id)
        return fanout_run(run=run, spec=spec, turn=turn, facts=facts, actor=journal.Actor.agent(AGENT_NAME))

    def hand_over(self, result: FanOutResult) -> None:
        fanout_hand_over(result=result, actor=journal.Actor.agent(AGENT_NAME))


def run_ticket(
    ticket_id: str, *, journal_writer: _Journal, kill: KillPlan | None = None, external_id: str = ""
) -> RunReport:
    ticket = get_ticket(ticket_id)
    flow = get_flow(ticket.task_type)
    kill = kill or KillPlan()
    facts = prepare_facts(ticket)
    run_id = journal_writer.start(flow=flow, ticket=ticket, facts=facts, external_id=external_id)
    report = RunReport(run_id=run_id)
    writes = 0
    if kill.after_writes == 0:
        kill.kill()
    for turn, step in enumerate(flow.steps, start=1):
        if isinstance(step, GroupSpec):
            # Reads only: a fan-out never moves a kill point. Its outcome and merged decision
            # say whether the plan may go on; if not, a person gets the run with the coverage.
            result = journal_writer.gather(run_id, step.bind(facts), facts, turn)
            report.reads.append(step.name)
            if not result.proceed:
                journal_writer.hand_over(result)
                report.handed_over = result
                return report
            continue
        args = step.bind(facts)
        if not step.write:
            tools.tool_read(tool=step.tool, args=args)
            report.reads.append(step.tool)
            continue
        connector = get_tool(step.tool).get_connector()
        number = writes + 1

        def dispatch(
            call_args: dict[str, Any], key: str, _number: int = number, _connector: Any = connector
        ) -> DispatchResult:
            if kill.between_intent_and_call == _number:
                kill.kill()  # our intent row is committed; the provider never hears of it
            result: DispatchResult = _connector.perform(call_args, key)
            if kill.between_accept_and_record == _number:
                kill.kill()  # the provider has it; our outcome row never will
            return result

        done = journal_writer.perform(run_id, step.tool, args, dispatch, turn)
        writes = number
        report.writes_performed.append(step.tool)
        if step.tell_customer:
            # The message reports the step just performed: the flow says so, so the link is declared.
            journal_writer.tell(run_id, step.tell_customer, [done["step_id"]])
        if kill.after_writes == writes:
            kill.kill()
    journal_writer.complete(run_id)
    return report
