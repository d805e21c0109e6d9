"""Reads of the run journal, always scoped to one tenant. Each returns a queryset (or row) with
its related rows already joined or prefetched, so a page or response runs a fixed number of
queries however many runs or steps there are."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import (
    Case,
    CharField,
    Count,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce

from audit.models import AuditEntry, AuditVerification
from compensations.models import DeadLetter
from compensations.selectors import open_dead_letters_of
from journal.models import (
    Escalation,
    Intent,
    IntentStatus,
    JournalEvent,
    Membership,
    OutcomeReason,
    Run,
    RunStatus,
    Tenant,
)
from journal.selectors import runs_with_counts as journal_runs_with_counts
from journal.selectors import stuck_runs_q

# --- the staff dashboard ----------------------------------------------------------------------


@dataclass(frozen=True)
class QueueFilters:
    task_type: str = ""
    reason: str = ""
    status: str = ""
    assignee: str = ""  # "me", "none", or a username
    q: str = ""  # any part of a ticket id, order id or customer reference, any case: every run
    sort: str = "deadline"  # "deadline" (nearest first, then oldest) or "oldest"

    @property
    def narrowed(self) -> bool:
        """Whether these filters show less than the whole queue (the order does not)."""
        return bool(self.task_type or self.reason or self.status or self.assignee or self.q.strip())


def _queue_base(*, tenant: Tenant, now: datetime) -> QuerySet[Run]:
    """Runs waiting for a person (escalated, not yet resolved) and runs that are stuck
    (journal.selectors.stuck_runs: running, silent past the threshold of what they wait on).
    Both sides imply the condition of the partial indexes run_queue_deadline_idx and
    run_queue_oldest_idx (awaiting a person, or running), which hold the queue's rows only."""
    return Run.objects.filter(tenant=tenant).filter(Q(awaiting_person=True) | stuck_runs_q(now=now))


def _created_window(runs: QuerySet[Run]) -> Window:
    """The oldest and newest creation time of `runs` (the queue: two ends of an index), or None
    when there are none."""
    ends = runs.aggregate(oldest=Min("created_at"), newest=Max("created_at"))
    return None if ends["oldest"] is None else (ends["oldest"], ends["newest"])


STUCK = "run_stuck"
# A run still waiting for a person whose reason no longer holds: the unknown outcome was settled
# (a lookup's retry, a person's mark), or the failed undo's dead letter was resolved. The run
# needs a person to check and resolve it, no longer for what it was handed over for.
ANSWERED = "reason_answered"
# What a run is now, beside its stated status: an escalated or compensated run whose
# escalation a person resolved is not waiting for anyone (handover.advice, NOTHING_WAITING).
RESOLVED = "resolved"
COMPENSATED_RESOLVED = "compensated_resolved"


# The creation times of the runs a query reads (their oldest and newest), when known: every
# subquery of the journal's tables then also names that range of their partition column as
# constants, and PostgreSQL plans only the months in it, not every month kept (journal.partitions).
Window = tuple[datetime, datetime] | None


def _in_window(window: Window) -> Q:
    """The rows of the outer run's month (`run_created_at` = the run's `created_at`), within
    `window` when there is one."""
    months = Q(run_created_at=OuterRef("created_at"))
    if window is not None:
        months &= Q(run_created_at__gte=window[0], run_created_at__lte=window[1])
    return months


def _call_of_run(status: str, window: Window = None) -> Subquery:
    """Whether the run has a call in `status`. A scalar subquery, run per row through the
    run's own indexes (intent_unknown_idx for an unknown one), not Exists: PostgreSQL may answer
    an EXISTS in the select list with a hashed subplan that reads every intent of every run (a
    parallel scan of the whole journal, ~250 ms at 1M intents)."""
    return Subquery(
        Intent.objects.filter(_in_window(window), run=OuterRef("pk"), status=status)
        .order_by()
        .annotate(found=Value(True))
        .values("found")[:1]
    )


def _open_dead_letter() -> Subquery:
    """Whether an undo of the run failed and its dead letter is still open (the rule
    handover.advice.reason_now applies to a failed compensation)."""
    return Subquery(
        open_dead_letters_of(OuterRef("pk")).order_by().annotate(found=Value(True)).values("found")[:1]
    )


def with_reason_now(runs: QuerySet[Run], window: Window = None) -> QuerySet[Run]:
    """Each run with `queue_reason`, why it is in the queue now, computed from its current rows
    as handover.advice.reason_now does: its stated reason while that holds, ANSWERED once its
    unknown outcome was settled or its dead letter resolved, STUCK for a running run nobody was
    asked about, "" for a run nobody waits on."""
    # A call is still uncertain (handover.lists.uncertain_steps) when its outcome is unknown, or
    # when it is open on a run nobody runs. The run is the outer row, so its status is read there
    # rather than joined again, and the open call is only looked for when the run is not running
    # and has no unknown call (PostgreSQL evaluates AND and OR left to right, stopping early).
    runs = runs.annotate(
        has_unknown=Coalesce(_call_of_run(IntentStatus.UNKNOWN, window), Value(False)),
        reason_open_call=Coalesce(_call_of_run(IntentStatus.INTENDED, window), Value(False)),
        reason_dead_letter=Coalesce(_open_dead_letter(), Value(False)),
    )
    # Each condition in the order it is evaluated (a Q's keywords would be sorted by name): the
    # stated reason first, so that the lookups run only for the runs it concerns.
    unknown = (
        Q(outcome_reason=OutcomeReason.UNKNOWN_OUTCOME)
        & Q(has_unknown=False)
        & (Q(status=RunStatus.RUNNING) | Q(reason_open_call=False))
    )
    undo = Q(outcome_reason=OutcomeReason.COMPENSATION_FAILED) & Q(reason_dead_letter=False)
    return runs.annotate(
        queue_reason=Case(
            When(Q(awaiting_person=False, status=RunStatus.RUNNING), then=Value(STUCK)),
            When(awaiting_person=False, then=Value("")),
            When(unknown | undo, then=Value(ANSWERED)),
            default=Coalesce(F("outcome_reason"), Value("")),
            output_field=CharField(),
        ),
    )


def status_now_case() -> Case:
    """What the run is now: its status, except that an escalated run whose escalation was
    resolved is RESOLVED, and a compensated one that had a person asked COMPENSATED_RESOLVED,
    never "Escalated" (the run page's header says the same)."""
    return Case(
        When(Q(status=RunStatus.ESCALATED, awaiting_person=False), then=Value(RESOLVED)),
        When(
            Q(status=RunStatus.COMPENSATED, awaiting_person=False) & ~Q(outcome_reason=""),
            then=Value(COMPENSATED_RESOLVED),
        ),
        default=F("status"),
        output_field=CharField(),
    )


def _status_q(status: str) -> Q:
    """Runs that are `status` now: "escalated" excludes those resolved, "resolved" takes both
    kinds of resolved run."""
    if status == RESOLVED:
        return Q(status_now__in=[RESOLVED, COMPENSATED_RESOLVED])
    return Q(status_now=status)


# The columns a search reads: what a person has in hand when a customer calls or writes.
SEARCHED = ("ticket_id", "order_id", "customer_ref")


def search_q(text: str, *, through: str = "") -> Q:
    """Runs whose ticket id, order id or customer reference contains `text`, in any case (rows
    that reach their run `through` a relation, e.g. "run__", with it). `icontains` is UPPER(col)
    LIKE UPPER('%text%') with `%` and `_` escaped, which the trigram indexes run_ticket_trgm_idx,
    run_order_trgm_idx and run_customer_trgm_idx answer (journal.models.Run)."""
    text = text.strip()
    found = Q()
    for column in SEARCHED:
        found |= Q(**{f"{through}{column}__icontains": text})
    return found


def queue_runs(*, tenant: Tenant, user: Any, filters: QueueFilters, now: datetime) -> QuerySet[Run]:
    """The queue's runs in the queue's order, or with a search (`filters.q`) every run of the
    tenant that matches, ended ones included: a person looking for a ticket should find it
    whether or not it waits for them. The rows alone: queue_rows adds what a page shows of each."""
    if filters.q.strip():
        runs = Run.objects.filter(tenant=tenant).filter(search_q(filters.q))
    else:
        runs = _queue_base(tenant=tenant, now=now)
    runs = runs.annotate(status_now=status_now_case())
    if filters.task_type:
        runs = runs.filter(task_type=filters.task_type)
    if filters.reason == STUCK:
        # In the queue every run not awaiting a person is stuck; a search must ask the rule.
        runs = runs.filter(awaiting_person=False)
        if filters.q.strip():
            runs = runs.filter(stuck_runs_q(now=now))
    elif filters.reason:
        # The reason it waits for now: a settled unknown outcome is no longer "unknown". Every
        # run filtered is asked, so the subqueries name the months of all of them.
        runs = with_reason_now(runs, None if filters.q.strip() else _created_window(runs))
        runs = runs.filter(Q(queue_reason=filters.reason), awaiting_person=True)
    if filters.status:
        runs = runs.filter(_status_q(filters.status))
    if filters.assignee == "me":
        runs = runs.filter(assignee=user)
    elif filters.assignee == "none":
        runs = runs.filter(assignee__isnull=True)
    elif filters.assignee:
        runs = runs.filter(assignee__username=filters.assignee)
    runs = runs.select_related("assignee")
    # Each order is an index's own (run_queue_deadline_idx, run_queue_oldest_idx): the first page
    # is read in order and stops at its last row, instead of sorting the whole queue.
    if filters.sort == "oldest":
        return runs.order_by("created_at", "id")
    return runs.order_by(F("deadline").asc(nulls_last=True), "created_at", "id")


# What queue_rows adds to each run of a page.
QUEUE_ROW_FIELDS = ("queue_reason", "status_now", "has_unknown", "last_event_id", "last_audit_seq")


def queue_rows(runs: Iterable[Run]) -> list[Run]:
    """A page of queue_runs, each run with why it waits now (`queue_reason`, `status_now`), whether
    a call's outcome is unknown (`has_unknown`, the "?" badge: both with_reason_now's), and
    its newest journal event and audit entry (`last_event_id`, `last_audit_seq`: the state a
    row's action posts back). A run gone from the journal since the page was read is left out.

    Read in a second query, by the page's ids: each subquery of the journal's tables then names
    the months of the page's own runs, so PostgreSQL plans the months the page reads (usually
    one), not every month the queue spans or the journal keeps (journal.partitions)."""
    page = list(runs)
    if not page:
        return page
    window = (min(run.created_at for run in page), max(run.created_at for run in page))
    last_event = (
        JournalEvent.objects.filter(_in_window(window), run=OuterRef("pk")).order_by("-id").values("id")[:1]
    )
    last_audit = AuditEntry.objects.filter(run=OuterRef("pk")).order_by("-seq").values("seq")[:1]
    shown = (
        with_reason_now(Run.objects.filter(pk__in=[run.pk for run in page]), window)
        .annotate(
            status_now=status_now_case(),
            last_event_id=Coalesce(Subquery(last_event), 0),
            last_audit_seq=Coalesce(Subquery(last_audit), 0),
        )
        .order_by()
        .values("pk", *QUEUE_ROW_FIELDS)
    )
    found = {row.pop("pk"): row for row in shown}
    for run in page:
        for name, value in found.get(run.pk, {}).items():
            setattr(run, name, value)
    return [run for run in page if run.pk in found]


@dataclass(frozen=True)
class QueueCounts:
    """How many runs wait for each reason (stuck runs under "run_stuck"), how many of all the
    waiting runs are the person's own, and the task types among them (for the queue's filter)."""

    by_reason: dict[str, int]
    mine: int
    task_types: list[str]

    @property
    def total(self) -> int:
        return sum(self.by_reason.values())


def queue_counts(*, tenant: Tenant, user_id: int | None, now: datetime) -> QueueCounts:
    """The queue's counts per reason, the person's own (`user_id`'s) and its task types, in one
    query: grouped by reason and task type, a scan of run_queue_deadline_idx, which holds the
    queue's rows only, and, for each run escalated for an unknown outcome or a failed undo,
    whether that still holds (with_reason_now: at most two lookups by the run's own indexes). Its
    cost follows the queue's length, not the journal's size."""
    rows = (
        with_reason_now(_queue_base(tenant=tenant, now=now))
        .values("queue_reason", "task_type")  # type: ignore[misc]  # with_reason_now's annotation
        .annotate(
            n=Count("id"),
            mine=Count("id", filter=Q(assignee_id=user_id)) if user_id is not None else Value(0),
        )
        .order_by("queue_reason", "task_type")
    )
    by_reason: dict[str, int] = {}
    task_types: set[str] = set()
    mine = 0
    for row in rows:
        reason = row["queue_reason"] or "unspecified"
        by_reason[reason] = by_reason.get(reason, 0) + row["n"]
        task_types.add(row["task_type"])
        mine += row["mine"]
    return QueueCounts(by_reason=by_reason, mine=mine, task_types=sorted(task_types))


def queue_reason_counts(*, tenant: Tenant, now: datetime) -> dict[str, int]:
    """How many runs wait for each reason (stuck runs under "run_stuck"), in one query."""
    return queue_counts(tenant=tenant, user_id=None, now=now).by_reason


def escalations_since(*, tenant: Tenant, since: datetime) -> int:
    """Runs handed to a person after `since` and still waiting (the open queue's tab title),
    read from the open escalations' partial index."""
    return (
        Escalation.objects.filter(resolved_at__isnull=True, created_at__gt=since, run__tenant=tenant)
        .values("run_id")
        .distinct()
        .count()
    )


@dataclass(frozen=True)
class AuditFilters:
    person: str = ""
    run: str = ""
    action: str = ""
    since: date | None = None
    until: date | None = None


def audit_entries(*, tenant: Tenant, filters: AuditFilters) -> QuerySet[AuditEntry]:
    entries = AuditEntry.objects.filter(tenant=tenant).select_related("run")
    if filters.person:
        entries = entries.filter(username=filters.person)
    if filters.run.strip():
        entries = _audit_run_filtered(entries, tenant=tenant, text=filters.run.strip())
    if filters.action:
        entries = entries.filter(action=filters.action)
    if filters.since:
        entries = entries.filter(at__date__gte=filters.since)
    if filters.until:
        entries = entries.filter(at__date__lte=filters.until)
    return entries.order_by("-at", "-seq")


# A run id's characters: a fragment of only these may be part of one (and anything shorter
# than this would match most runs, so it is read as a ticket's or order's fragment only).
_RUN_ID_CHARS = frozenset("0123456789abcdef-")
_RUN_ID_FRAGMENT_MIN = 4
# The most runs an id's fragment is taken to name: four hex digits name one run in ~2,000.
_RUN_ID_MATCHES_MAX = 1000


def _audit_run_filtered(entries: QuerySet[AuditEntry], *, tenant: Tenant, text: str) -> QuerySet[AuditEntry]:
    """Entries about a run found as the queue's search finds it (search_q: any part of its
    ticket id, order id or customer reference, in any case), or by any part of its id, as it was
    copied from a page or a log ("2fcf4fa9", "2FCF4FA9-6c3b"). A whole id is looked up by its
    primary key. The runs a search finds are read from their trigram indexes, and the entries
    by their run. The runs an id's fragment names are read first, apart, from the tenant's
    entries' own run ids: asked in one statement with the rest, PostgreSQL could not guess how
    few they are and joined every run to every entry (~400 ms at 300,000 runs and 100,000
    entries; apart, ~40 ms)."""
    try:
        return entries.filter(run_id=uuid.UUID(text))
    except ValueError:
        pass
    found = Q(run_id__in=Run.objects.filter(tenant=tenant).filter(search_q(text)).values("pk"))
    lowered = text.lower()
    if len(lowered) >= _RUN_ID_FRAGMENT_MIN and set(lowered) <= _RUN_ID_CHARS:
        named = (
            AuditEntry.objects.filter(tenant=tenant, run_id__isnull=False)
            .annotate(run_text=Cast("run_id", CharField()))
            .filter(run_text__contains=lowered)
            .order_by()
            .values_list("run_id", flat=True)
            .distinct()[:_RUN_ID_MATCHES_MAX]
        )
        found |= Q(run_id__in=list(named))
    return entries.filter(found)


@dataclass(frozen=True)
class VerificationShown:
    """What the audit page says of the chain's checks: the newest finished one, and whether a
    newer one is still waiting for the worker."""

    last: AuditVerification | None
    pending: AuditVerification | None


# A check still unfinished this long after it was asked for was lost (the broker down when it was
# queued, say): the page stops waiting for it and offers the button again.
VERIFICATION_WAIT = timedelta(minutes=10)


def audit_verification_shown(*, tenant: Tenant, now: datetime) -> VerificationShown:
    """The tenant's own checks only: another tenant's (or the whole chain's, from manage.py
    verify_audit) count and name rows that are not this tenant's."""
    checks = AuditVerification.objects.filter(tenant=tenant)
    last = checks.filter(finished_at__isnull=False).first()
    pending = checks.filter(finished_at__isnull=True, requested_at__gt=now - VERIFICATION_WAIT).first()
    if pending is not None and last is not None and last.requested_at > pending.requested_at:
        pending = None
    return VerificationShown(last=last, pending=pending)


def dead_letters_for(*, tenant: Tenant, show: str = "open") -> QuerySet[DeadLetter]:

    letters = DeadLetter.objects.filter(compensation__original__run__tenant=tenant).select_related(
        "compensation__original__run", "compensation__intent", "owner", "resolved_by"
    )
    if show == "open":
        letters = letters.filter(resolved_at__isnull=True)
    elif show == "resolved":
        letters = letters.filter(resolved_at__isnull=False)
    return letters.order_by("-created_at", "-id")


def dead_letter_history(*, tenant: Tenant, letter_ids: list[int]) -> dict[int, list[AuditEntry]]:
    """The audit entries of each dead letter (take, assign, retry, resolve), in one query."""
    history: dict[int, list[AuditEntry]] = {i: [] for i in letter_ids}
    entries = AuditEntry.objects.filter(
        tenant=tenant, action__startswith="dead_letter_", new_state__dead_letter__in=letter_ids
    ).order_by("seq")
    for entry in entries:
        history.setdefault(int(entry.new_state["dead_letter"]), []).append(entry)
    return history


def tenant_staff(*, tenant: Tenant) -> QuerySet[Any]:

    return get_user_model().objects.filter(membership__tenant=tenant, is_active=True).order_by("username")


def assignable_staff(*, tenant: Tenant) -> QuerySet[Any]:
    """The people of the tenant a run may be handed to: active, with a role that acts on runs
    (console.actions.staff_member checks the same of whoever is posted)."""
    acts = Q(
        groups__permissions__codename="act_on_run", groups__permissions__content_type__app_label="handover"
    )
    acts |= Q(user_permissions__codename="act_on_run", user_permissions__content_type__app_label="handover")
    return tenant_staff(tenant=tenant).filter(acts | Q(is_superuser=True)).distinct().order_by("username")


def staff_tenant(*, user: Any) -> Tenant | None:
    """The person's tenant with its console settings (console.models.TenantSettings) joined:
    what journal.selectors.tenant_for_user reads, in the same one query."""
    if not getattr(user, "is_authenticated", False):
        return None
    membership = (
        Membership.objects.select_related("tenant", "tenant__console_settings").filter(user=user).first()
    )
    return membership.tenant if membership else None


def run_get_for_page(*, tenant: Tenant, run_id: Any) -> Run | None:
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        return None
    return (
        Run.objects.select_related("tenant", "tenant__console_settings", "assignee")
        .filter(tenant=tenant, pk=pk)
        .first()
    )


# --- compensation intents ---------------------------------------------------------------------

# An undo is recorded like any call; what marks it is its `intent_recorded` event, written with
# `compensation: true` (journal.services.intent_record). Compensation intents are never listed
# as the run's own work and never undone themselves.


def runs_listed(*, tenant: Tenant, q: str = "") -> QuerySet[Run]:
    """Every run of the tenant with its intent tallies, newest first; with `q`, those whose
    ticket id, order id or customer reference contains it (search_q)."""
    runs = journal_runs_with_counts(tenant=tenant).annotate(status_now=status_now_case())
    return runs.filter(search_q(q)) if q.strip() else runs
