from django.apps import AppConfig


class JournalConfig(AppConfig):
    """The bottom layer: runs, intents, journal events, customer messages, tenants and agent
    tokens, and the one write path that records an intent before each call and its outcome after."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "journal"
    verbose_name = "Run journal"
