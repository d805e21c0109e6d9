"""The checks every input of the journal's writes passes before anything is written: names,
canonical arguments, versions, plans, counters, times and texts, each with its bound. A value
outside them is InvalidInput (LimitExceeded for a bound a setting sets), naming the field."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from .errors import InvalidInput
from .keys import NotCanonicalisable, canonical_args, canonical_json
from .tool_errors import ArgumentsRefused, arguments_check

MAX_ARGS_BYTES = 64 * 1024
MAX_RECEIPT_BYTES = 64 * 1024
MAX_PLAN_BYTES = 256 * 1024
MAX_SUMMARY_CHARS = 4000
MAX_MESSAGE_CHARS = 10_000
TOOL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,99}$")
VERSION_NAMES = ("schema", "flow", "policy", "capability")
MAX_COUNTER = 2**31 - 1  # turn and occurrence are PostgreSQL integers


class LimitExceeded(InvalidInput):
    """A bound on the work one run may ask for (a setting, named in the message and in
    `setting`): the request is refused and nothing is written."""

    def __init__(self, message: str, *, field: str, setting: str, limit: int) -> None:
        super().__init__(f"{message}; the limit is {limit} ({setting})", field=field)
        self.setting = setting
        self.limit = limit


# --- validation helpers -----------------------------------------------------------------------


def _json_size(value: Any) -> int:
    return len(canonical_json(value).encode("utf-8"))


def _clean_args(args: Any, *, field: str = "args") -> dict[str, Any]:
    return clean_args_json(args, field=field)[0]


def clean_args_json(args: Any, *, field: str = "args") -> tuple[dict[str, Any], str]:
    """The canonical arguments and their canonical JSON, made once for the size limit, the key
    and the row."""
    if not isinstance(args, dict):
        raise InvalidInput(f"{field} must be a JSON object", field=field)
    try:
        cleaned = canonical_args(args)
    except NotCanonicalisable as exc:
        raise InvalidInput(f"{field}: {exc}", field=field) from exc
    spelled = canonical_json(cleaned)
    size = len(spelled.encode("utf-8"))
    if size > MAX_ARGS_BYTES:
        raise InvalidInput(
            f"{field} are {size} bytes as canonical JSON; the limit is {MAX_ARGS_BYTES}",
            field=field,
        )
    return cleaned, spelled


def clean_tool(tool: Any, *, field: str = "tool") -> str:
    if not isinstance(tool, str) or not TOOL_NAME.match(tool):
        raise InvalidInput(
            f"{field} must be a name of 1-100 letters, digits, '_', '.' or '-' starting with a "
            f"letter; got {tool!r}",
            field=field,
        )
    return tool


def clean_versions(versions: Any) -> dict[str, str]:
    if not isinstance(versions, dict):
        raise InvalidInput(
            "versions must be an object with schema, flow, policy, capability", field="versions"
        )
    cleaned = {}
    for name in VERSION_NAMES:
        value = versions.get(name)
        if not isinstance(value, str) or not value or len(value) > 40:
            raise InvalidInput(
                f"versions.{name} is required: a non-empty string of at most 40 characters",
                field=f"versions.{name}",
            )
        cleaned[name] = value
    unknown = set(versions) - set(VERSION_NAMES)
    if unknown:
        raise InvalidInput(f"versions has unknown keys: {sorted(unknown)}", field="versions")
    return cleaned


def clean_plan(plan: Any) -> list[dict[str, Any]]:
    if not isinstance(plan, list):
        raise InvalidInput("plan must be a list of planned write steps", field="plan")
    if len(plan) > settings.SEAM_MAX_PLAN_STEPS:
        raise LimitExceeded(
            f"plan has {len(plan)} steps",
            field="plan",
            setting="SEAM_MAX_PLAN_STEPS",
            limit=settings.SEAM_MAX_PLAN_STEPS,
        )
    cleaned = []
    for i, step in enumerate(plan):
        where = f"plan[{i}]"
        if not isinstance(step, dict):
            raise InvalidInput(f"{where} must be an object with tool and args", field=where)
        unknown = set(step) - {"tool", "args", "phase", "detail", "occurrence"}
        if unknown:
            raise InvalidInput(f"{where} has unknown keys: {sorted(unknown)}", field=where)
        item: dict[str, Any] = {
            "tool": clean_tool(step.get("tool"), field=f"{where}.tool"),
            "args": _clean_args(step.get("args", {}), field=f"{where}.args"),
        }
        for text_field in ("phase", "detail"):
            value = step.get(text_field, "")
            if not isinstance(value, str) or len(value) > 500:
                raise InvalidInput(
                    f"{where}.{text_field} must be a string of at most 500 characters",
                    field=f"{where}.{text_field}",
                )
            if value:
                item[text_field] = value
        occurrence = step.get("occurrence", 0)
        check_counter(occurrence, field=f"{where}.occurrence")
        if occurrence:
            item["occurrence"] = occurrence
        cleaned.append(item)
    size = _json_size(cleaned)
    if size > MAX_PLAN_BYTES:
        raise InvalidInput(f"plan is {size} bytes; the limit is {MAX_PLAN_BYTES}", field="plan")
    return cleaned


def check_registered_arguments(tool: str, args: dict[str, Any]) -> None:
    """A registered tool's arguments must satisfy its schema before any intent is recorded. An
    unregistered tool is still journaled — the record matters most when nothing else knows the
    call — but reconciliation cannot ask anyone about it and will hand it to a person."""
    try:
        arguments_check(tool, args)
    except ArgumentsRefused as exc:
        raise InvalidInput(exc.message, field=exc.field) from exc


def check_counter(value: Any, *, field: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNTER:
        raise InvalidInput(f"{field} must be an integer from 0 to {MAX_COUNTER}", field=field)


def check_time(value: datetime, *, field: str, horizon: timedelta) -> None:
    """A time an agent gives (a deadline, when the customer was told) must carry a time zone and
    fall between settings.SEAM_EARLIEST_TIME and `horizon` from now: year 9999 is a typo or an
    attack, and would sort every queue and deadline check wrongly."""
    if timezone.is_naive(value):
        raise InvalidInput(f"{field} must carry a time zone", field=field)
    earliest = datetime.fromisoformat(settings.SEAM_EARLIEST_TIME)
    latest = timezone.now() + horizon
    if not earliest <= value <= latest:
        raise InvalidInput(
            f"{field} {value.isoformat()} is outside {earliest:%Y-%m-%d} .. {latest:%Y-%m-%d %H:%M} UTC",
            field=field,
        )


def clean_text(value: Any, *, field: str, limit: int, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string", field=field)
    if "\x00" in value:
        raise InvalidInput(f"{field} contains a NUL character (U+0000)", field=field)
    if required and not value.strip():
        raise InvalidInput(f"{field} is required", field=field)
    if len(value) > limit:
        raise InvalidInput(f"{field} is {len(value)} characters; the limit is {limit}", field=field)
    return value
