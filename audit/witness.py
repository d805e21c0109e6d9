"""The audit chain's witness: every head the chain moves to, written outside the database.

The chain's own seal (audit.chain.head_seal) shows a head moved back over removed rows, but
not a trail emptied whole: with both tables gone, new activity begins a chain anyone can
compute from the genesis. So each committed head (seq, hash) is also written, keyed, where the
database's owner cannot reach it: settings.SEAM_AUDIT_WITNESS names a file (append-only lines,
by default var/audit-witness.log; in production a path on storage the database host does not
hold, or shipped off the host) or "log" (a log line on the logger `seam.audit.witness`, for a
log pipeline to keep). Only a file can be read back: verification (audit.chain) compares the
table with every witnessed head and finds a wipe, a truncation or a rollback.

A head is written after its transaction commits, so a seal that rolled back is never
witnessed; a witness that cannot be written is logged as an error and never breaks the action
that moved the head. Each line carries an HMAC under SEAM_AUDIT_KEY over the database's name,
the seq and the hash: a line forged without the key is ignored, and lines of another database
(a developer's earlier one) are not compared."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

logger = logging.getLogger("seam.audit.witness")

LOG = "log"


@dataclass(frozen=True)
class WitnessedHead:
    seq: int
    hash: str


def _database() -> str:
    return str(connection.settings_dict.get("NAME") or "")


def _mac(database: str, seq: int, hash_: str) -> str:
    message = f"witness\n{database}\n{seq}\n{hash_}"
    return hmac.new(str(settings.SEAM_AUDIT_KEY).encode(), message.encode(), hashlib.sha256).hexdigest()


def _target() -> str:
    return str(getattr(settings, "SEAM_AUDIT_WITNESS", "") or "")


def witness_line(seq: int, hash_: str) -> str:
    database = _database()
    record = {
        "at": timezone.now().isoformat(),
        "db": database,
        "seq": seq,
        "hash": hash_,
        "mac": _mac(database, seq, hash_),
    }
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def _write(line: str) -> None:
    target = _target()
    if not target:
        return
    try:
        if target == LOG:
            logger.info("audit head %s", line)
            return
        path = Path(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(descriptor, (line + "\n").encode())
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
    except Exception:
        # The action that moved the head has committed: it stands. The missing line is for an
        # operator to notice here, before a check finds the witness behind the table.
        logger.exception("audit witness %s could not be written: %s", target, line)


def witness_head(seq: int, hash_: str) -> None:
    """Write the head (seq, hash) to the witness once the current transaction commits."""
    line = witness_line(seq, hash_)
    transaction.on_commit(lambda: _write(line))


def witness_readable() -> bool:
    """Whether the witness can be read back and compared (a file), not only written (a log)."""
    target = _target()
    return bool(target) and target != LOG


def witnessed_heads() -> Iterator[WitnessedHead]:
    """Every head written to the file witness for this database, in the file's order; lines
    whose HMAC does not match (forged, torn or of another key) are skipped."""
    if not witness_readable():
        return
    path = Path(_target())
    if not path.exists():
        return
    database = _database()
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            head = _parsed(line, database)
            if head is not None:
                yield head


def _parsed(line: str, database: str) -> WitnessedHead | None:
    try:
        record = json.loads(line)
        seq, hash_, mac = int(record["seq"]), str(record["hash"]), str(record["mac"])
        if record.get("db") != database:
            return None
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if not hmac.compare_digest(mac, _mac(database, seq, hash_)):
        return None
    return WitnessedHead(seq, hash_)
