"""Celery's side of observability: every task's log records carry its id, its name and the
run, intent or compensation its arguments name; a worker may serve its counters over HTTP."""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
from contextvars import Token
from typing import Any

from celery.signals import task_postrun, task_prerun, worker_ready

from .context import bind, unbind

logger = logging.getLogger(__name__)

# Argument names of Seam's tasks that say what a task works on.
_ID_ARGUMENTS = ("run_id", "intent_id", "compensation_id")
_tokens: dict[str, Token[Any]] = {}


def _ids_in(task: Any, args: Any, kwargs: Any) -> dict[str, Any]:
    try:
        bound = inspect.signature(task.run).bind_partial(*(args or ()), **(kwargs or {}))
    except (TypeError, ValueError):
        return {}
    return {name: bound.arguments[name] for name in _ID_ARGUMENTS if name in bound.arguments}


@task_prerun.connect
def _task_started(
    task_id: str = "", task: Any = None, args: Any = None, kwargs: Any = None, **_: Any
) -> None:
    if task is None:
        return
    _tokens[task_id] = bind(task_id=task_id, task=task.name, **_ids_in(task, args, kwargs))


@task_postrun.connect
def _task_finished(task_id: str = "", **_: Any) -> None:
    token = _tokens.pop(task_id, None)
    if token is not None:
        # Set in another context (a pool that ran prerun elsewhere): nothing to undo here.
        with contextlib.suppress(ValueError):
            unbind(token)


@worker_ready.connect
def _serve_worker_metrics(**_: Any) -> None:
    """SEAM_WORKER_METRICS_PORT=9808 serves this worker's counters (all its pool processes'
    with PROMETHEUS_MULTIPROC_DIR) at http://host:9808/metrics. Alerts use the database gauges
    of the web's /metrics; these counters show what the workers did."""
    port = os.environ.get("SEAM_WORKER_METRICS_PORT", "")
    if not port:
        return
    from prometheus_client import REGISTRY, CollectorRegistry, multiprocess, start_http_server

    registry: Any = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    start_http_server(int(port), registry=registry)
    logger.info("worker metrics served on port %s", port)
