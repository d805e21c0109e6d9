from django.apps import AppConfig


class McpdeskConfig(AppConfig):
    """The mcpdesk as a Django app: installing it is what turns its plug-ins on (seam.py)."""

    name = "examples.mcpdesk"
    label = "mcpdesk"
    verbose_name = "Mcpdesk (an example MCP server behind Seam)"
