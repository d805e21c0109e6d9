"""Plain bodies: the check of an agent's JSON body that the agent lane makes without DRF.

A serializer's fields are declared once (agent_api.serializers). From them, `PlainBody` builds,
once per serializer class, a check that accepts a body only where the serializer would keep
every value exactly as it is: JSON types exactly as declared, nothing to trim, coerce or parse.
For such a body it returns the data the serializer would return; for any other it returns None
and the serializer decides, with its messages. So the two cannot disagree: the check knows no
field the serializer does not declare, and tests/agent_api/test_agent_lane.py sends the same
bodies to both (and through both HTTP paths).

Why a second check at all: DRF deep-copies a serializer's fields per instance and runs each
value through to_internal_value and its validators; for an agent's two calls per tool call that
was a measurable share of the server's time (bench/journal.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core import validators as django_validators
from rest_framework import fields as drf_fields
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

# A value's check: the value the serializer would give, or _NOT_PLAIN.
_NOT_PLAIN = object()
# An optional field without a default, absent from the body: absent from the data too, as DRF
# leaves it (its get_default() raises SkipField).
_ABSENT = object()
Check = Callable[[Any], Any]


def _text_check(field: drf_fields.CharField) -> Check:
    """A str that CharField keeps as it is: within its lengths, no NUL, no lone surrogate
    (which UTF-8 cannot encode), nothing its trimming would remove, blank only where allowed."""
    max_length, min_length = field.max_length, field.min_length
    trims, allow_blank = field.trim_whitespace, field.allow_blank

    def check(value: Any) -> Any:
        if type(value) is not str or "\x00" in value:
            return _NOT_PLAIN
        if (max_length is not None and len(value) > max_length) or (
            min_length is not None and len(value) < min_length
        ):
            return _NOT_PLAIN
        if (trims and value != value.strip()) or (not value and not allow_blank):
            return _NOT_PLAIN
        try:
            value.encode()
        except UnicodeEncodeError:
            return _NOT_PLAIN
        return value

    return check


def _choice_check(field: drf_fields.ChoiceField) -> Check:
    choices = {key for key in field.choices if isinstance(key, str)}
    allow_blank = field.allow_blank

    def check(value: Any) -> Any:
        if type(value) is not str or not (value in choices or (allow_blank and value == "")):
            return _NOT_PLAIN
        return value

    return check


def _integer_check(field: drf_fields.IntegerField) -> Check:
    low, high = field.min_value, field.max_value

    def check(value: Any) -> Any:
        if type(value) is not int or (low is not None and value < low) or (high is not None and value > high):
            return _NOT_PLAIN
        return value

    return check


def boolean_check(value: Any) -> Any:
    """A JSON true or false, as it is."""
    return value if type(value) is bool else _NOT_PLAIN


def _dict_check(field: drf_fields.DictField) -> Check | None:
    # Only a dict of anything (the child unvalidated) is kept as it is; a typed child converts.
    if type(field.child) is not drf_fields._UnvalidatedField:
        return None
    allow_empty = field.allow_empty

    def check(value: Any) -> Any:
        return dict(value) if type(value) is dict and (value or allow_empty) else _NOT_PLAIN

    return check


# The validators DRF adds to the fields below from their arguments, which their checks cover.
_BUILT_IN_VALIDATORS = (
    django_validators.MaxLengthValidator,
    django_validators.MinLengthValidator,
    django_validators.MaxValueValidator,
    django_validators.MinValueValidator,
    django_validators.ProhibitNullCharactersValidator,
    ProhibitSurrogateCharactersValidator,
)


def _value_check(field: drf_fields.Field) -> Check | None:
    """The check of one field's values, or None where no value of it is plain (the field parses
    or converts: a time, a nested serializer, a field with a validator of its own): then only
    its absence, or a null it allows, is plain. A field class may name its own check
    (`plain_check`, as agent_api.serializers.StrictBooleanField does)."""
    if any(type(validator) not in _BUILT_IN_VALIDATORS for validator in field.validators):
        return None
    kind = type(field)
    own: Check | None = getattr(kind, "plain_check", None)
    if own is not None:
        return own
    if kind is drf_fields.CharField:
        return _text_check(field)  # type: ignore[arg-type]
    if kind is drf_fields.ChoiceField:
        return _choice_check(field)  # type: ignore[arg-type]
    if kind is drf_fields.IntegerField:
        return _integer_check(field)  # type: ignore[arg-type]
    if kind is drf_fields.BooleanField:
        return boolean_check
    if kind is drf_fields.DictField:
        return _dict_check(field)  # type: ignore[arg-type]
    return None


class _FieldRule:
    def __init__(self, name: str, field: drf_fields.Field) -> None:
        self.name = name
        self.required = field.required
        self.allow_null = field.allow_null
        self.field = field
        self.check = _value_check(field)

    def value(self, body: dict[str, Any]) -> Any:
        if self.name not in body:
            if self.required:
                return _NOT_PLAIN
            try:
                return self.field.get_default()  # a fresh value for a callable default (dict, list)
            except drf_fields.SkipField:
                return _ABSENT
        value = body[self.name]
        if value is None:
            return None if self.allow_null else _NOT_PLAIN
        return _NOT_PLAIN if self.check is None else self.check(value)


class PlainBody:
    """The plain-body check of one serializer class (see the module's docstring)."""

    def __init__(self, serializer_class: type[serializers.Serializer]) -> None:
        for hook in ("validate", "to_internal_value"):
            if getattr(serializer_class, hook) is not getattr(serializers.Serializer, hook):
                # A rule outside the fields: only the serializer knows it, so nothing is plain.
                self.rules: list[_FieldRule] | None = None
                return
        declared = serializer_class().fields
        if any(hasattr(serializer_class, f"validate_{name}") for name in declared):
            self.rules = None
            return
        self.rules = [_FieldRule(name, field) for name, field in declared.items() if not field.read_only]

    def __call__(self, body: Any) -> dict[str, Any] | None:
        """The serializer's validated data for a plain body, else None."""
        if self.rules is None or type(body) is not dict:
            return None
        data: dict[str, Any] = {}
        for rule in self.rules:
            value = rule.value(body)
            if value is _NOT_PLAIN:
                return None
            if value is not _ABSENT:
                data[rule.name] = value
        return data
