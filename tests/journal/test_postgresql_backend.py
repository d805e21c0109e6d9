"""journal.postgresql: a persistent connection's health check costs no round trip when the
connection is idle and nothing has arrived on it, and still finds a connection the server closed."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from django.db import connection, connections

from journal.postgresql.base import DatabaseWrapper

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_suite_runs_on_seams_backend() -> None:
    assert isinstance(connections["default"], DatabaseWrapper)


def test_an_idle_healthy_connection_is_usable_without_a_query(monkeypatch: pytest.MonkeyPatch) -> None:
    connection.ensure_connection()
    sent: list[Any] = []
    execute = psycopg.Cursor.execute

    def counted(cursor: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(query)
        return execute(cursor, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)

    assert connection.is_usable()
    assert sent == []


def test_a_connection_whose_backend_was_terminated_is_not_usable_and_is_replaced() -> None:
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    db = connection.settings_dict
    with psycopg.connect(
        dbname=db["NAME"], user=db["USER"], host=db["HOST"], port=db["PORT"] or None, autocommit=True
    ) as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)
    deadline = time.monotonic() + 5
    while connection.is_usable() and time.monotonic() < deadline:
        time.sleep(0.05)

    assert not connection.is_usable()
    connection.health_check_enabled, connection.health_check_done = True, False
    connection.close_if_health_check_failed()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid
