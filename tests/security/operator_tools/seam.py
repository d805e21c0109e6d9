"""The operator's app's plug-ins (tools.discovery): one tool of their helpdesk."""

from __future__ import annotations

from tools.registry import ToolSpec


def tools() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="open_ticket",
            kind="write",
            args_schema={"type": "object", "properties": {"subject": {"type": "string"}}},
            connector_path="tools.connectors.HttpConnector",
            connector_options={"base_url": "https://helpdesk.example.com/api/", "path": "tickets"},
            receipt_fields=("ticket_id",),
        )
    ]
