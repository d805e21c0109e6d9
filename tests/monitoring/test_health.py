"""/healthz: 200 when this node reaches PostgreSQL and the broker, 503 naming what it cannot."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings


@pytest.mark.django_db
def test_a_node_that_reaches_the_database_and_the_broker_is_healthy() -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok", "broker": "ok"}
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.django_db
def test_a_node_that_cannot_reach_the_broker_is_unhealthy_and_says_so() -> None:
    # Nothing listens on port 1.
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
        response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "unhealthy", "database": "ok", "broker": "unreachable"}


@pytest.mark.django_db
def test_a_node_that_cannot_reach_the_database_is_unhealthy(monkeypatch: pytest.MonkeyPatch) -> None:
    from django.db import OperationalError, connection

    def refuse(*args: object, **kwargs: object) -> None:
        raise OperationalError("connection refused")

    monkeypatch.setattr(connection, "cursor", refuse)
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["database"] == "unreachable"
