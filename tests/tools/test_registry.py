"""tools.registry and the status classification: declared tools, schemas, dotted-path connectors."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
import requests
from django.test import override_settings

from journal.tool_errors import DispatchResult
from tests.support.plugins import declaring
from tools.connectors import HttpConnector, LookupQuery, NotPerformed, classify_response
from tools.registry import ArgumentsRefused, ToolSpec, UnknownTool, all_tools, get_tool, in_flight_floor


class RecordingConnector:
    """A Python connector class, named by dotted path in a tool declaration."""

    def __init__(self, *, prefix: str) -> None:
        self.prefix = prefix

    def perform(self, args: Mapping[str, Any], idempotency_key: str) -> DispatchResult:
        return DispatchResult(receipt={"ref": f"{self.prefix}-{idempotency_key}"})

    def lookup(self, query: LookupQuery) -> NotPerformed:
        return NotPerformed()


def tools() -> list[ToolSpec]:
    return [
        ToolSpec(
            name="local_tool",
            kind="write",
            args_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            connector_path="tests.tools.test_registry.RecordingConnector",
            connector_options={"prefix": "LT"},
        )
    ]


def _response(status: int, body: bytes = b"{}") -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response._content = body
    return response


@pytest.mark.parametrize(
    ("status", "error_class"),
    [
        (400, "invalid_input"),
        (422, "invalid_input"),
        (404, "invalid_input"),
        (409, "conflict"),
        (412, "conflict"),
        (401, "permanent"),
        (403, "permanent"),
        (429, "transient"),
        (503, "transient"),
        (500, "ambiguous"),
        (502, "ambiguous"),
        (504, "ambiguous"),
        (418, "invalid_input"),
    ],
)
def test_every_status_maps_to_one_error_class(status: int, error_class: str) -> None:
    assert classify_response(_response(status)).error_class == error_class


def test_the_providers_message_is_kept_but_never_decides_the_class() -> None:
    error = classify_response(_response(409, b'{"error": {"message": "please retry, temporary glitch"}}'))
    assert error.error_class == "conflict"
    assert "temporary glitch" in error.message


@declaring(__name__)
def test_a_connector_class_by_dotted_path_is_built_with_its_options() -> None:
    spec = get_tool("local_tool")
    assert spec.get_connector().perform({"n": 1}, "k1").receipt == {"ref": "LT-k1"}
    assert set(all_tools()) == {"local_tool"}
    with pytest.raises(ArgumentsRefused) as refused:
        spec.validate({"n": "one"})
    assert refused.value.field == "args.n"
    with pytest.raises(UnknownTool):
        get_tool("issue_refund")


@override_settings(SEAM_SANDBOX_URL="http://127.0.0.1:8100")
def test_every_sandbox_write_declares_its_receipt_and_a_way_to_ask_about_it() -> None:
    writes = {name: spec for name, spec in all_tools().items() if spec.kind == "write"}
    assert len(writes) == 13
    for spec in writes.values():
        assert spec.receipt_fields, spec.name
        connector: Any = spec.get_connector()
        assert connector.lookup_path or getattr(connector, "search_path", ""), spec.name


@declaring(__name__)
@override_settings(SEAM_CALL_TIMEOUT_SECONDS=4.0, SEAM_IN_FLIGHT_MARGIN_SECONDS=10.0)
def test_a_calls_time_in_flight_is_its_tools_call_timeout_plus_the_margin() -> None:
    http = HttpConnector(base_url="http://downstream", path="x", timeout=5.0, connect_timeout=2.0)
    schema = {"type": "object"}
    by_connector = ToolSpec(name="by_connector", kind="write", args_schema=schema, connector=http)
    declared = ToolSpec(name="declared", kind="write", args_schema=schema, connector=http, call_timeout=30.0)
    untimed = get_tool("local_tool")  # a Python connector that names no timeout

    assert by_connector.timeout() == timedelta(seconds=7)
    assert declared.timeout() == timedelta(seconds=30)
    assert untimed.timeout() == timedelta(seconds=4)
    floor = in_flight_floor()
    assert floor.of("local_tool") == timedelta(seconds=14)
    assert floor.of("a_tool_nobody_registered") == timedelta(seconds=14)
