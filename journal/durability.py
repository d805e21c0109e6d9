"""The journal's rule for its own writes: a record is committed before the call that relies on
it leaves. A write that would run inside a transaction the caller still holds open is refused
(OpenTransactionRefused), since its row would not be committed when the call returns; and after
a lost connection the broken one is dropped, so the next write reconnects."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import (
    InterfaceError,
    OperationalError,
    connection,
    transaction,
)
from django.db.backends.base.base import BaseDatabaseWrapper

from .errors import JournalError


class OpenTransactionRefused(JournalError):
    """Raised when an intent would be recorded inside a transaction the caller still holds open:
    the call would leave before the row is committed, which is the failure the journal exists to
    prevent."""

    status_code = 500


# Errors that mean the database connection failed, not that the statement was refused.
CONNECTION_ERRORS = (OperationalError, InterfaceError)


def drop_broken_connection() -> None:
    """After a connection error, close this thread's connection if it is broken, so the next
    call reconnects. Django does this itself only at a request's (or Celery task's) boundaries;
    an agent runtime performing calls in a loop has none, and would otherwise get "the
    connection is lost" forever after a database restart."""
    if not connection.in_atomic_block:
        connection.close_if_unusable_or_obsolete()


# --- durability -------------------------------------------------------------------------------


OPEN_TRANSACTION_MESSAGE = (
    "refusing to record inside an open transaction: the row would not be committed before the "
    "call leaves. Call this outside transaction.atomic()."
)


def inside_open_transaction(db: BaseDatabaseWrapper | None = None) -> bool:
    if db is None:
        db = transaction.get_connection()
    if not db.atomic_blocks:  # the usual case, and on every journaled call
        # db.autocommit is only meaningful once connected; get_autocommit() connects first.
        return not (db.autocommit if db.connection is not None else db.get_autocommit())
    # Django's TestCase wraps each test in atomic blocks it marks as its own; durable blocks
    # ignore those, and so do we. Any other open block means the caller holds a transaction.
    return any(not getattr(b, "_from_testcase", False) for b in db.atomic_blocks)


def refuse_open_transaction(db: BaseDatabaseWrapper) -> None:
    if inside_open_transaction(db):
        raise OpenTransactionRefused(OPEN_TRANSACTION_MESSAGE)


@contextlib.contextmanager
def durable() -> Iterator[None]:
    """A transaction that is committed when the block exits, or an error if the caller already
    holds one open (then nothing inside would be durable when we return)."""
    if inside_open_transaction():
        raise OpenTransactionRefused(OPEN_TRANSACTION_MESSAGE)
    with transaction.atomic(durable=True):
        yield
