"""OpenAPI description of the agent token, so the schema (and clients generated from it) know
to send `Authorization: Bearer <token>`. Imported by AgentApiConfig.ready()."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "agent_api.authentication.AgentTokenAuthentication"
    name = "agentToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "An agent token from create_agent_token."}
