from django.apps import AppConfig


class RetentionConfig(AppConfig):
    """Retention: ended runs' intents and events written to a verified archive once their
    tenant's period has passed, so their month's partitions can be dropped (docs/scaling.md,
    "Retention and archiving")."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "retention"
    verbose_name = "Retention and archiving"
