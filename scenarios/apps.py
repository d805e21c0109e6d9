from django.apps import AppConfig


class ScenariosConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "scenarios"
    verbose_name = "Flows, tickets and the kill-point harness"
