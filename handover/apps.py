from django.apps import AppConfig


class HandoverConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "handover"
    verbose_name = "Handover and run journal"

    def ready(self) -> None:
        from . import schema  # noqa: F401  (registers the OpenAPI auth extension)
