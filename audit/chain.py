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
disable them, and what they then change, `audit_verify` finds."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from journal.models import Run, Tenant

from .models import AuditChainHead, AuditEntry, AuditVerification

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
    entry.hash = link_hash(head.hash, entry)
    entry.save(force_insert=True)
    AuditChainHead.objects.filter(pk=1).update(
        seq=entry.seq, hash=entry.hash, seal=head_seal(entry.seq, entry.hash)
    )
    return entry


@dataclass(frozen=True)
class ChainReport:
    checked: int
    broken_at: int | None = None  # the seq of the first row that does not link
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.broken_at is None


def _entries() -> Iterator[AuditEntry]:
    return AuditEntry.objects.order_by("seq").iterator(chunk_size=2000)


def audit_verify() -> ChainReport:
    """Walk the chain from the first row and report the first broken link: a gap in `seq` (a
    row removed), a `prev_hash` that is not its predecessor's hash (a row inserted or removed),
    or a hash that does not match the row's content under the key (a row altered, even with the
    chain recomputed by someone without the key); and a head that is missing, does not point at
    the last row, or whose seal does not match (the newest rows removed)."""
    previous_hash, expected_seq, checked = GENESIS, 1, 0
    for entry in _entries():
        if entry.seq != expected_seq:
            return ChainReport(
                checked, expected_seq, f"row #{expected_seq} is missing (next is #{entry.seq})"
            )
        if entry.prev_hash != previous_hash:
            return ChainReport(checked, entry.seq, f"row #{entry.seq} does not link to row #{entry.seq - 1}")
        if link_hash(previous_hash, entry) != entry.hash:
            return ChainReport(
                checked, entry.seq, f"row #{entry.seq} was altered: its content no longer matches its hash"
            )
        previous_hash, expected_seq, checked = entry.hash, expected_seq + 1, checked + 1
    head = AuditChainHead.objects.filter(pk=1).first()
    if head is None:
        return ChainReport(checked, checked + 1, "the chain head is missing")
    if (head.seq, head.hash) != (checked, previous_hash):
        return ChainReport(
            checked, checked + 1, f"the chain head names row #{head.seq}, but the last row is #{checked}"
        )
    if not hmac.compare_digest(head.seal, head_seal(head.seq, head.hash)):
        return ChainReport(
            checked,
            checked + 1,
            f"the chain head's seal does not match row #{head.seq}: rows after it were removed",
        )
    return ChainReport(checked)


def audit_verification_run(*, verification_id: int) -> AuditVerification:
    """Walk the chain for a requested check and keep the result on its row. A check already
    finished (a redelivered task) is returned as it is: a result is never overwritten."""
    verification = AuditVerification.objects.get(pk=verification_id)
    if verification.finished_at is not None:
        return verification
    report = audit_verify()
    AuditVerification.objects.filter(pk=verification_id, finished_at=None).update(
        finished_at=timezone.now(), checked=report.checked, broken_at=report.broken_at, problem=report.problem
    )
    verification.refresh_from_db()
    return verification
