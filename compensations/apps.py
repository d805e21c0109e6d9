from django.apps import AppConfig


class CompensationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "compensations"

    def ready(self) -> None:
        # Registers the catalogue's system checks (compensations.E001-E003).
        from . import checks  # noqa: F401
