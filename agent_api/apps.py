from django.apps import AppConfig


class AgentApiConfig(AppConfig):
    """The journal's REST API for agent runtimes: token authentication, the agent lane that
    answers an agent's plain calls without the console's middleware, and the serializers."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "agent_api"
    verbose_name = "Agent API"

    def ready(self) -> None:
        from . import schema  # noqa: F401  (registers the OpenAPI description of the agent token)
