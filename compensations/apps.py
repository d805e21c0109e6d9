from django.apps import AppConfig


class CompensationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "compensations"
