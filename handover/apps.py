from django.apps import AppConfig


class HandoverConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "handover"
    verbose_name = "Handover console"

    def ready(self) -> None:
        from journal.signals import escalation_opened

        from . import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from .tasks import escalation_opened_notify

        escalation_opened.connect(escalation_opened_notify, dispatch_uid="handover.notify_escalation")
