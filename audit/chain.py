"""The audit trail of human actions: written in the same transaction as the change it records,
append only, and hash-chained so that an altered, removed or smuggled-in row is found.

Each row's hash is HMAC-SHA256, under the key in settings.SEAM_AUDIT_KEY (from the environment,
never stored in the database), over the previous row's hash and this row's canonical content: a
database owner who rewrites a row cannot compute the hash that would make it link again. The
chain is extended one link at a time: every writer locks the single AuditChainHead row, reads
the last link from it and moves it forward in the same transaction, so two concurrent actions
never produce two rows claiming the same predecessor. The head carries a seal (an HMAC of its
position) so that it cannot be moved back over removed rows either.

On PostgreSQL, triggers refuse UPDATE, DELETE and TRUNCATE of the audit rows, and let the head
only move forward onto the newest row (never delete it): to tamper at all, an owner must first
disable them, and what they then change, `audit_verify` finds. Every committed head is also
written, keyed, to a witness outside the database (audit.witness), so a trail emptied whole and
begun again, cut short, or restored from an older copy shows too.

Each row is also numbered among its tenant's rows (`tenant_seq`, from 1): a tenant's pages and
exports show that number, and a tenant's check walks the whole chain but counts and names only
its own rows."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Max
from django.utils import timezone

from journal.models import Run, Tenant

from .models import AuditChainHead, AuditEntry, AuditResult, AuditVerification
from .witness import WitnessedHead, witness_head, witnessed_heads

GENESIS = "0" * 64


def _canonical(entry: AuditEntry) -> str:
    """The content a link covers. Timestamps are taken in UTC with microseconds, as PostgreSQL
    stores them, so a row read back hashes exactly as it was written."""
    return json.dumps(
        {
            "seq": entry.seq,
            "tenant": entry.tenant_id,
            "at": entry.at.astimezone(UTC).isoformat(timespec="microseconds"),
            "user": entry.user_id,
            "username": entry.username,
            "action": entry.action,
            "run": str(entry.run_id) if entry.run_id else None,
            "step_id": entry.step_id,
            "old": entry.old_state,
            "new": entry.new_state,
            "note": entry.note,
            "request_id": entry.request_id,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )


def _mac(message: str) -> str:
    return hmac.new(str(settings.SEAM_AUDIT_KEY).encode(), message.encode(), hashlib.sha256).hexdigest()


def link_hash(prev_hash: str, entry: AuditEntry) -> str:
    return _mac(f"{prev_hash}\n{_canonical(entry)}")


def head_seal(seq: int, hash_: str) -> str:
    """The head's seal: which row it names, under the key. Without it, someone who removed the
    newest rows could move the head back to the row that is now last, and the chain would end
    cleanly there."""
    return _mac(f"head\n{seq}\n{hash_}")


def audit_record(
    *,
    user: Any,
    tenant: Tenant,
    action: str,
    run: Run | None = None,
    step_id: str = "",
    old: dict[str, Any] | None = None,
    new: dict[str, Any] | None = None,
    note: str = "",
    request_id: str = "",
) -> AuditEntry:
    """Append one audit row. Must be called inside the transaction that makes the change, so
    the change and its record commit together or not at all."""
    if not connection.in_atomic_block:
        raise RuntimeError("audit_record must run inside the transaction of the change it records")
    head, _ = AuditChainHead.objects.select_for_update().get_or_create(
        pk=1, defaults={"seal": head_seal(0, GENESIS)}
    )
    # Round-trip old/new through JSON now, so the hash covers what the database will return.
    entry = AuditEntry(
        seq=head.seq + 1,
        tenant=tenant,
        at=timezone.now(),
        user=user,
        username=user.get_username(),
        action=action,
        run=run,
        step_id=step_id,
        old_state=json.loads(json.dumps(old or {}, default=str)),
        new_state=json.loads(json.dumps(new or {}, default=str)),
        note=note,
        request_id=request_id,
        prev_hash=head.hash,
    )
    # Numbered among its tenant's rows too, under the head's lock like `seq`.
    last = AuditEntry.objects.filter(tenant=tenant).aggregate(last=Max("tenant_seq"))["last"]
    entry.tenant_seq = (last or 0) + 1
    entry.hash = link_hash(head.hash, entry)
    entry.save(force_insert=True)
    AuditChainHead.objects.filter(pk=1).update(
        seq=entry.seq, hash=entry.hash, seal=head_seal(entry.seq, entry.hash)
    )
    # The seal, also outside the database once it commits: a trail emptied whole, head and
    # all, then shows against the witness (audit.witness).
    witness_head(entry.seq, entry.hash)
    return entry


@dataclass(frozen=True)
class ChainReport:
    checked: int
    broken_at: int | None = None  # the seq of the first row that does not link
    problem: str = ""
    result: str = AuditResult.INTACT

    @property
    def ok(self) -> bool:
        return self.result == AuditResult.INTACT


def _entries() -> Iterator[AuditEntry]:
    return AuditEntry.objects.order_by("seq").iterator(chunk_size=2000)


PROBLEMS = {
    "missing": "row #{before} is missing (next is #{next})",
    "unlinked": "row #{row} does not link to row #{prev}",
    "altered": "row #{row} was altered: its content no longer matches its hash",
    "renumbered": "row #{row} was renumbered among its tenant's rows",
}
# The same, for a tenant's check, numbered among the tenant's rows.
TENANT_PROBLEMS = {
    "missing": "a row before row #{row} is missing",
    "unlinked": "row #{row} does not link to the row before it",
    "altered": "row #{row} was altered: its content no longer matches its hash",
    "renumbered": "row #{row} was renumbered",
}


class _Walk:
    """The chain walked from its first row. `own` counts the rows of the tenant the check is
    for (every row when it is for none), so a tenant's check reports its own rows only."""

    def __init__(self, tenant_id: int | None) -> None:
        self.tenant_id = tenant_id
        self.previous_hash = GENESIS
        self.seq = 0
        self.own = 0
        self.numbered: dict[int, int] = {}

    def mine(self, entry: AuditEntry) -> bool:
        return self.tenant_id is None or entry.tenant_id == self.tenant_id

    def step(self, entry: AuditEntry) -> str | None:
        """Take the next row; return what is wrong with it (a code of PROBLEMS), or None."""
        if entry.seq != self.seq + 1:
            return "missing"
        if entry.prev_hash != self.previous_hash:
            return "unlinked"
        if link_hash(self.previous_hash, entry) != entry.hash:
            return "altered"
        number = self.numbered.get(entry.tenant_id, 0) + 1
        if entry.tenant_seq != number:
            return "renumbered"
        self.numbered[entry.tenant_id] = number
        self.previous_hash, self.seq = entry.hash, entry.seq
        self.own += 1 if self.mine(entry) else 0
        return None

    def broken(self, entry: AuditEntry, code: str) -> ChainReport:
        """The report of a row that does not link: numbered in the chain for the whole chain's
        check, among the tenant's rows for a tenant's, and never naming another tenant's row."""
        if self.tenant_id is None:
            words = PROBLEMS[code].format(row=entry.seq, before=self.seq + 1, next=entry.seq, prev=self.seq)
            broken_at = self.seq + 1 if code == "missing" else entry.seq
            return ChainReport(self.seq, broken_at, words, AuditResult.BROKEN)
        if self.mine(entry):
            words = TENANT_PROBLEMS[code].format(row=entry.tenant_seq)
            return ChainReport(self.own, entry.tenant_seq, words, AuditResult.BROKEN)
        words = f"a row that is not yours, after {self.own} of yours, was altered, removed or inserted"
        return ChainReport(self.own, self.own + 1, words, AuditResult.BROKEN)

    def found(self, result: str, seq: int, problem: str, for_tenant: str) -> ChainReport:
        if self.tenant_id is None:
            return ChainReport(self.seq, seq, problem, result)
        return ChainReport(self.own, self.own + 1, for_tenant, result)


def _head_problem(walk: _Walk) -> str | None:
    head = AuditChainHead.objects.filter(pk=1).first()
    if head is None:
        return "the chain head is missing"
    if (head.seq, head.hash) != (walk.seq, walk.previous_hash):
        return f"the chain head names row #{head.seq}, but the last row is #{walk.seq}"
    if not hmac.compare_digest(head.seal, head_seal(head.seq, head.hash)):
        return f"the chain head's seal does not match row #{head.seq}: rows after it were removed"
    return None


def _replaced(heads: list[WitnessedHead]) -> int | None:
    """The lowest seq among these witnessed heads whose row now has another hash."""
    rows = dict(AuditEntry.objects.filter(seq__in={h.seq for h in heads}).values_list("seq", "hash"))
    replaced = [h.seq for h in heads if rows.get(h.seq) != h.hash]
    return min(replaced) if replaced else None


def _against_witness(walk: _Walk) -> tuple[int | None, int]:
    """Every witnessed head checked against the table: the lowest witnessed row that is now
    another row (None if none), and the highest witnessed seq (0 if none)."""
    replaced: list[int] = []
    highest, batch = 0, []
    for head in witnessed_heads():
        highest = max(highest, head.seq)
        if head.seq <= walk.seq:
            batch.append(head)
        if len(batch) >= 2000:
            replaced.extend(filter(None, [_replaced(batch)]))
            batch = []
    replaced.extend(filter(None, [_replaced(batch)] if batch else []))
    return (min(replaced) if replaced else None), highest


def _witness_report(walk: _Walk, head_problem: str | None) -> ChainReport | None:
    """A wipe (rows the witness saw gone or replaced), a truncation (the newest rows removed)
    or a rollback (an older copy, head and all, restored), against the witness."""
    replaced, highest = _against_witness(walk)
    if replaced is not None:
        return walk.found(
            AuditResult.WIPED,
            replaced,
            f"row #{replaced} is not the row the witness saw: the trail was emptied and begun again",
            "the trail was emptied and begun again: rows the witness saw are gone",
        )
    if highest <= walk.seq:
        return None
    if walk.seq == 0:
        return walk.found(
            AuditResult.WIPED,
            1,
            f"the trail is empty, but the witness saw row #{highest}",
            "the trail was emptied: rows the witness saw are gone",
        )
    if head_problem is None:
        return walk.found(
            AuditResult.ROLLED_BACK,
            walk.seq + 1,
            f"the trail ends at row #{walk.seq}, but the witness saw row #{highest}: an older copy was restored",
            "an older copy of the trail was restored: the newest rows the witness saw are gone",
        )
    return walk.found(
        AuditResult.TRUNCATED,
        walk.seq + 1,
        f"rows #{walk.seq + 1} to #{highest} were removed: the witness saw them",
        "the newest rows of the trail were removed: the witness saw them",
    )


def audit_verify(tenant: Tenant | None = None) -> ChainReport:
    """Walk the chain from the first row and report the first broken link: a gap in `seq` (a
    row removed), a `prev_hash` that is not its predecessor's hash (a row inserted or removed),
    a hash that does not match the row's content under the key (a row altered, even with the
    chain recomputed by someone without the key), or a tenant's numbering changed; then compare
    the table with every head the witness saw (a wipe, a truncation, a rollback); and a head
    that is missing, does not point at the last row, or whose seal does not match (the newest
    rows removed). For a tenant, the whole chain is walked but only the tenant's rows are
    counted and named."""
    walk = _Walk(tenant.pk if tenant is not None else None)
    for entry in _entries():
        code = walk.step(entry)
        if code is not None:
            return walk.broken(entry, code)
    head_problem = _head_problem(walk)
    witnessed = _witness_report(walk, head_problem)
    if witnessed is not None:
        return witnessed
    if head_problem is not None:
        return walk.found(
            AuditResult.BROKEN,
            walk.seq + 1,
            head_problem,
            "the trail's head does not name its last row: the newest rows were removed",
        )
    return ChainReport(walk.own)


def audit_verification_queue(*, tenant: Tenant, user: Any, wait: timedelta) -> tuple[AuditVerification, bool]:
    """A check of the chain for a tenant, asked for by `user`: the one already waiting for the
    worker (asked less than `wait` ago, and not finished), or a new one; and whether it is new.
    The tenant's row is locked meanwhile, so that twenty requests at once queue one check. Must
    run inside the transaction that queues the check."""
    if not connection.in_atomic_block:
        raise RuntimeError("audit_verification_queue must run inside a transaction")
    now = timezone.now()
    # FOR NO KEY UPDATE: serialises the requests of one tenant without blocking the rows that
    # reference the tenant from being written.
    Tenant.objects.select_for_update(no_key=True).filter(pk=tenant.pk).values_list("pk").first()
    waiting = AuditVerification.objects.filter(
        tenant=tenant, finished_at__isnull=True, requested_at__gt=now - wait
    ).first()
    if waiting is not None:
        return waiting, False
    return AuditVerification.objects.create(tenant=tenant, requested_at=now, requested_by=user), True


def audit_verification_run(*, verification_id: int) -> AuditVerification:
    """Walk the chain for a requested check and keep the result on its row. A check already
    finished (a redelivered task) is returned as it is: a result is never overwritten."""
    verification = AuditVerification.objects.get(pk=verification_id)
    if verification.finished_at is not None:
        return verification
    report = audit_verify(verification.tenant)
    AuditVerification.objects.filter(pk=verification_id, finished_at=None).update(
        finished_at=timezone.now(),
        checked=report.checked,
        broken_at=report.broken_at,
        problem=report.problem,
        result=report.result,
    )
    verification.refresh_from_db()
    return verification
