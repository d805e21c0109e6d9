"""agent_api.plain: the agent lane's check of a plain body is compiled from the serializer's own
declarations, so a rule the check cannot see makes nothing plain (the serializer decides), and a
new field needs no second declaration. test_agent_lane.py holds the check to the journal's two
serializers body by body (hypothesis) and through both HTTP paths."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers

from agent_api.plain import PlainBody
from agent_api.serializers import (
    CustomerMessageCreateSerializer,
    IntentCreateSerializer,
    OutcomeSerializer,
    plainly_valid,
)


class Toy(serializers.Serializer):
    name = serializers.CharField(max_length=5)
    count = serializers.IntegerField(min_value=1, required=False, default=1)
    tags = serializers.DictField(required=False, default=dict)


def test_a_new_field_is_checked_from_its_declaration_alone() -> None:
    check = PlainBody(Toy)
    assert check({"name": "abc"}) == {"name": "abc", "count": 1, "tags": {}}
    assert check({"name": "abcdef"}) is None  # over max_length: the serializer's 400
    assert check({"name": " abc"}) is None  # CharField would trim it
    assert check({"name": "abc", "count": 0}) is None  # under min_value
    assert check({"name": "abc", "count": True}) is None  # a bool is not a count
    assert check({"count": 2}) is None  # a required field missing
    assert check({"name": "abc", "unknown": 1}) == {"name": "abc", "count": 1, "tags": {}}
    assert Toy(data={"name": "abc", "unknown": 1}).is_valid()


def test_defaults_are_fresh_for_each_body() -> None:
    check = PlainBody(Toy)
    first = check({"name": "a"})
    assert first is not None
    first["tags"]["x"] = 1
    assert check({"name": "b"}) == {"name": "b", "count": 1, "tags": {}}


class WithOptional(serializers.Serializer):
    name = serializers.CharField(max_length=5)
    nickname = serializers.CharField(max_length=5, required=False)


def test_an_optional_field_without_a_default_is_left_out_as_drf_leaves_it() -> None:
    body = {"name": "abc"}
    drf = WithOptional(data=body)
    assert drf.is_valid()
    assert PlainBody(WithOptional)(body) == dict(drf.validated_data) == {"name": "abc"}
    assert PlainBody(WithOptional)({"name": "abc", "nickname": "x"}) == {"name": "abc", "nickname": "x"}


class WithValidator(serializers.Serializer):
    code = serializers.CharField(max_length=5, validators=[RegexValidator("^[a-z]+$")])


class WithValidate(serializers.Serializer):
    code = serializers.CharField(max_length=5)

    def validate(self, attrs: Any) -> Any:
        raise serializers.ValidationError("never")


class WithFieldMethod(serializers.Serializer):
    code = serializers.CharField(max_length=5)

    def validate_code(self, value: str) -> str:
        raise serializers.ValidationError("never")


def test_a_rule_the_check_cannot_see_makes_nothing_plain() -> None:
    assert PlainBody(WithValidator)({"code": "ABC"}) is None
    assert WithValidator(data={"code": "ABC"}).is_valid() is False
    assert PlainBody(WithValidate)({"code": "abc"}) is None
    assert PlainBody(WithFieldMethod)({"code": "abc"}) is None


def test_the_journal_bodies_agents_send_are_plain() -> None:
    assert plainly_valid(IntentCreateSerializer, {"tool": "t", "args": {}, "turn": 1, "occurrence": 2}) == {
        "tool": "t",
        "args": {},
        "turn": 1,
        "occurrence": 2,
    }
    assert plainly_valid(OutcomeSerializer, {"ok": 1}) is None
    refused = OutcomeSerializer(data={"ok": 1})
    assert not refused.is_valid()
    assert refused.errors["ok"] == ["must be true or false"]


def test_a_customer_message_body_is_plain_with_the_serializers_data() -> None:
    body = {"channel": "email", "body": "We have credited you 14.95. "}
    drf = CustomerMessageCreateSerializer(data=body)
    assert drf.is_valid(), drf.errors
    assert plainly_valid(CustomerMessageCreateSerializer, body) == dict(drf.validated_data)
    assert plainly_valid(CustomerMessageCreateSerializer, {**body, "about_steps": ["s-1"]}) is None  # a list
