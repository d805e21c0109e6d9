"""/metrics (Prometheus text exposition) and /healthz (database and broker reachable)."""

from __future__ import annotations

import hmac
import logging

from celery import current_app
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from .metrics import exposition

logger = logging.getLogger(__name__)


def _authorised(request: HttpRequest) -> bool:
    token = getattr(settings, "SEAM_METRICS_TOKEN", "")
    if not token:
        return True
    given = request.headers.get("Authorization", "")
    scheme, _, secret = given.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(secret.strip().encode(), token.encode())


@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    """No session: Prometheus presents SEAM_METRICS_TOKEN as a bearer token when it is set."""
    if not _authorised(request):
        response = HttpResponse("metrics need the bearer token\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


def _database_ok() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as exc:
        logger.warning("health check: database unreachable: %s", exc)
        return "unreachable"
    return "ok"


def _broker_ok() -> str:
    try:
        with current_app.connection_for_write(settings.CELERY_BROKER_URL) as conn:
            # One attempt, bounded by broker_connection_timeout (4 s by default): a health check
            # answers now rather than waiting out the broker's reconnection schedule.
            conn.ensure_connection(max_retries=0)
    except Exception as exc:
        # Kombu raises the transport's own errors (redis, OSError, OperationalError...).
        logger.warning("health check: broker unreachable: %s", type(exc).__name__)
        return "unreachable"
    return "ok"


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when this node can reach PostgreSQL and the broker, 503 (naming which) when not."""
    checks = {"database": _database_ok(), "broker": _broker_ok()}
    healthy = all(state == "ok" for state in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "unhealthy", **checks}, status=200 if healthy else 503
    )
