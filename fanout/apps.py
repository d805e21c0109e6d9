from django.apps import AppConfig


class FanoutConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "fanout"
    verbose_name = "Fan-outs"
