"""The journal's monthly partitions: which one a run's rows lie in, and making and dropping them.

`journal_intent` and `journal_journalevent` are partitioned by `run_created_at`, the run's
creation time copied onto each row, one partition per calendar month (UTC), named
`journal_intent_YYYY_MM` and `journal_journalevent_YYYY_MM`, with a default partition for a
row of a month that has none (journal migration 0021; docs/scaling.md, "Partitioning by
month"). The journal's hot statements name their run's month's partitions directly
(journal.sql): through the parent, PostgreSQL 15 locks and sets up every attached partition on
each execution before it prunes them, a cost that grows with the months kept.

Making next months' partitions and dropping archived ones need the tables' owner; the
application's role calls the SECURITY DEFINER functions the migrations made, which are the only
way it can. An archived month leaves in two steps (journal migration 0023): detached, which
locks the parents for milliseconds, then discarded, which frees its files and locks nothing the
journal uses."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.db import DEFAULT_DB_ALIAS, connections

from .models import Intent, JournalEvent

INTENT_PARENT = Intent._meta.db_table
EVENT_PARENT = JournalEvent._meta.db_table

# How long a process trusts that a month has no partitions before it asks again (the monthly
# task, or `manage.py journal_months`, may have made them meanwhile). Until then its statements
# go through the parents, which route the rows to the partition or the default one.
MISSING_RECHECK_SECONDS = 60.0

# Months after the current one whose partitions are made ahead (the migration, the daily task).
MONTHS_AHEAD = 2


@dataclass(frozen=True, slots=True)
class Tables:
    """The two tables a statement about one run writes: its month's partitions, or the parents."""

    intent: str
    event: str


PARENTS = Tables(intent=INTENT_PARENT, event=EVENT_PARENT)


def month_of(moment: datetime) -> date:
    """The first day of `moment`'s month in UTC: the partition its run's rows lie in."""
    utc = moment.astimezone(UTC)
    return date(utc.year, utc.month, 1)


def months_after(month: date, count: int) -> list[date]:
    """`month` and the `count` months after it, first days."""
    index = month.year * 12 + month.month - 1
    return [date(i // 12, i % 12 + 1, 1) for i in range(index, index + count + 1)]


def month_tables(month: date) -> Tables:
    suffix = f"{month:%Y_%m}"
    return Tables(intent=f"{INTENT_PARENT}_{suffix}", event=f"{EVENT_PARENT}_{suffix}")


# Per database alias, the months whose partitions exist (their Tables, kept: a month is dropped
# only once every run of it is archived, and an archived run writes nothing) or were missing (the
# time it was checked, asked again after MISSING_RECHECK_SECONDS). Every journaled call looks its
# month up here twice, so a known month costs one dict lookup and no string building.
_known: dict[tuple[str, date], Tables | float] = {}


def run_tables(run_created_at: datetime, *, using: str = DEFAULT_DB_ALIAS) -> Tables:
    """The tables a statement about the run created at `run_created_at` writes: its month's two
    partitions when both exist, else the parents. A statement that names a partition and a row
    of another month is refused by PostgreSQL (the partition's bounds), so a wrong month fails
    loudly rather than writing elsewhere."""
    month = month_of(run_created_at)
    known = _known.get((using, month))
    if isinstance(known, Tables):
        return known
    if known is not None and time.monotonic() - known < MISSING_RECHECK_SECONDS:
        return PARENTS
    tables = month_tables(month)
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
            [tables.intent, tables.event],
        )
        (exists,) = cursor.fetchone()
    _known[(using, month)] = tables if exists else time.monotonic()
    return tables if exists else PARENTS


def forget_months(*, using: str = DEFAULT_DB_ALIAS) -> None:
    """Ask the database again about every month (after partitions were made or dropped here)."""
    for key in [key for key in _known if key[0] == using]:
        del _known[key]


def create_months(
    *, ahead: int = 2, now: datetime | None = None, using: str = DEFAULT_DB_ALIAS
) -> list[date]:
    """Make the partitions of this month and the `ahead` months after it where missing (the
    monthly beat task and `manage.py journal_months`): the months made."""
    made = []
    with connections[using].cursor() as cursor:
        for month in months_after(month_of(now or datetime.now(UTC)), ahead):
            cursor.execute("SELECT seam_journal_month_create(%s)", [month])
            if cursor.fetchone()[0]:
                made.append(month)
    forget_months(using=using)
    return made


def detach_month(month: date, *, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Take `month`'s two partitions out of the journal: True if they were in it. PostgreSQL
    refuses (an OperationalError, SQLSTATE 55000) while any run created in that month is not
    archived. Catalog changes only, so the parents are locked for milliseconds; the tables stay
    on disk, renamed `<partition>_detached`, until discard_month."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT seam_journal_month_detach(%s)", [month])
        (detached,) = cursor.fetchone()
    forget_months(using=using)
    return bool(detached)


def discard_month(month: date, *, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Drop `month`'s detached tables (detach_month): True if there were any. Freeing their files
    takes the filesystem's time, which grows with the month; it locks only those two tables, so
    run it after the detach has committed, never in its transaction."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT seam_journal_month_discard(%s)", [month])
        (discarded,) = cursor.fetchone()
    return bool(discarded)


def detached_months(*, using: str = DEFAULT_DB_ALIAS) -> list[date]:
    """The months whose detached tables are still on disk (a discard that did not run), oldest
    first."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT substring(relname FROM '_([0-9]{4}_[0-9]{2})_detached$') FROM pg_class "
            "WHERE relkind = 'r' AND relname ~ %s",
            [f"^({INTENT_PARENT}|{EVENT_PARENT})_[0-9]{{4}}_[0-9]{{2}}_detached$"],
        )
        suffixes = sorted(row[0] for row in cursor.fetchall())
    return [date(int(suffix[:4]), int(suffix[5:]), 1) for suffix in suffixes]


@dataclass(frozen=True)
class MonthPartition:
    month: date
    intents: str
    events: str
    bytes: int


def existing_months(*, using: str = DEFAULT_DB_ALIAS) -> list[MonthPartition]:
    """The months that have partitions, oldest first, with their two tables' size on disk."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            """
            SELECT child.relname, pg_total_relation_size(child.oid)
            FROM pg_inherits JOIN pg_class AS child ON child.oid = pg_inherits.inhrelid
            WHERE pg_inherits.inhparent IN (%s::regclass, %s::regclass)
            AND child.relname ~ '_[0-9]{4}_[0-9]{2}$'
            """,
            [INTENT_PARENT, EVENT_PARENT],
        )
        sizes: dict[date, int] = {}
        for name, size in cursor.fetchall():
            month = date(int(name[-7:-3]), int(name[-2:]), 1)
            sizes[month] = sizes.get(month, 0) + size
    return [
        MonthPartition(
            month=month, intents=month_tables(month).intent, events=month_tables(month).event, bytes=size
        )
        for month, size in sorted(sizes.items())
    ]


def default_rows(*, using: str = DEFAULT_DB_ALIAS) -> int:
    """Rows in the default partitions: written for a month that had no partition. None should be
    (the daily task makes months ahead); a month cannot be made while its rows lie there."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT count(*) FROM {INTENT_PARENT}_default) + (SELECT count(*) FROM {EVENT_PARENT}_default)"  # noqa: S608
        )
        (rows,) = cursor.fetchone()
    return int(rows)
