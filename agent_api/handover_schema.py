"""The handover's serializer, built from its dataclasses (handover) field by field, so
the object is described once: GET /api/v1/runs/{id}/handover/ answers with
HandoverSerializer(handover).data, and /api/schema/ publishes the same serializer. The contract
test (tests/agent_api/test_api_handover.py) validates real handovers, in each of their states,
against the published schema.

A field's type picks its DRF field: str, int, bool, datetime, UUID, a TextChoices enum (a
choice), a dict (an object whose keys are the downstream's or the caller's own), a list, another
dataclass (a nested serializer), `X | None` (nullable). A field's `described(...)` annotation
gives its help text and options; `__json_properties__` adds read-only properties."""

from __future__ import annotations

import dataclasses
import types
import typing
import uuid
from datetime import datetime
from typing import Any

from django.db import models
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from handover import FieldDoc, Handover


@extend_schema_field(
    {
        "oneOf": [{"type": "boolean"}, {"type": "string"}],
        "description": "true, false, or the condition and deadline in words, e.g. "
        '"until Sun 29 Nov 18:00; after that the 7.50 GBP recall fee is lost", '
        '"partially: the 7.50 GBP recall fee is lost". The same as reversibility.sentence, '
        "with yes and no as true and false.",
    }
)
class FlagOrSentenceField(serializers.ReadOnlyField):
    """A bool or a sentence: how far a completed write can still be taken back."""


class FreeObjectField(serializers.DictField):
    """An object whose keys are the downstream's or the caller's own (a receipt, arguments)."""

    child = serializers.JSONField()


SCALARS: dict[Any, type[serializers.Field]] = {
    str: serializers.CharField,
    int: serializers.IntegerField,
    bool: serializers.BooleanField,
    datetime: serializers.DateTimeField,
    uuid.UUID: serializers.UUIDField,
    bool | str: FlagOrSentenceField,
}

_serializers: dict[type, type[serializers.Serializer]] = {}


def _field(hint: Any, **options: Any) -> serializers.Field:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return _field(inner, allow_null=True, **options)
    if hint in SCALARS:
        return SCALARS[hint](**options)
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = args
        if isinstance(item, type) and dataclasses.is_dataclass(item):
            return serializer_for(item)(many=True, **options)
        return serializers.ListField(child=_field(item), **options)
    if origin is dict:
        _key, value = args
        if value is Any:
            return FreeObjectField(**options)
        return serializers.DictField(child=_field(value), **options)
    if isinstance(hint, type) and issubclass(hint, models.Choices):
        options.setdefault("choices", hint.choices)
        return serializers.ChoiceField(**options)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return serializer_for(hint)(**options)
    raise TypeError(f"no serializer field for {hint!r}")


def _written_doc(cls: type) -> str | None:
    # A dataclass without a docstring gets its signature as one: no description for the schema.
    doc = cls.__doc__ or ""
    return None if doc.startswith(f"{cls.__name__}(") else doc


def serializer_for(cls: type) -> type[serializers.Serializer]:
    """The read-only serializer of a dataclass of the handover (one class per dataclass, named
    after it: the OpenAPI component's name)."""
    if cls in _serializers:
        return _serializers[cls]
    hints = typing.get_type_hints(cls, include_extras=True)
    declared: dict[str, Any] = {}
    for spec in dataclasses.fields(cls):
        hint, options = hints[spec.name], {}
        if typing.get_origin(hint) is typing.Annotated:
            hint, *extras = typing.get_args(hint)
            for extra in extras:
                if isinstance(extra, FieldDoc):
                    options.update(extra.options)
        choices = options.pop("choices", None)
        if choices is not None:
            declared[spec.name] = serializers.ChoiceField(choices=choices, **options)
        else:
            declared[spec.name] = _field(hint, **options)
    for name in getattr(cls, "__json_properties__", ()):
        prop = getattr(cls, name)
        returns = typing.get_type_hints(prop.fget)["return"]
        declared[name] = _field(returns, help_text=(prop.__doc__ or "").strip() or None)
    serializer = type(
        f"{cls.__name__}Serializer", (serializers.Serializer,), {"__doc__": _written_doc(cls), **declared}
    )
    _serializers[cls] = serializer
    return serializer


HandoverSerializer = serializer_for(Handover)
