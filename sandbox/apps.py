from typing import Any

from django.apps import AppConfig, apps
from django.core.signals import setting_changed
from django.db.models.signals import post_migrate

from tools.registry import reset_registry


def _forget_tools(*, setting: str, **kwargs: Any) -> None:
    # sandbox.seam builds its tools' connectors from SEAM_SANDBOX_URL when the registry loads them.
    if setting == "SEAM_SANDBOX_URL":
        reset_registry()


class SandboxConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "sandbox"
    verbose_name = "Sandbox of downstream providers"

    def ready(self) -> None:
        from .catalogue import catalogue_seed_after_migrate

        # Once per `migrate`, with the post_migrate of the app whose table it fills (Django sends
        # post_migrate only for apps with models; every app's migrations have run by then).
        post_migrate.connect(
            catalogue_seed_after_migrate,
            sender=apps.get_app_config("compensations"),
            dispatch_uid="sandbox.seed_catalogue",
        )
        # Tests point the sandbox's tools at their own sandbox process with override_settings.
        setting_changed.connect(_forget_tools, dispatch_uid="sandbox.forget_tools")
