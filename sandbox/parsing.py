"""Reading a request's JSON body into typed values, refusing (400, naming the field) anything
the provider would not accept: a body that is not an object, a missing or unexpected field, a
value of the wrong type or out of range."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any

from django.http import HttpRequest

from .errors import InvalidRequest

MAX_AMOUNT = Decimal("9999999.99")
CURRENCY = re.compile(r"^[A-Z]{3}$")


def json_body(request: HttpRequest, *, allowed: Iterable[str]) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequest("invalid_json", "the body is not JSON") from None
    if not isinstance(body, dict):
        raise InvalidRequest("invalid_json", "the body must be a JSON object")
    unexpected = sorted(set(body) - set(allowed))
    if unexpected:
        raise InvalidRequest("unexpected_field", f"unexpected field {unexpected[0]!r}", field=unexpected[0])
    return body


def _required(body: dict[str, Any], name: str) -> Any:
    if body.get(name) is None:
        raise InvalidRequest("required", f"{name} is required", field=name)
    return body[name]


def text(body: dict[str, Any], name: str, *, max_length: int = 100) -> str:
    value = _required(body, name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("invalid", f"{name} must be a non-empty string", field=name)
    if len(value) > max_length:
        raise InvalidRequest("invalid", f"{name} is longer than {max_length} characters", field=name)
    return value.strip()


def optional_text(body: dict[str, Any], name: str, *, max_length: int = 100) -> str:
    if body.get(name) in (None, ""):
        return ""
    return text(body, name, max_length=max_length)


def integer(body: dict[str, Any], name: str, *, minimum: int, maximum: int, nonzero: bool = False) -> int:
    value = _required(body, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest("invalid", f"{name} must be an integer", field=name)
    if not minimum <= value <= maximum or (nonzero and value == 0):
        detail = " and not 0" if nonzero else ""
        raise InvalidRequest("invalid", f"{name} must be between {minimum} and {maximum}{detail}", field=name)
    return value


def optional_integer(body: dict[str, Any], name: str, *, minimum: int, maximum: int) -> int | None:
    if body.get(name) is None:
        return None
    return integer(body, name, minimum=minimum, maximum=maximum)


def money(body: dict[str, Any], name: str) -> Decimal:
    """A positive amount with at most two decimal places, as a string ("14.95") or a number."""
    value = _required(body, name)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidRequest("invalid", f'{name} must be a decimal amount such as "14.95"', field=name)
    try:
        amount = Decimal(str(value).strip())
    except InvalidOperation:
        raise InvalidRequest(
            "invalid", f'{name} must be a decimal amount such as "14.95"', field=name
        ) from None
    if not amount.is_finite() or amount <= 0 or amount > MAX_AMOUNT:
        raise InvalidRequest("invalid", f"{name} must be between 0.01 and {MAX_AMOUNT}", field=name)
    if amount != amount.quantize(Decimal("0.01")):
        raise InvalidRequest("invalid", f"{name} has more than two decimal places", field=name)
    return amount.quantize(Decimal("0.01"))


def currency(body: dict[str, Any], name: str) -> str:
    value = _required(body, name)
    if not isinstance(value, str) or not CURRENCY.match(value):
        raise InvalidRequest("invalid", f"{name} must be a three-letter currency code", field=name)
    return value


def stock_levels(body: dict[str, Any], name: str) -> dict[str, int] | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidRequest("invalid", f"{name} must map SKUs to units", field=name)
    levels: dict[str, int] = {}
    for sku in value:
        levels[text({name: sku}, name, max_length=40)] = integer(value, sku, minimum=0, maximum=1_000_000)
    return levels


def optional_text_list(body: dict[str, Any], name: str, *, max_length: int = 40) -> list[str] | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidRequest("invalid", f"{name} must be a list of strings", field=name)
    return [text({name: item}, name, max_length=max_length) for item in value]


def optional_date(body: dict[str, Any], name: str) -> date | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest("invalid", f"{name} must be a date such as 2026-12-04", field=name)
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidRequest("invalid", f"{name} must be a date such as 2026-12-04", field=name) from None
