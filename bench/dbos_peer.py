"""The peer: DBOS Transact (`dbos` on PyPI) recording the same no-op call on the same PostgreSQL.

DBOS's unit of durable record is a workflow, and its record of a side-effecting call is a step
inside one. The peer of one journaled call (an intent before, an outcome after) is therefore one
workflow with one `@DBOS.step()` that does nothing, as the journal's bench dispatch does nothing:
DBOS writes the workflow's status row and its input before the step, the step's output after it,
then the workflow's output and final status. Both sides are called synchronously from the same
thread of the same process, one call after another, against the same server.

DBOS keeps its records in a system database of its own (`seam_bench_dbos` by default), which it
creates and migrates on launch. The database is dropped at the end (`close`), so every run starts
from empty tables, as the journal's bench tables do. DBOS also runs background threads (queue and
notification polling) while launched, so bench/journal.py launches it only after the floors and
the journal have been measured, then times it in alternating rounds against the journal measured
again beside it: both sides pay for those threads alike.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

DEFAULT_DATABASE = "seam_bench_dbos"
# The tables DBOS writes for one workflow with one step, each counted after the rounds.
RECORD_TABLES = ("workflow_status", "workflow_input", "operation_outputs", "workflow_output")


class DbosPeer:
    """One launched DBOS instance and a workflow of one no-op step per recorded call."""

    def __init__(self, database_url: str, *, database: str = DEFAULT_DATABASE) -> None:
        try:
            from dbos import DBOS, DBOSConfig
        except ImportError as exc:  # the "bench" extra is not installed
            raise RuntimeError(
                "DBOS is not installed: pip install -e '.[bench]' (make bench does this)"
            ) from exc
        import dbos

        self.version = getattr(dbos, "__version__", "") or _distribution_version("dbos")
        parts = urlsplit(database_url)
        self.maintenance_url = urlunsplit(parts._replace(scheme="postgresql", path="/postgres"))
        self.database = database
        self.url = urlunsplit(parts._replace(scheme="postgresql", path="/" + database))
        self._drop_database()  # a previous run that died left its rows: start empty
        config: DBOSConfig = {
            "name": "seam-bench-peer",
            "system_database_url": self.url,
            "log_level": "WARNING",
        }
        self.dbos = DBOS(config=config)
        logging.getLogger("dbos").setLevel(logging.WARNING)

        @DBOS.step()
        def dispatch(n: int) -> None:
            """The no-op call, as the journal bench's dispatch."""
            return None

        @DBOS.workflow()
        def one_call(n: int) -> None:
            dispatch(n)

        self._one_call = one_call
        DBOS.launch()
        self.counter = itertools.count()

    def call(self) -> None:
        self._one_call(next(self.counter))

    def rows_written(self) -> dict[str, int]:
        """Rows in each of DBOS's record tables (all of this run's: the database is its own)."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            counts = {}
            for table in RECORD_TABLES:
                row = conn.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("dbos", table))
                ).fetchone()
                counts[table] = int(row[0]) if row else 0
            return counts

    def calls_made(self) -> int:
        return self.rows_written()["operation_outputs"]

    def close(self) -> None:
        from dbos import DBOS

        with contextlib.suppress(Exception):
            DBOS.destroy(destroy_registry=True)
        with contextlib.suppress(psycopg.Error):
            self._drop_database()

    def _drop_database(self) -> None:
        with psycopg.connect(self.maintenance_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.database))
            )


def _distribution_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def describe(rows: dict[str, Any], calls: int) -> str:
    per_call = sum(rows.values()) / calls if calls else 0
    return f"{per_call:.1f} rows per call ({', '.join(f'{t} {n}' for t, n in rows.items())})"
