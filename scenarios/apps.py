from typing import Any

from django.apps import AppConfig, apps
from django.core.signals import setting_changed
from django.db.models.signals import post_migrate

from .registry import reset_registry


def _forget_flows(*, setting: str, **kwargs: Any) -> None:
    if setting == "INSTALLED_APPS":  # which apps are installed is which flows are declared
        reset_registry()


class ScenariosConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "scenarios"
    verbose_name = "Flows, tickets and the kill-point harness"

    def ready(self) -> None:
        setting_changed.connect(_forget_flows, dispatch_uid="scenarios.forget_flows")
        from .policies import policies_seed_after_migrate

        # Once per `migrate`, with the post_migrate of the app whose table it fills (Django sends
        # post_migrate only for apps with models; every app's migrations have run by then).
        post_migrate.connect(
            policies_seed_after_migrate,
            sender=apps.get_app_config("reconciliation"),
            dispatch_uid="scenarios.seed_policies",
        )
