from django.apps import AppConfig


class AuditConfig(AppConfig):
    """The audit trail of what people did: append-only rows written in the same transaction as
    the change they record, an HMAC chain over them, and the kept checks of that chain."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "audit"
    verbose_name = "Audit trail"
