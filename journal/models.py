"""The run journal: runs, the intent row in front of every side-effecting call, what the customer
was told, and the append-only history of how each of those rows got to its current state.

The rows are the checkpoint ("where do I continue?"); JournalEvent is the journal ("how did we
get here, and what must be reconciled?"). Both are written only through journal.services and journal.transitions."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from typing import Any

from django.conf import settings
from django.contrib.postgres.functions import RandomUUID
from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import models
from django.db.models import JSONField, Q, Value
from django.db.models.functions import Cast, Upper

from .channels import CustomerChannel


class Tenant(models.Model):
    """A customer organisation of Seam. Every run, token and staff member belongs to exactly one;
    nothing of one tenant is visible to another. Created by admins."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    # What the tenant's idempotency keys are derived from (journal.keys), fixed when the tenant is
    # made: a renamed slug must not change the key of a call the agent replays. Tenants made
    # before it existed keep their slug here, so the keys they already sent stay the same.
    key_namespace = models.CharField(
        max_length=64, db_default=Cast(RandomUUID(), output_field=models.CharField()), editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # How long an ended run's intents and events stay in the database before the retention job
    # archives them (docs/scaling.md, "Retention and archiving"); the run's row stays for good.
    retention_days = models.PositiveIntegerField(default=90, db_default=90)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """Which tenant a staff user works for. One per user; a user without one sees no runs."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership")
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="memberships")

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant}"


class AgentToken(models.Model):
    """A credential for one agent runtime, scoped to one tenant. Only a SHA-256 digest of the
    secret is stored; the secret itself is printed once by `create_agent_token`."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="agent_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="agent_token_name_per_tenant")]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant.slug})"

    @staticmethod
    def digest_of(secret: str) -> str:
        return hashlib.sha256(secret.encode()).hexdigest()

    @staticmethod
    def new_secret() -> str:
        return "seam_" + secrets.token_urlsafe(32)


class RunStatus(models.TextChoices):
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    # Stated outcomes after a run died, decided by reconciliation's written policy:
    COMPENSATED = "compensated", "Compensated"
    ESCALATED = "escalated", "Escalated"
    CANCELLED = "cancelled", "Cancelled"


class OutcomeReason(models.TextChoices):
    """Why a run ended where a person must look (the handover's `reason`)."""

    RUN_DIED_MID_SEQUENCE = "run_died_mid_sequence", "Run died mid-sequence"
    UNKNOWN_OUTCOME = "unknown_outcome", "A call's outcome is unknown"
    VERSION_MISMATCH = "version_mismatch", "Recorded versions differ from the running code"
    DEADLINE_PASSED = "deadline_passed", "Deadline passed"
    COMPENSATION_FAILED = "compensation_failed", "Compensation failed"
    POLICY = "policy", "Policy says a person decides"


# The longest customer reference a run keeps (journal.runs.run_create and the agent API check it).
CUSTOMER_REF_MAX = 200


class Run(models.Model):
    """One agent run working one ticket. Created by the agent runtime when it starts; its plan
    lists the write actions it intends, in order, so that "not done" can later be derived by
    comparing the plan with the intent rows. `version` increases with every change to this row
    and lets a writer refuse to act on a stale copy (optimistic locking)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="runs")
    external_id = models.CharField(
        max_length=200,
        blank=True,
        help_text="The runtime's own id for this run; creating a run twice with it returns the first.",
    )
    task_type = models.SlugField(max_length=64)
    ticket_id = models.CharField(max_length=100, blank=True)
    order_id = models.CharField(max_length=100, blank=True)
    # Who the run is for, in the helpdesk's or shop's own words (an email, an account number):
    # what a person has in hand when a customer calls, so the console's search finds it too.
    customer_ref = models.CharField(max_length=CUSTOMER_REF_MAX, blank=True, default="", db_default="")
    status = models.CharField(max_length=20, choices=RunStatus.choices, default=RunStatus.RUNNING)
    deadline = models.DateTimeField(null=True, blank=True, help_text="Wall-clock deadline.")
    schema_version = models.CharField(max_length=40)
    flow_version = models.CharField(max_length=40)
    policy_version = models.CharField(max_length=40)
    capability_version = models.CharField(max_length=40)
    plan = models.JSONField(default=list, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    version = models.PositiveIntegerField(default=1)
    # How the run ended when it did not simply complete: set by reconciliation's decision or
    # by cancellation, with the detail a person needs.
    outcome_reason = models.CharField(max_length=40, choices=OutcomeReason.choices, blank=True)
    # Why, as a code and its facts (journal.why.RunWhy), said in words by handover.words. Rows
    # ended before the code existed keep their words in outcome_detail, and so does a reason the
    # agent gave in its own words.
    outcome_why = models.JSONField(default=dict, blank=True, db_default=Value({}, JSONField()))
    outcome_detail = models.TextField(blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # When the retention job archived the run's intents and events (and verified the archive):
    # from then on they are read from the archive, not the journal.
    archived_at = models.DateTimeField(null=True, blank=True)
    # Retries, repairs, replans, reflections and escalations are counted apart, so "reasoned
    # ten times about a 403" shows up as ten reflections, not as progress.
    retries = models.PositiveIntegerField(default=0)
    repairs = models.PositiveIntegerField(default=0)
    replans = models.PositiveIntegerField(default=0)
    reflections = models.PositiveIntegerField(default=0)
    escalations = models.PositiveIntegerField(default=0)
    # The staff member who took the run from the queue ("assign to me"); set only through
    # console.actions, with an audit row.
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="assigned_runs",
    )
    # True from the moment the run is escalated until a person resolves or resumes it: the
    # queue's membership, kept on the row (with a partial index) so the queue stays a small
    # index scan however many runs have ended quietly.
    awaiting_person = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["tenant", "-created_at"], name="run_tenant_recent_idx"),
            models.Index(fields=["tenant", "ticket_id"], name="run_tenant_ticket_idx"),
            models.Index(fields=["tenant", "order_id"], name="run_tenant_order_idx"),
            # The console's search: any part of a ticket or order id or a customer reference, in
            # any case, over every run (console.selectors.search_q). Trigram indexes on the
            # upper-cased values answer the UPPER(...) LIKE UPPER('%…%') that `icontains` writes
            # without reading every run.
            GinIndex(OpClass(Upper("ticket_id"), name="gin_trgm_ops"), name="run_ticket_trgm_idx"),
            GinIndex(OpClass(Upper("order_id"), name="gin_trgm_ops"), name="run_order_trgm_idx"),
            GinIndex(OpClass(Upper("customer_ref"), name="gin_trgm_ops"), name="run_customer_trgm_idx"),
            models.Index(
                fields=["tenant", "created_at"], condition=Q(awaiting_person=True), name="run_awaiting_idx"
            ),
            # Stuck runs: running, heartbeat older than the stale threshold.
            models.Index(
                fields=["tenant", "last_heartbeat_at"], condition=Q(status="running"), name="run_running_idx"
            ),
            # The staff queue (console.selectors.queue_runs): runs awaiting a person or running,
            # which holds the stuck ones. One index per order the queue offers, so its first page
            # is read in order and stops after 50 rows; the first also carries every column the
            # queue's counts and filters read, so they are index-only scans of the queue's own
            # rows, never visits to the table's pages (at 1,000,000 runs the ~16,000 queued rows
            # sat on 16,000 different pages).
            models.Index(
                fields=["tenant", "deadline", "created_at", "id"],
                include=[
                    "awaiting_person",
                    "status",
                    "last_heartbeat_at",
                    "outcome_reason",
                    "assignee",
                    "task_type",
                ],
                condition=Q(awaiting_person=True) | Q(status="running"),
                name="run_queue_deadline_idx",
            ),
            models.Index(
                fields=["tenant", "created_at", "id"],
                condition=Q(awaiting_person=True) | Q(status="running"),
                name="run_queue_oldest_idx",
            ),
            # A month's runs not archived yet, by creation time: what keeps the month's
            # partitions (seam_journal_month_detach refuses while any is left; the retention job
            # lists them). Archived runs leave it, so the check of a month whose runs are all
            # archived reads nothing.
            models.Index(
                fields=["created_at"], condition=Q(archived_at__isnull=True), name="run_unarchived_idx"
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "external_id"],
                condition=~Q(external_id=""),
                name="run_external_id_per_tenant",
            )
        ]

    def __str__(self) -> str:
        return f"{self.task_type} {self.ticket_id or self.id}"

    @property
    def versions(self) -> dict[str, str]:
        return {
            "schema": self.schema_version,
            "flow": self.flow_version,
            "policy": self.policy_version,
            "capability": self.capability_version,
        }


class IntentStatus(models.TextChoices):
    INTENDED = "intended", "Intended"
    PERFORMED = "performed", "Performed"
    FAILED = "failed", "Failed"
    # Settled by reconciliation: the downstream says the call never happened.
    NOT_PERFORMED = "not_performed", "Not performed"
    # Reconciliation could not find out; a person must decide (see unknown_reason).
    UNKNOWN = "unknown", "Unknown"
    # Settled by reconciliation: the world was already as the call would leave it before the
    # intent was recorded (someone else's doing). Not the run's work: never undone, never re-sent.
    ALREADY_SO = "already_so", "Already so"


class ErrorClass(models.TextChoices):
    """The six error classes of a failed call. Each decides a different response; none is
    inferred from a human-readable message."""

    INVALID_INPUT = "invalid_input", "Invalid input"
    CONFLICT = "conflict", "Conflict"
    TRANSIENT = "transient", "Transient"
    AMBIGUOUS = "ambiguous", "Ambiguous"
    PERMANENT = "permanent", "Permanent"
    BUG = "bug", "Bug"


class Intent(models.Model):
    """The intent row: committed before a side-effecting call leaves the process, naming the
    tool, its canonical arguments and the idempotency key the call will carry; settled after the
    call with its outcome and the downstream's receipt. A row still `intended` after its run died
    is evidence of a call that may or may not have happened, and names the key to ask about.
    Written by the agent runtime (in process or over REST); when its run died, settled by
    reconciliation or by a person."""

    # No index of its own: the unique (run, step_id) constraint serves every lookup by run.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="intents", db_index=False)
    step_id = models.CharField(max_length=255, help_text="run:turn:tool[:occurrence]")
    turn = models.PositiveIntegerField()
    tool = models.CharField(max_length=100)
    args = models.JSONField(help_text="Canonical arguments, as hashed into the key.")
    occurrence = models.PositiveIntegerField(default=0)
    # Unique through Meta.constraints, not unique=True: on PostgreSQL unique=True also builds a
    # varchar_pattern_ops ("_like") index for LIKE queries, which nothing makes and which every
    # insert and every settle would pay for.
    idempotency_key = models.CharField(max_length=64)
    status = models.CharField(max_length=20, choices=IntentStatus.choices, default=IntentStatus.INTENDED)
    error_class = models.CharField(max_length=20, choices=ErrorClass.choices, blank=True)
    outcome_summary = models.TextField(blank=True)
    receipt = models.JSONField(default=dict, blank=True)
    request_id = models.CharField(max_length=200, blank=True)
    intended_at = models.DateTimeField()
    settled_at = models.DateTimeField(null=True, blank=True)
    # The run's created_at, copied onto the row: the table is partitioned by it, one partition
    # per month (journal.partitions, docs/scaling.md), so that all of a run's rows lie in one
    # partition and a month is archived and dropped whole. A run's created_at never changes.
    run_created_at = models.DateTimeField(editable=False)
    # Reconciliation's bookkeeping while it asks the downstream about an open row.
    # db_default too: journal_sql inserts rows without naming these columns.
    lookup_attempts = models.PositiveIntegerField(default=0, db_default=0)
    last_lookup_error = models.TextField(blank=True, default="", db_default="")
    next_lookup_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Not asked again before this (jittered backoff after a failed lookup).",
    )
    unknown_reason = models.TextField(
        blank=True, default="", db_default="", help_text="Why reconciliation could not settle the row."
    )
    # What settled the row when its runtime did not (journal.why.CallVerdict and its facts):
    # reconciliation's lookup or a person. Rows settled before the code existed keep their words
    # in outcome_summary and unknown_reason.
    verdict = models.JSONField(default=dict, blank=True, db_default=Value({}, JSONField()))

    class Meta:
        ordering = ["intended_at", "id"]
        constraints = [
            # PostgreSQL enforces a partitioned table's unique keys per partition, so each holds
            # the partition column. Nothing is lost: a step and a key both name their run
            # (journal.keys hashes the run's id into every key), and a run's rows share one
            # run_created_at.
            models.UniqueConstraint(fields=["run", "step_id", "run_created_at"], name="intent_step_per_run"),
            # The arbiter of journal_sql's ON CONFLICT (idempotency_key, run_created_at).
            models.UniqueConstraint(fields=["idempotency_key", "run_created_at"], name="intent_key_unique"),
        ]
        indexes = [
            # The reconciliation sweep looks only at open rows; a partial index keeps that scan
            # proportional to the rows in doubt, not to the whole journal.
            models.Index(
                fields=["intended_at"],
                condition=Q(status="intended"),
                name="intent_open_idx",
            ),
            # The rows a person must decide (metrics, the queue's "?" badge): rare, so cheap to keep.
            models.Index(fields=["run"], condition=Q(status="unknown"), name="intent_unknown_idx"),
            # The failed calls of a run, by tool: the intent statement's check that no call of
            # its tool failed (else journal.attempts decides). Failures are few, so it is small.
            models.Index(fields=["run", "tool"], condition=Q(status="failed"), name="intent_failed_idx"),
            # A run's steps in the order everything reads them (the run page, its poll, the
            # handover): read in index order, a run of 10,000 calls is not sorted per request.
            models.Index(fields=["run", "intended_at", "id"], name="intent_run_order_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.step_id} [{self.status}]"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.run_created_at is None:
            # The product inserts intents through journal.sql, which writes it from the run row;
            # an ORM insert (a test's, a shell's) takes it from the run here.
            self.run_created_at = self.run.created_at
        super().save(*args, **kwargs)

    @property
    def is_settled(self) -> bool:
        return self.status != IntentStatus.INTENDED


class CustomerMessage(models.Model):
    """What the customer has been told, when, and through which channel: the third list of every
    handover, so the next person's message stays consistent with it. Written by the agent
    runtime when it sends or shows a message, or by staff."""

    Channel = CustomerChannel

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="customer_messages")
    channel = models.CharField(max_length=20, choices=Channel.choices)
    body = models.TextField()
    told_at = models.DateTimeField()
    recorded_at = models.DateTimeField(auto_now_add=True)
    about_steps = models.JSONField(
        default=list,
        blank=True,
        help_text='Step ids of the run whose effects this message reports ("we have credited you" '
        "names the credit's step), as the writer declared them; an undone one flags the message.",
    )

    class Meta:
        ordering = ["told_at", "id"]

    def __str__(self) -> str:
        return f"{self.channel} at {self.told_at:%Y-%m-%d %H:%M}"


class ActorKind(models.TextChoices):
    AGENT = "agent", "Agent"
    SYSTEM = "system", "System"
    USER = "user", "User"


class JournalEvent(models.Model):
    """One accepted state change of a run or of one of its intent rows, with who made it. Append
    only: written in the same transaction as the change it records, never updated or deleted
    (a database trigger refuses both on PostgreSQL)."""

    class Kind(models.TextChoices):
        RUN_CREATED = "run_created", "Run created"
        RUN_COMPLETED = "run_completed", "Run completed"
        INTENT_RECORDED = "intent_recorded", "Intent recorded"
        OUTCOME_RECORDED = "outcome_recorded", "Outcome recorded"
        DISPATCH_AMBIGUOUS = "dispatch_ambiguous", "Dispatch outcome unknown"
        RUN_RESUMED = "run_resumed", "Run resumed"
        RUN_ESCALATED = "run_escalated", "Run escalated"
        RUN_COMPENSATED = "run_compensated", "Run compensated"
        RUN_CANCELLED = "run_cancelled", "Run cancelled"
        RUN_PLAN_UPGRADED = "run_plan_upgraded", "Run's plan upgraded to the running versions"
        INTENT_READMITTED = "intent_readmitted", "Intent re-admitted for resumption"
        COUNTED = "counted", "Retry, repair, replan or reflection counted"
        CUSTOMER_TOLD = "customer_told", "Customer told"
        INTENT_RECONCILED = "intent_reconciled", "Intent reconciled"
        LOOKUP_FAILED = "lookup_failed", "Lookup failed"
        FANOUT_STARTED = "fanout_started", "Fan-out dispatched"
        FANOUT_BRANCH_SETTLED = "fanout_branch_settled", "Fan-out branch settled"
        FANOUT_RETRY = "fanout_retry", "Fan-out retry sent or not attempted"
        FANOUT_SETTLED = "fanout_settled", "Fan-out outcome and merged decision"
        # The taxonomy's response to an earlier failure refused the agent's next intent
        # (journal.attempts).
        ATTEMPT_REFUSED = "attempt_refused", "Attempt refused after a failure"
        # Written by people's actions (console.actions), each alongside its audit row.
        LOOKUP_REQUESTED = "lookup_requested", "Lookup requested again"
        COMPENSATION_REQUESTED = "compensation_requested", "Compensation requested"
        RESUME_REQUESTED = "resume_requested", "Resumption requested"
        ESCALATION_RESOLVED = "escalation_resolved", "Escalation resolved"
        # The failed call's refusal lifted once (journal.attempts.attempt_allow): its call is
        # admitted again, and earlier refusals stop counting toward a loop.
        ATTEMPT_ALLOWED = "attempt_allowed", "Call allowed again by a person"
        # A person corrected a not-done step's arguments before resuming (journal.step_edits):
        # its data holds the old and new arguments and keys.
        STEP_ARGS_EDITED = "step_args_edited", "Step's arguments edited by a person"

    # The run and the intent are foreign keys without database constraints (db_constraint=False).
    # Every writer takes both ids from a row it holds: journal_sql's statements from the intent
    # row they have just inserted or updated (RETURNING), the ORM paths from saved instances, in
    # the same transaction. A constraint would add nothing but its checks, which on PostgreSQL
    # re-read and share-lock the run and intent rows at commit for every event: two per
    # journaled call, about a tenth of the journal's cost (pgbench, docs/architecture.md). The
    # recovery invariants (scenarios.invariants.check_recovered) check that no event points
    # outside its run, and rows are never deleted under events (the journal is append-only and
    # refuses the cascade). It also lets intents be partitioned later (docs/scaling.md).
    #
    # Indexed by journal_run_at_idx (run, at), which also serves lookups by run alone.
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="events", db_index=False, db_constraint=False
    )
    # No index: every journaled call would pay two inserts into it, and nothing looks events up
    # by intent alone; an intent's events are its run's (compensations.run_compensate asks
    # journal_run_at_idx for them by run).
    intent = models.ForeignKey(
        Intent,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="events",
        db_index=False,
        db_constraint=False,
    )
    kind = models.CharField(max_length=40, choices=Kind.choices)
    actor_kind = models.CharField(max_length=10, choices=ActorKind.choices)
    actor_name = models.CharField(max_length=150)
    # Indexed by journal_user_idx, only where set: agents' and workers' events (the hot path)
    # have no user and skip the index, while deleting a user still finds its events by index.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, db_index=False
    )
    data = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField()
    # The run's created_at, as on Intent: the partition the event lies in, its run's month.
    run_created_at = models.DateTimeField(editable=False)

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            models.Index(fields=["run", "at"], name="journal_run_at_idx"),
            # A run's newest events (handover.rows.run_events, on every run page, poll and
            # handover): without it PostgreSQL walks the primary key of every run's events
            # backwards, in parallel, until it has found this run's.
            models.Index(fields=["run", "id"], name="journal_run_newest_idx"),
            models.Index(fields=["user"], condition=Q(user__isnull=False), name="journal_user_idx"),
            # The calls reconciliation gave up on (the insights page's unknown outcomes per tool):
            # rare, so the index is small and the journal's hot inserts skip it.
            models.Index(
                fields=["at"],
                condition=Q(kind="intent_reconciled", data__status="unknown"),
                name="journal_unknown_outcome_idx",
            ),
            # The events that say a machine picked a run up (insights.recoveries.PICKED_UP): a
            # call settled by reconciliation, a dead run resumed or handed over. A few in a
            # thousand events; without it the insights page read all of them. It holds what the
            # page reads of them, so they are read from the index alone: fetching each event's
            # row cost 9-13 ms a panel at a million runs (the rows lie scattered), against 1.5.
            models.Index(
                fields=["at"],
                include=["run", "intent", "kind"],
                condition=Q(kind__in=["intent_reconciled", "run_resumed", "run_escalated"]),
                name="journal_picked_up_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} by {self.actor_kind}:{self.actor_name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.run_created_at is None:
            # journal.events sets it from the run it holds; any other insert reads it here.
            self.run_created_at = Run.objects.values_list("created_at", flat=True).get(pk=self.run_id)
        super().save(*args, **kwargs)


class Escalation(models.Model):
    """A run handed to a person: why, what the decision rested on, and — once someone acts —
    who resolved it and how. Opened by journal.escalations.run_hand_over (for reconciliation's
    decision, a failed compensation, a fan-out without a required branch, a cancelled run with
    an unknown call) and resolved by a person; the dashboard's queue lists the open ones."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="escalation_records")
    # The run's tenant and task type, copied when the escalation is opened (a run's never
    # change): the insights page counts a tenant's escalations by an index range on these, where
    # reaching the tenant through each escalation's run cost one lookup per escalation
    # (bench/pages.py at 1,000,000 runs). `manage.py insights --recount` checks they still agree.
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    task_type = models.SlugField(max_length=64)
    reason = models.CharField(max_length=40, choices=OutcomeReason.choices)
    why = models.JSONField(default=dict, blank=True, db_default=Value({}, JSONField()))
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True)
    resolution_note = models.TextField(blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(
                fields=["created_at"], condition=Q(resolved_at__isnull=True), name="escalation_open_idx"
            ),
            # The insights page's reads: opened in a period, resolved in a period, the task types.
            models.Index(fields=["tenant", "created_at"], name="escalation_tenant_opened_idx"),
            models.Index(
                fields=["tenant", "resolved_at"],
                condition=Q(resolved_at__isnull=False),
                name="escalation_tenant_resolved_idx",
            ),
            models.Index(fields=["tenant", "task_type"], name="escalation_tenant_type_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.reason} ({self.run})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self._state.adding and self.tenant_id is None:
            # Copied from the run when the opener did not say (journal.escalations does).
            self.tenant_id, self.task_type = self.run.tenant_id, self.run.task_type
        super().save(*args, **kwargs)
