from typing import Any

from django.apps import AppConfig
from django.core.signals import setting_changed


def _forget_tools(*, setting: str, **kwargs: Any) -> None:
    if setting in ("SEAM_TOOL_MODULES", "SEAM_SANDBOX_URL"):
        from .registry import reset_registry

        reset_registry()


class ToolsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tools"
    verbose_name = "Tools and connectors"

    def ready(self) -> None:
        # Tests switch the catalogue and the sandbox address with override_settings.
        setting_changed.connect(_forget_tools, dispatch_uid="tools.forget_tools")
