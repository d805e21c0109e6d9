"""The REST journal under a sustained load, with the dashboard in use: what it sustains, how fast
it answers, and whether anything it acknowledged is missing afterwards.

Against a real gunicorn server on loopback (3 sync workers by default, persistent database
connections), for a fresh tenant with an agent token of its own:

1. agents: N threads (8 by default), each an agent runtime with its own `seam_client.SeamClient`
   (the client agents use, with its retry policy: transport errors and 502/503/504 are sent
   again, which is safe because the same intent returns the same row). Together they drive an open-loop
   schedule of `--rate` calls per second for `--seconds`: call k is due at k / rate and goes to
   agent k mod N; an agent that falls behind starts its next call at once, and how late each
   call started is reported. A call is one journaled tool call: POST the intent (201), a
   dispatch that does nothing, POST the outcome (200). Each agent opens a run (with an
   `external_id`, so a retried create returns the same run) every `--calls-per-run` calls;
2. the dashboard in use: `--dashboard-sessions` staff sessions (2), each logged in through the
   login form, looping over the queue page, a run page (the tenant's stuck runs, seeded for the
   queue to show, and the agents' live runs in turn) and that page's panel poll with the state
   token the page carried, pausing `--dashboard-pause` seconds between requests;
3. the reconciliation, once the load has stopped, of what the server acknowledged against the
   tenant's rows in PostgreSQL: every intent acknowledged (201 created, or 200 found: counted
   once) is stored with the same idempotency key; every outcome acknowledged is `performed` in
   the database; no row is stored that no call asked for; no step has two rows and no intent two
   `intent_recorded` or `outcome_recorded` events (a retried request must never write twice).
   "Effects lost" is intents lost plus outcomes lost; it must be 0.

`--lose-answers F` throws away that fraction of the answers to the agents' writes after the server
has committed them, as a dropped connection would, so the client's retry policy is exercised under
load: a retried create returns the same run, a retried outcome changes nothing, and a retried
intent finds its own row (200). The client cannot tell that row from one another runtime left
open, so, by its rules, it does not settle it: such intents are reported "in doubt" and must be
exactly the rows left open.

Every HTTP request is timed (retries included, each on its own), so the report gives achieved
throughput (calls/s and requests/s), p50/p99/max latency of intent POSTs, outcome POSTs and each
dashboard page, and errors by request kind and status or exception. Run it from the project root:

    DJANGO_SETTINGS_MODULE=config.settings.test .venv/bin/python -m bench.load [--rate R] [--seconds S] [--json]

It is bounded: at most 120 seconds and 50,000 calls, loopback only. `--json` prints only a JSON
object of the figures on stdout; progress goes to stderr. The exit status is 1 when anything
acknowledged is missing, a row was written twice, or a call failed.

The database, `seam_bench_load` unless `--database` says otherwise, on the server DATABASE_URL
names, is created and migrated if missing (bench/journal.py's setup_django). Each run has a
tenant of its own, so its rows are counted apart from any earlier run's; in a database whose
name contains "bench" the handover tables are emptied with TRUNCATE at the end (`--keep-rows`
leaves them). tests/reliability/test_load.py runs the same load, smaller, on the suite's test
database on every `make test`.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import random
import re
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import httpx
import requests
from seam_client import SeamClient, SeamError

from bench.journal import BenchError, progress, setup_django, truncate_bench_tables
from devtools.processes import ProcessFailed, gunicorn_server, wait_until_serving

MAX_SECONDS = 120
MAX_CALLS = 50_000
TOOL = "load_call"
TASK_TYPE = "load"
STUCK_TASK_TYPE = "load-stuck"
BASELINE_TASK_TYPE = "load-baseline"
VERSIONS = {"schema": "1", "flow": "load-1", "policy": "load-1", "capability": "1"}
STAFF_PASSWORD = "load-staff-password"  # throwaway users in a bench or test database
SERVER_CONN_MAX_AGE = 60  # production's: persistent database connections
# How long after the schedule's end the agents may take to finish their last calls (the client
# retries for up to ~6 s per request; a request times out after `timeout`).
DRAIN_SECONDS = 90


@dataclass(frozen=True)
class LoadConfig:
    rate: float = 50.0  # calls per second, all agents together
    seconds: float = 30.0
    agents: int = 8
    calls_per_run: int = 50
    workers: int = 3
    worker_class: str = "sync"
    threads: int = 1
    dashboard_sessions: int = 2
    dashboard_pause: float = 0.25
    stuck_runs: int = 12
    timeout: float = 10.0  # per request, as the client's default
    lose_answers: float = 0.0  # fraction of write answers dropped after the commit (retried)
    baseline_calls: int = 40  # sequential calls by one client on the idle server, before the load

    @property
    def calls(self) -> int:
        return math.ceil(self.rate * self.seconds)

    def check(self) -> None:
        """Refuse a load that is not bounded or cannot mean anything."""
        problems = []
        if not 0 < self.seconds <= MAX_SECONDS:
            problems.append(f"seconds must be in (0, {MAX_SECONDS}]")
        if self.rate <= 0 or self.calls > MAX_CALLS:
            problems.append(f"rate x seconds must be from 1 to {MAX_CALLS:,} calls (asked {self.calls:,})")
        if not 1 <= self.agents <= 64:
            problems.append("agents must be from 1 to 64")
        if not 1 <= self.calls_per_run <= 10_000:
            problems.append("calls per run must be from 1 to 10000")
        if not 1 <= self.workers <= 16 or not 1 <= self.threads <= 16:
            problems.append("workers and threads must be from 1 to 16")
        if self.worker_class not in ("sync", "gthread"):
            problems.append("worker class must be sync or gthread")
        if not 0 <= self.dashboard_sessions <= 8 or self.dashboard_pause < 0:
            problems.append("dashboard sessions must be from 0 to 8, the pause not negative")
        if not 0 <= self.stuck_runs <= 200:
            problems.append("stuck runs must be from 0 to 200")
        if not 5 <= self.baseline_calls <= 1000:
            problems.append("baseline calls must be from 5 to 1000")
        if not 0 <= self.lose_answers <= 0.5:
            problems.append("lose answers must be a fraction from 0 to 0.5")
        if problems:
            raise BenchError("; ".join(problems))


# --- what is recorded -------------------------------------------------------------------------


@dataclass
class Attempt:
    """One HTTP request as it went over the wire (a retry is an attempt of its own)."""

    kind: str
    latency: float
    status: int | None  # None: no answer (the exception's name is in `error`)
    error: str = ""


@dataclass
class Call:
    """One journaled tool call of the schedule, and what the server acknowledged of it."""

    index: int
    agent: int
    run_id: str
    turn: int
    scheduled: float
    started: float = 0.0
    finished: float = 0.0
    step_id: str = ""  # as acknowledged by the intent POST
    key: str = ""
    intent: str = ""  # "created" (201), "found" (200), or "" when not acknowledged
    outcome_acknowledged: bool = False
    in_doubt: bool = False  # found open, not created by this request: the client does not settle it
    error: str = ""


def _kind_of(method: str, url: str) -> str:
    if url.endswith("/outcome/"):
        return "outcome"
    if url.endswith("/intents/"):
        return "intent"
    if url.endswith("/api/v1/runs/") and method.upper() == "POST":
        return "run_create"
    return "other"


LOST = "AnswerLost"


class RecordingTransport(httpx.HTTPTransport):
    """An HTTP transport that times every request the client sends through it, retries included,
    its answer read whole. With `lose_answers`, that fraction of the journal's writes (run
    creates, intents, outcomes) has its answer thrown away after the server committed it, as a
    dropped connection would: the client sees a transport error and sends the request again,
    which must not write again."""

    def __init__(self, attempts: list[Attempt], *, lose_answers: float = 0.0, seed: int = 0) -> None:
        super().__init__()
        self.attempts = attempts
        self.lose_answers = lose_answers
        self.dice = random.Random(seed)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        kind = _kind_of(request.method, request.url.path)
        t0 = time.perf_counter()
        try:
            response = super().handle_request(request)
            response.read()
        except httpx.TransportError as exc:
            self.attempts.append(Attempt(kind, time.perf_counter() - t0, None, type(exc).__name__))
            raise
        if kind != "other" and self.lose_answers and self.dice.random() < self.lose_answers:
            response.close()
            self.attempts.append(Attempt(kind, time.perf_counter() - t0, None, LOST))
            raise httpx.ReadError(f"the answer ({response.status_code}) was lost (injected)", request=request)
        self.attempts.append(Attempt(kind, time.perf_counter() - t0, response.status_code))
        return response


# --- the tenant -------------------------------------------------------------------------------


@dataclass
class Tenancy:
    tenant: Any
    slug: str
    token: str
    staff: list[str]
    stuck_runs: list[str]


def tenancy_create(config: LoadConfig) -> Tenancy:
    """A fresh tenant with an agent token, staff users of the support_staff role, and a few runs
    gone quiet mid-sequence, so the queue and the run pages have something to show."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.utils import timezone

    from compensations.defaults import catalogue_grant_roles
    from console.roles import roles_grant
    from journal import services
    from journal.models import AgentToken, Membership, Run, Tenant
    from journal.tool_errors import DispatchResult

    slug = f"load-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    tenant = Tenant.objects.create(slug=slug, name=f"Load test {slug}")
    token = AgentToken.new_secret()
    AgentToken.objects.create(tenant=tenant, name="load-agents", digest=AgentToken.digest_of(token))

    roles_grant()
    catalogue_grant_roles()
    support = Group.objects.get(name="support_staff")
    staff = []
    for n in range(1, max(1, config.dashboard_sessions) + 1):
        user, _ = get_user_model().objects.get_or_create(
            username=f"load-staff-{n}", defaults={"is_active": True}
        )
        user.set_password(STAFF_PASSWORD)
        user.save()
        Membership.objects.update_or_create(user=user, defaults={"tenant": tenant})
        user.groups.add(support)
        staff.append(user.get_username())

    actor = services.Actor.agent("load-stuck-agent")
    stuck = []
    for n in range(config.stuck_runs):
        run = services.run_create(
            tenant=tenant,
            task_type=STUCK_TASK_TYPE,
            versions=VERSIONS,
            ticket_id=f"T-L{n:04d}",
            order_id=f"SU-L{n:04d}",
            plan=[{"tool": TOOL, "args": {"stuck": n, "step": step}} for step in range(3)],
            actor=actor,
        ).run
        for step in range(2):
            services.perform(
                run=run,
                tool=TOOL,
                args={"stuck": n, "step": step},
                turn=step,
                actor=actor,
                dispatch=lambda args, key: DispatchResult(receipt={"ok": True}),
            )
        services.intent_record(run=run, tool=TOOL, args={"stuck": n, "step": 2}, turn=2, actor=actor)
        stuck.append(str(run.pk))
    # Silent for an hour: the queue lists them as stuck (no sweep runs here to settle them).
    Run.objects.filter(pk__in=stuck).update(last_heartbeat_at=timezone.now() - timedelta(hours=1))
    return Tenancy(tenant=tenant, slug=slug, token=token, staff=staff, stuck_runs=stuck)


# --- the agents -------------------------------------------------------------------------------


class Agent:
    """One agent runtime: its own client and session, its share of the schedule."""

    def __init__(self, index: int, base: str, tenancy: Tenancy, config: LoadConfig, live_runs: list[str]):
        self.index = index
        self.config = config
        self.slug = tenancy.slug
        self.attempts: list[Attempt] = []
        self.calls: list[Call] = []
        self.runs_created: set[str] = set()
        self.live_runs = live_runs
        self.client = SeamClient(
            base,
            tenancy.token,
            timeout=config.timeout,
            transport=RecordingTransport(self.attempts, lose_answers=config.lose_answers, seed=index),
        )

    def work(self, t0: float) -> None:
        config = self.config
        run_id = ""
        for nth, k in enumerate(itertools.count(self.index, config.agents)):
            if k >= config.calls:
                break
            scheduled = t0 + k / config.rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            elif time.perf_counter() >= t0 + config.seconds:
                # Bounded in time: what was due but could not start within the schedule is
                # counted as not started, not sent late.
                break
            turn = nth % config.calls_per_run
            call = Call(index=k, agent=self.index, run_id=run_id, turn=turn, scheduled=scheduled)
            call.started = time.perf_counter()
            try:
                if turn == 0 or not run_id:
                    run_id = call.run_id = ""  # a failed open is retried by the next call
                    run_id = call.run_id = self.run_open(nth // config.calls_per_run)
                self.perform(call)
            except SeamError as exc:
                call.error = f"{type(exc).__name__}: {exc}"[:300]
            call.finished = time.perf_counter()
            self.calls.append(call)

    def run_open(self, nth_run: int) -> str:
        run_id = self.client.start_run(
            task_type=TASK_TYPE,
            versions=VERSIONS,
            external_id=f"{self.slug}:agent-{self.index}:run-{nth_run}",
            ticket_id=f"T-{self.index}-{nth_run}",
        ).id
        self.runs_created.add(run_id)
        self.live_runs.append(run_id)
        return run_id

    def perform(self, call: Call) -> None:
        """The client's `perform`, with a dispatch that does nothing, spelled out so that what
        each request acknowledged is kept: the same rules (an intent found open is not ours to
        settle), the same requests."""
        run = self.client.run(call.run_id)
        intent = run.record_intent(
            TOOL, {"call": call.index, "agent": self.index}, turn=call.turn, occurrence=0
        )
        call.step_id, call.key = intent.step_id, intent.idempotency_key
        call.intent = "found" if intent.replayed else "created"
        if intent.settled:
            call.outcome_acknowledged = intent.status == "performed"  # already settled: a replay
            return
        if intent.replayed:
            call.in_doubt = True
            return
        settled = run.record_outcome(call.step_id, ok=True, summary="load", receipt={"call": call.index})
        if settled.status != "performed":
            call.error = f"outcome answered 200 with status {settled.status!r}"
            return
        call.outcome_acknowledged = True

    def close(self) -> None:
        self.client.close()


# --- the dashboard ----------------------------------------------------------------------------


class Dashboard:
    """A person at the console: logged in, looking at the queue, then a run, whose page polls."""

    STATE = re.compile(r'data-state="([^"]+)"')

    def __init__(self, base: str, username: str, watch: Callable[[int], str], pause: float) -> None:
        self.base = base
        self.username = username
        self.watch = watch
        self.pause = pause
        self.session = requests.Session()
        self.attempts: list[Attempt] = []
        self.unexpected: Counter[str] = Counter()

    def log_in(self) -> None:
        login = f"{self.base}/accounts/login/"
        page = self.session.get(login, timeout=30)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        if page.status_code != 200 or token is None:
            raise BenchError(f"login page answered {page.status_code} without a CSRF token")
        answer = self.session.post(
            login,
            data={"username": self.username, "password": STAFF_PASSWORD, "csrfmiddlewaretoken": token[1]},
            headers={"Referer": login},
            allow_redirects=False,
            timeout=30,
        )
        if answer.status_code != 302 or "sessionid" not in self.session.cookies:
            raise BenchError(f"logging in as {self.username} answered {answer.status_code}")

    def get(self, kind: str, path: str, expect: tuple[int, ...]) -> requests.Response | None:
        t0 = time.perf_counter()
        try:
            answer = self.session.get(self.base + path, allow_redirects=False, timeout=30)
        except requests.RequestException as exc:
            self.attempts.append(Attempt(kind, time.perf_counter() - t0, None, type(exc).__name__))
            return None
        self.attempts.append(Attempt(kind, time.perf_counter() - t0, answer.status_code))
        if answer.status_code not in expect:
            self.unexpected[f"{kind} {answer.status_code}"] += 1
            return None
        return answer

    def loop(self, stop: threading.Event) -> None:
        for visit in itertools.count():
            if stop.is_set():
                return
            self.get("queue", "/", (200,))
            stop.wait(self.pause)
            run_id = self.watch(visit)
            page = self.get("run_page", f"/runs/{run_id}/", (200,))
            state = self.STATE.search(page.text) if page is not None else None
            for _ in range(2):
                if stop.wait(self.pause):
                    return
                if state is not None:
                    # 204 when the run is as the page shows it; 200 with the new panel when an
                    # agent has written to it since.
                    self.get("panel", f"/runs/{run_id}/panel/?state={state[1]}", (200, 204))
            stop.wait(self.pause)

    def close(self) -> None:
        self.session.close()


# --- figures ----------------------------------------------------------------------------------


def latency_summary(values: list[float]) -> dict[str, Any]:
    """Nearest-rank percentiles, in milliseconds."""
    if not values:
        return {"count": 0, "p50_ms": None, "p99_ms": None, "max_ms": None, "mean_ms": None}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)] * 1e3

    return {
        "count": len(ordered),
        "p50_ms": rank(0.50),
        "p99_ms": rank(0.99),
        "max_ms": ordered[-1] * 1e3,
        "mean_ms": sum(ordered) / len(ordered) * 1e3,
    }


def errors_of(attempts: list[Attempt], ok: dict[str, tuple[int, ...]]) -> dict[str, int]:
    counted: Counter[str] = Counter()
    for a in attempts:
        if a.status is None:
            counted[f"{a.kind} {a.error}"] += 1
        elif a.status not in ok.get(a.kind, (200, 201)):
            counted[f"{a.kind} {a.status}"] += 1
    return dict(sorted(counted.items()))


# --- the reconciliation -----------------------------------------------------------------------


def reconcile(tenancy: Tenancy, calls: list[Call], runs_created: set[str]) -> dict[str, Any]:
    """What the server acknowledged, against what the tenant's rows say."""
    from django.db.models import Count

    from journal.models import Intent, IntentStatus, JournalEvent, Run

    load_runs = Run.objects.filter(tenant=tenancy.tenant, task_type=TASK_TYPE)
    rows = list(
        Intent.objects.filter(run__in=load_runs).values_list("run_id", "step_id", "idempotency_key", "status")
    )
    stored = {(str(run_id), step_id): (key, status) for run_id, step_id, key, status in rows}

    acknowledged = [c for c in calls if c.intent]
    acknowledged_steps = {(c.run_id, c.step_id) for c in acknowledged}
    created_steps = [(c.run_id, c.step_id) for c in acknowledged if c.intent == "created"]
    # The step each unanswered call would have written (the journal's step id, run:turn:tool):
    # a row there is a request whose answer was lost, not a row nobody asked for.
    unanswered = {(c.run_id, f"{c.run_id}:{c.turn}:{TOOL}") for c in calls if not c.intent and c.run_id}

    intents_lost = sorted(
        c.step_id for c in acknowledged if stored.get((c.run_id, c.step_id), ("", ""))[0] != c.key
    )
    outcomes_lost = sorted(
        c.step_id
        for c in acknowledged
        if c.outcome_acknowledged and stored.get((c.run_id, c.step_id), ("", ""))[1] != IntentStatus.PERFORMED
    )
    not_acknowledged = set(stored) - acknowledged_steps
    extra = sorted(step for _, step in not_acknowledged - unanswered)
    events = JournalEvent.objects.filter(
        run__in=load_runs, kind__in=[JournalEvent.Kind.INTENT_RECORDED, JournalEvent.Kind.OUTCOME_RECORDED]
    )
    doubled_events = (
        events.values("intent_id", "kind").annotate(n=Count("id")).filter(n__gt=1).order_by().count()
    )
    performed_rows = sum(1 for _, status in stored.values() if status == IntentStatus.PERFORMED)
    runs_stored = set(map(str, load_runs.values_list("pk", flat=True)))
    return {
        "calls_started": len(calls),
        "intents_acknowledged": len(acknowledged_steps),
        "intents_created_201": len(created_steps),
        "intents_found_200": sum(1 for c in acknowledged if c.intent == "found"),
        "intents_in_doubt": sum(1 for c in calls if c.in_doubt),
        "intents_stored": len(stored),
        "outcomes_acknowledged": sum(1 for c in calls if c.outcome_acknowledged),
        "outcomes_stored": performed_rows,
        # Rows left open: exactly the intents the client found open after a lost answer and, by
        # its rules, left to reconciliation.
        "intents_open_stored": sum(1 for _, status in stored.values() if status == IntentStatus.INTENDED),
        "intents_lost": len(intents_lost),
        "outcomes_lost": len(outcomes_lost),
        "effects_lost": len(intents_lost) + len(outcomes_lost),
        # Stored, unacknowledged, but a call to that step went unanswered: in doubt, not lost.
        "stored_unacknowledged": len(not_acknowledged) - len(extra),
        "extra_rows": len(extra),
        # A step acknowledged as created (201) twice, or an intent with two recorded events: a
        # retried request that wrote again.
        "duplicate_creations": len(created_steps) - len(set(created_steps)),
        "duplicate_events": doubled_events,
        "runs_acknowledged": len(runs_created),
        "runs_stored": len(runs_stored),
        "runs_lost": len(runs_created - runs_stored),
        "examples": {
            "intents_lost": intents_lost[:5],
            "outcomes_lost": outcomes_lost[:5],
            "extra": extra[:5],
        },
    }


# --- the run ----------------------------------------------------------------------------------


def measure_idle(base: str, tenancy: Tenancy, dashboard: Dashboard | None, calls: int) -> dict[str, Any]:
    """The baseline, on the same server just before the load: one client making `calls` calls
    one after another (on a run of its own, outside the reconciliation), and one person fetching
    the queue and a run page, each after a few warm-up requests that every worker serves."""
    attempts: list[Attempt] = []
    client = SeamClient(base, tenancy.token, transport=RecordingTransport(attempts))
    run = client.start_run(task_type=BASELINE_TASK_TYPE, versions=VERSIONS)
    warmup = 6
    for n in range(warmup + calls):
        if n == warmup:
            attempts.clear()
        intent = run.record_intent(TOOL, {"baseline": n}, turn=n, occurrence=0)
        run.record_outcome(intent.step_id, ok=True, summary="baseline")
    client.close()
    by_kind: dict[str, list[float]] = {}
    if dashboard is not None:
        page = f"/runs/{tenancy.stuck_runs[0]}/" if tenancy.stuck_runs else f"/runs/{run.id}/"
        for n in range(warmup + calls // 2):
            if n == warmup:
                dashboard.attempts.clear()
            dashboard.get("queue", "/", (200,))
            dashboard.get("run_page", page, (200,))
        for a in dashboard.attempts:
            by_kind.setdefault(a.kind, []).append(a.latency)
        dashboard.attempts.clear()
        dashboard.unexpected.clear()
    for a in attempts:
        by_kind.setdefault(a.kind, []).append(a.latency)
    return {
        "intent_post": latency_summary(by_kind.get("intent", [])),
        "outcome_post": latency_summary(by_kind.get("outcome", [])),
        "queue_page": latency_summary(by_kind.get("queue", [])),
        "run_page": latency_summary(by_kind.get("run_page", [])),
    }


def run_load(config: LoadConfig, *, database_url: str) -> dict[str, Any]:
    """The whole load test against the database Django is configured for (whose URL the server
    is given): tenant, server, agents and dashboards, then the reconciliation."""
    config.check()
    tenancy = tenancy_create(config)
    progress(
        f"tenant {tenancy.slug}: {config.calls:,} calls at {config.rate:g}/s over {config.seconds:g}s "
        f"by {config.agents} agents, {config.dashboard_sessions} dashboard sessions"
    )
    live_runs: list[str] = []
    with gunicorn_server(
        database_url=database_url,
        workers=config.workers,
        worker_class=config.worker_class,
        conn_max_age=SERVER_CONN_MAX_AGE,
        threads=config.threads,
    ) as (base, server):
        # Until the server answers the agent token (a cold worker on a busy machine can take
        # seconds over its first request, which loads the application).
        wait_until_serving(
            base,
            server,
            "/api/v1/runs/",
            headers={"Authorization": f"Bearer {tenancy.token}"},
            what="answer the agent token",
            timeout=60.0,
            request_timeout=10.0,
        )
        agents = [Agent(i, base, tenancy, config, live_runs) for i in range(config.agents)]

        def watch(visit: int) -> str:
            # Alternately a stuck run (its panel answers 204) and a run an agent is writing to.
            if visit % 2 and live_runs:
                return live_runs[-1 - (visit // 2) % min(len(live_runs), config.agents)]
            if tenancy.stuck_runs:
                return tenancy.stuck_runs[visit % len(tenancy.stuck_runs)]
            return live_runs[-1] if live_runs else tenancy.stuck_runs[0]

        dashboards = [
            Dashboard(base, tenancy.staff[i], watch, config.dashboard_pause)
            for i in range(config.dashboard_sessions)
        ]
        for dashboard in dashboards:
            dashboard.log_in()
        progress(f"baseline: {config.baseline_calls} calls by one client, then pages, on the idle server")
        idle = measure_idle(base, tenancy, dashboards[0] if dashboards else None, config.baseline_calls)
        progress(f"load: {config.seconds:g}s")
        stop = threading.Event()
        failures: list[BaseException] = []

        def guarded(target: Callable[..., None], *args: Any) -> threading.Thread:
            def run() -> None:
                try:
                    target(*args)
                except BaseException as exc:
                    failures.append(exc)

            return threading.Thread(target=run, daemon=True)

        dashboard_threads = [guarded(d.loop, stop) for d in dashboards]
        if not tenancy.stuck_runs and dashboards:
            # Nothing to look at until the agents have opened a run.
            agents[0].run_open(10**6)
        for thread in dashboard_threads:
            thread.start()
        t0 = time.perf_counter() + 0.2  # every agent thread started before the first call is due
        agent_threads = [guarded(a.work, t0) for a in agents]
        for thread in agent_threads:
            thread.start()
        deadline = time.monotonic() + config.seconds + DRAIN_SECONDS
        for thread in agent_threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        load_wall = time.perf_counter() - t0
        stop.set()
        for thread in dashboard_threads:
            thread.join(timeout=60)
        if any(t.is_alive() for t in agent_threads + dashboard_threads):
            raise BenchError(f"the load did not drain within {DRAIN_SECONDS}s of the schedule's end")
        if failures:
            raise BenchError(f"a load thread failed: {failures[0]!r}") from failures[0]
        for agent in agents:
            agent.close()
        for dashboard in dashboards:
            dashboard.close()

    calls = sorted((c for a in agents for c in a.calls), key=lambda c: c.index)
    agent_attempts = [at for a in agents for at in a.attempts]
    dashboard_attempts = [at for d in dashboards for at in d.attempts]
    runs_created = set().union(*(a.runs_created for a in agents))
    reconciliation = {"calls_scheduled": config.calls, **reconcile(tenancy, calls, runs_created)}

    done = [c for c in calls if c.outcome_acknowledged]
    lag = [max(0.0, c.started - c.scheduled) for c in calls]
    by_kind: dict[str, list[float]] = {}
    for a in agent_attempts + dashboard_attempts:
        by_kind.setdefault(a.kind, []).append(a.latency)
    ok = {
        "intent": (200, 201),
        "outcome": (200,),
        "run_create": (200, 201),
        "queue": (200,),
        "run_page": (200,),
    }
    ok["panel"] = (200, 204)
    failed_calls = Counter(c.error.split(":")[0] for c in calls if c.error)
    latency = {
        "intent_post": latency_summary(by_kind.get("intent", [])),
        "outcome_post": latency_summary(by_kind.get("outcome", [])),
        "run_create": latency_summary(by_kind.get("run_create", [])),
        "call": latency_summary([c.finished - c.started for c in done]),
        "call_from_schedule": latency_summary([c.finished - c.scheduled for c in done]),
        "queue_page": latency_summary(by_kind.get("queue", [])),
        "run_page": latency_summary(by_kind.get("run_page", [])),
        "panel_poll": latency_summary(by_kind.get("panel", [])),
    }

    def ratio(name: str, figure: str) -> float | None:
        loaded, alone = latency[name][figure], idle[name][figure]
        return loaded / alone if loaded is not None and alone else None

    return {
        "config": asdict(config),
        "tenant": tenancy.slug,
        "server": {
            "workers": config.workers,
            "worker_class": config.worker_class,
            "threads": config.threads,
            "conn_max_age": SERVER_CONN_MAX_AGE,
            "settings": os.environ.get("DJANGO_SETTINGS_MODULE", ""),
        },
        "wall_seconds": load_wall,
        "throughput": {
            "calls_per_s": len(done) / load_wall,
            "agent_requests_per_s": len(agent_attempts) / load_wall,
            "dashboard_requests_per_s": len(dashboard_attempts) / load_wall,
            "target_calls_per_s": config.rate,
        },
        "latency": latency,
        # The baseline: the same requests, one at a time, on the idle server.
        "idle": idle,
        "under_load_over_idle": {
            name: {"p50": ratio(name, "p50_ms"), "p99": ratio(name, "p99_ms")} for name in idle
        },
        "start_lag": {
            **latency_summary(lag),
            "late_over_100ms": sum(1 for s in lag if s > 0.1),
        },
        "panel_statuses": dict(Counter(str(a.status) for a in dashboard_attempts if a.kind == "panel")),
        "errors": {
            "agent_requests": errors_of(agent_attempts, ok),
            "dashboard_requests": errors_of(dashboard_attempts, ok),
            "server_errors_5xx": sum(
                1 for a in agent_attempts + dashboard_attempts if a.status is not None and a.status >= 500
            ),
            "retried_requests": sum(1 for a in agent_attempts if a.status is None or a.status >= 500),
            "answers_lost_injected": dict(Counter(a.kind for a in agent_attempts if a.error == LOST)),
            "failed_calls": dict(failed_calls),
            "failed_call_examples": [c.error for c in calls if c.error][:5],
        },
        "reconciliation": reconciliation,
        "nothing_lost": reconciliation["effects_lost"] == 0
        and reconciliation["extra_rows"] == 0
        and reconciliation["duplicate_creations"] == 0
        and reconciliation["duplicate_events"] == 0
        and reconciliation["runs_lost"] == 0,
    }


def render(result: dict[str, Any]) -> str:
    config, server, r = result["config"], result["server"], result["reconciliation"]
    t, errors = result["throughput"], result["errors"]

    def ms(value: float | None) -> str:
        return f"{value:9.1f}" if value is not None else f"{'—':>9}"

    lines = [
        f"Seam load test: {config['rate']:g} calls/s for {config['seconds']:g}s, {config['agents']} agents "
        f"(seam_client over REST), {config['dashboard_sessions']} dashboard sessions",
        f"server: gunicorn, {server['workers']} {server['worker_class']} workers x {server['threads']} "
        f"thread(s), {server['settings']}, CONN_MAX_AGE={server['conn_max_age']}; tenant {result['tenant']}",
        "",
        f"throughput: {t['calls_per_s']:.1f} calls/s (target {t['target_calls_per_s']:g}), "
        f"{t['agent_requests_per_s']:.1f} agent requests/s, {t['dashboard_requests_per_s']:.1f} dashboard "
        f"requests/s, over {result['wall_seconds']:.1f}s",
        "",
        f"{'latency under load':<44}{'count':>7}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
        f"{'idle p50':>10}{'idle p99':>10}{'p50/idle':>10}",
        "-" * 108,
    ]
    labels = {
        "intent_post": "intent POST (201)",
        "outcome_post": "outcome POST (200)",
        "run_create": "run create POST",
        "call": "call: intent + outcome",
        "call_from_schedule": "call, from when it was due (open loop)",
        "queue_page": "dashboard: queue page",
        "run_page": "dashboard: run page",
        "panel_poll": "dashboard: run panel poll (200/204)",
    }
    for name, label in labels.items():
        f = result["latency"][name]
        line = f"{label:<44}{f['count']:>7}{ms(f['p50_ms'])}{ms(f['p99_ms'])}{ms(f['max_ms'])}"
        if name in result["idle"]:
            alone, over = result["idle"][name], result["under_load_over_idle"][name]["p50"]
            line += f" {ms(alone['p50_ms'])} {ms(alone['p99_ms'])}" + (f"{over:10.2f}" if over else "")
        lines.append(line)
    lag = result["start_lag"]
    lines += [
        f"idle: {result['config']['baseline_calls']} calls by one client, one after another, and as many "
        "page fetches, on the same server before the load",
        f"start lag behind the schedule: p50 {lag['p50_ms'] or 0:.1f} ms, p99 {lag['p99_ms'] or 0:.1f} ms, "
        f"max {lag['max_ms'] or 0:.1f} ms; {lag['late_over_100ms']} calls started over 100 ms late",
        f"panel poll answers: {result['panel_statuses']}",
        "",
        f"errors: agent requests {errors['agent_requests'] or 'none'}; dashboard requests "
        f"{errors['dashboard_requests'] or 'none'}; 5xx {errors['server_errors_5xx']}; "
        f"retried {errors['retried_requests']} (answers lost on purpose: "
        f"{errors['answers_lost_injected'] or 'none'}); failed calls {errors['failed_calls'] or 'none'}",
        *(f"  {example}" for example in errors["failed_call_examples"]),
        "",
        "reconciliation (acknowledged by the server vs rows in PostgreSQL, this tenant):",
        f"  calls scheduled {r['calls_scheduled']:,}, started {r['calls_started']:,} (the rest were due "
        "when the schedule had ended: the server did not keep up)"
        if r["calls_started"] < r["calls_scheduled"]
        else f"  calls scheduled and started {r['calls_scheduled']:,}",
        f"  runs acknowledged {r['runs_acknowledged']}, stored {r['runs_stored']}",
        f"  intents acknowledged {r['intents_acknowledged']:,} ({r['intents_created_201']:,} created 201, "
        f"{r['intents_found_200']} found 200, {r['intents_in_doubt']} in doubt), stored {r['intents_stored']:,} "
        f"({r['intents_open_stored']} left open)",
        f"  outcomes acknowledged {r['outcomes_acknowledged']:,}, performed rows stored {r['outcomes_stored']:,}",
        f"  intents lost {r['intents_lost']}, outcomes lost {r['outcomes_lost']}; "
        f"stored but unanswered {r['stored_unacknowledged']}; extra rows {r['extra_rows']}; "
        f"duplicate creations {r['duplicate_creations']}, duplicate events {r['duplicate_events']}",
        f"Effects lost: {r['effects_lost']}" + ("" if result["nothing_lost"] else "   NOT CLEAN"),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    defaults = LoadConfig()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=defaults.rate, help="calls per second (default 50)")
    parser.add_argument("--seconds", type=float, default=defaults.seconds, help="duration (default 30)")
    parser.add_argument("--agents", type=int, default=defaults.agents, help="agent threads (default 8)")
    parser.add_argument("--calls-per-run", type=int, default=defaults.calls_per_run, help="default 50")
    parser.add_argument("--workers", type=int, default=defaults.workers, help="gunicorn workers (default 3)")
    parser.add_argument("--worker-class", choices=["sync", "gthread"], default=defaults.worker_class)
    parser.add_argument("--threads", type=int, default=defaults.threads, help="threads per gthread worker")
    parser.add_argument("--dashboard-sessions", type=int, default=defaults.dashboard_sessions)
    parser.add_argument(
        "--dashboard-pause",
        type=float,
        default=defaults.dashboard_pause,
        help="seconds between page requests",
    )
    parser.add_argument(
        "--lose-answers",
        type=float,
        default=0.0,
        help="fraction of write answers thrown away after the commit, so the client retries (default 0)",
    )
    parser.add_argument(
        "--baseline-calls", type=int, default=defaults.baseline_calls, help="idle calls measured first"
    )
    parser.add_argument("--database", default="seam_bench_load", help="database (default seam_bench_load)")
    parser.add_argument("--keep-rows", action="store_true", help="leave the run's rows in a bench database")
    parser.add_argument("--json", action="store_true", help="print only a JSON object of the figures")
    args = parser.parse_args(argv)
    config = LoadConfig(
        rate=args.rate,
        seconds=args.seconds,
        agents=args.agents,
        calls_per_run=args.calls_per_run,
        workers=args.workers,
        worker_class=args.worker_class,
        threads=args.threads,
        dashboard_sessions=args.dashboard_sessions,
        dashboard_pause=args.dashboard_pause,
        lose_answers=args.lose_answers,
        baseline_calls=args.baseline_calls,
    )
    try:
        config.check()
    except BenchError as exc:
        parser.error(str(exc))
    # A terminated run still stops its server (`finally` in gunicorn_server).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        # Runs of more calls than SEAM_MAX_INTENTS_PER_RUN allows by default are admitted (the
        # server inherits this environment).
        limit = max(1000, config.calls_per_run)
        os.environ["SEAM_MAX_INTENTS_PER_RUN"] = os.environ.get("SEAM_MAX_INTENTS_PER_RUN") or str(limit)
        database_url = setup_django(args.database)
        try:
            result = run_load(config, database_url=database_url)
        finally:
            if "bench" in args.database and not args.keep_rows:
                try:
                    truncate_bench_tables(args.database)
                except Exception as exc:  # never hide the error that brought us here
                    progress(f"could not empty the handover tables of {args.database}: {exc}")
    except (BenchError, ProcessFailed) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render(result))
    clean = result["nothing_lost"] and not result["errors"]["failed_calls"]
    return 0 if clean else 1


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
