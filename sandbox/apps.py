from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate


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
