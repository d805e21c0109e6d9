from django.apps import AppConfig


class ObservabilityConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "observability"
    verbose_name = "Log context, structured logs, request ids and counters"

    def ready(self) -> None:
        # Celery signal handlers: each task's log context, and the worker's metrics exporter.
        from . import celery_signals  # noqa: F401
