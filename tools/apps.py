from typing import Any

from django.apps import AppConfig
from django.core.signals import setting_changed

from journal.tool_errors import arguments_check_register

from .discovery import forget_seam_modules
from .registry import registered_arguments_check, reset_registry


def _forget_tools(*, setting: str, **kwargs: Any) -> None:
    # Which apps are installed is which plug-ins are on (tools.discovery).
    if setting == "INSTALLED_APPS":
        forget_seam_modules()
        reset_registry()


class ToolsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tools"
    verbose_name = "Tools and connectors"

    def ready(self) -> None:
        # Tests install an integrator's app with override_settings. (A seam module whose tools
        # read other settings when loaded resets the registry itself when those change.)
        setting_changed.connect(_forget_tools, dispatch_uid="tools.forget_tools")
        # A registered tool's arguments are checked against its schema before its intent is
        # recorded, whichever path records it (in process, REST, a staff action).
        arguments_check_register("tools.registry", registered_arguments_check)
