"""The agent API's request and answer bodies, each field declared once. The agent lane checks a
plain body against the same declarations (agent_api.plain), so the two paths cannot disagree."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.parsers import JSONParser as DRFJSONParser

from handover import why_words
from journal import services
from journal.models import CUSTOMER_REF_MAX, CustomerMessage, ErrorClass, Intent, Run
from journal.runs import Cancelled
from retention.selectors import archived_run_of

from . import pages
from .plain import PlainBody, boolean_check


class JSONParser(DRFJSONParser):
    """DRF's parser lets json's RecursionError on deeply nested input escape as a 500."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply") from exc


PARSERS = [JSONParser, FormParser, MultiPartParser]

# Intent.turn and Intent.occurrence are PostgreSQL integers; a larger number is a 500, not a row.
MAX_DB_INT = 2**31 - 1


# --- serializers ------------------------------------------------------------------------------


class RefuseUnknownKeys:
    """The service refuses unknown keys in versions and plan steps (a typo such as `ocurrence`
    would change the plan); a serializer silently dropping them would hide that refusal."""

    fields: Any

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(f"unknown keys: {unknown}")
        return super().to_internal_value(data)  # type: ignore[misc]


class VersionsSerializer(RefuseUnknownKeys, serializers.Serializer):
    schema = serializers.CharField(max_length=40)
    flow = serializers.CharField(max_length=40)
    policy = serializers.CharField(max_length=40)
    capability = serializers.CharField(max_length=40)


class PlanStepSerializer(RefuseUnknownKeys, serializers.Serializer):
    tool = serializers.CharField(max_length=100)
    args = serializers.DictField(required=False, default=dict)
    phase = serializers.CharField(max_length=500, required=False, allow_blank=True)
    detail = serializers.CharField(max_length=500, required=False, allow_blank=True)
    occurrence = serializers.IntegerField(min_value=0, required=False, default=0)


class RunCreateSerializer(serializers.Serializer):
    task_type = serializers.SlugField(max_length=64)
    ticket_id = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    order_id = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    customer_ref = serializers.CharField(
        max_length=CUSTOMER_REF_MAX,
        required=False,
        allow_blank=True,
        default="",
        help_text="Who the run is for (an email, an account number): the console's search finds it.",
    )
    external_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    deadline = serializers.DateTimeField(required=False, allow_null=True, default=None)
    versions = VersionsSerializer()
    plan = PlanStepSerializer(many=True, required=False, default=list)


class IntentCreateSerializer(serializers.Serializer):
    tool = serializers.CharField(max_length=100)
    args = serializers.DictField()
    turn = serializers.IntegerField(min_value=0, max_value=MAX_DB_INT)
    occurrence = serializers.IntegerField(min_value=0, max_value=MAX_DB_INT, required=False, default=0)


class ZonedDateTimeField(serializers.DateTimeField):
    """A time that must say its zone: DRF's field would read a naive one in the server's zone,
    a guess about evidence that decides whether a call was the run's work."""

    def to_internal_value(self, value: Any) -> datetime:
        if isinstance(value, str):
            parsed = parse_datetime(value)
            if parsed is not None and timezone.is_naive(parsed):
                raise serializers.ValidationError("must carry a time zone (e.g. 2026-11-29T10:00:00Z)")
        return super().to_internal_value(value)


class StrictBooleanField(serializers.BooleanField):
    """True or false only: DRF's BooleanField would read "yes" or 1 as true, and an outcome
    must say which it was."""

    plain_check = staticmethod(boolean_check)
    default_error_messages = {"invalid": "must be true or false"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class OutcomeSerializer(serializers.Serializer):
    ok = StrictBooleanField()
    summary = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False)
    receipt = serializers.DictField(required=False, default=dict)
    error_class = serializers.ChoiceField(
        choices=ErrorClass.choices, required=False, allow_blank=True, default=""
    )
    request_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    evidence_at = ZonedDateTimeField(
        required=False,
        allow_null=True,
        default=None,
        help_text="When the downstream says the state it answered with came about (ISO 8601 with "
        "its zone), for a success only. Older than the intent: the step is settled `already_so` "
        "(the state was there before the call; never undone, never sent again).",
    )


_PLAIN_BODIES: dict[type[serializers.Serializer], PlainBody] = {}


def plainly_valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any] | None:
    """The serializer's validated data for a plain body (agent_api.plain), else None."""
    check = _PLAIN_BODIES.get(serializer_class)
    if check is None:
        check = _PLAIN_BODIES[serializer_class] = PlainBody(serializer_class)
    return check(data)


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """The body's validated data: a plain body without the serializer's machinery, any other
    through it (a 400 naming each field it refuses)."""
    plain = plainly_valid(serializer_class, data)
    if plain is not None:
        return plain
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class CustomerMessageCreateSerializer(serializers.Serializer):
    channel = serializers.ChoiceField(choices=CustomerMessage.Channel.choices)
    body = serializers.CharField(max_length=services.MAX_MESSAGE_CHARS, trim_whitespace=False)
    told_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    about_steps = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        max_length=100,
        help_text='Step ids of this run whose effects the message reports ("we have credited you" '
        "names the credit's step): if one is undone, the handover flags the message.",
    )


class IntentSerializer(serializers.ModelSerializer):
    """An intent row as the API answers it. Its fields (Meta, which the schema documents) are
    rendered by to_representation directly: ModelSerializer's generic rendering, which copies its
    fields for every instance, was a fifth of each journal request's server time."""

    class Meta:
        model = Intent
        fields = [
            "step_id",
            "turn",
            "tool",
            "args",
            "occurrence",
            "idempotency_key",
            "status",
            "error_class",
            "outcome_summary",
            "receipt",
            "request_id",
            "intended_at",
            "settled_at",
        ]

    def to_representation(self, instance: Intent) -> dict[str, Any]:
        # The same values as the generic rendering (tests/agent_api/test_api_journal.py compares
        # them): text and JSON as stored, datetimes as DRF writes them.
        return {
            "step_id": instance.step_id,
            "turn": instance.turn,
            "tool": instance.tool,
            "args": instance.args,
            "occurrence": instance.occurrence,
            "idempotency_key": instance.idempotency_key,
            "status": str(instance.status),
            "error_class": str(instance.error_class),
            "outcome_summary": instance.outcome_summary,
            "receipt": instance.receipt,
            "request_id": instance.request_id,
            "intended_at": _datetime_json(instance.intended_at),
            "settled_at": _datetime_json(instance.settled_at),
        }


def _datetime_json(value: datetime | None) -> str | None:
    """A datetime as DRF's DateTimeField renders it (ISO 8601 in the current time zone, UTC
    written Z)."""
    if value is None:
        return None
    text = (timezone.localtime(value) if timezone.is_aware(value) else timezone.make_aware(value)).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


class CustomerMessageSerializer(serializers.ModelSerializer):
    class Meta:
        model = CustomerMessage
        fields = ["id", "channel", "body", "told_at", "recorded_at", "about_steps"]


class RunSerializer(serializers.ModelSerializer):
    versions = serializers.SerializerMethodField()
    outcome_detail = serializers.SerializerMethodField(
        help_text="Why the run ended where it did, in words: outcome_why said plainly, or the reason given."
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "external_id",
            "task_type",
            "ticket_id",
            "order_id",
            "customer_ref",
            "status",
            "deadline",
            "versions",
            "plan",
            "last_heartbeat_at",
            "created_at",
            "updated_at",
            "version",
            "outcome_reason",
            "outcome_why",
            "outcome_detail",
            "ended_at",
            "retries",
            "repairs",
            "replans",
            "reflections",
            "escalations",
        ]

    def get_versions(self, run: Run) -> dict[str, str]:
        return run.versions

    def get_outcome_detail(self, run: Run) -> str:
        return why_words.run_why_words(run.outcome_why, run.outcome_detail)


_NEXT_HELP = (
    "The cursor of the list's next page (GET /api/v1/runs/{id}/%s/?cursor=...), or null when "
    "this page is its last."
)


class ArchiveSerializer(serializers.Serializer):
    """Where an archived run's intents and events are: one file of the archive store."""

    file_name = serializers.CharField(read_only=True, help_text="Relative to the archive store.")
    sha256 = serializers.CharField(read_only=True, help_text="Of the file, as written and verified.")
    month = serializers.DateField(read_only=True, help_text="The month (UTC) its runs were created in.")
    verified_at = serializers.DateTimeField(read_only=True)
    intents = serializers.IntegerField(read_only=True, help_text="This run's intents in the file.")
    events = serializers.IntegerField(read_only=True, help_text="This run's journal events in the file.")


def _when(moment: datetime | None) -> str | None:
    return None if moment is None else serializers.DateTimeField().to_representation(moment)


def _archive_answer(run: Run) -> dict[str, Any] | None:
    archived = archived_run_of(run)
    if archived is None:
        return None
    archive = archived.archive
    return {
        "file_name": archive.file_name,
        "sha256": archive.sha256,
        "month": archive.month.isoformat(),
        "verified_at": _when(archive.verified_at),
        "intents": archived.intents,
        "events": archived.events,
    }


class RunDetailSerializer(RunSerializer):
    """The run with the first page of each of its lists (pages.DEFAULT_LIMIT rows, oldest first):
    a run may hold tens of thousands of intents, and one answer holding them all was megabytes.
    The rest are read page by page, or all at once from the run's export (JSON lines).

    An archived run (retention) answers its summary, its customer messages and its `archive`
    instead of its intents, which are no longer the journal's: no `intents` nor `intents_next`."""

    archived_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When its intents and events were archived; null if not."
    )
    archive = ArchiveSerializer(read_only=True, allow_null=True, help_text="An archived run's archive.")

    intents = IntentSerializer(many=True, read_only=True, help_text="The first page of intents.")
    intents_next = serializers.CharField(read_only=True, allow_null=True, help_text=_NEXT_HELP % "intents")
    customer_messages = CustomerMessageSerializer(
        many=True, read_only=True, help_text="The first page of customer messages."
    )
    customer_messages_next = serializers.CharField(
        read_only=True, allow_null=True, help_text=_NEXT_HELP % "customer-messages"
    )

    class Meta(RunSerializer.Meta):
        fields = [
            *RunSerializer.Meta.fields,
            "archived_at",
            "archive",
            "intents",
            "intents_next",
            "customer_messages",
            "customer_messages_next",
        ]

    def to_representation(self, instance: Run) -> dict[str, Any]:
        data = dict(RunSerializer().to_representation(instance))
        data["archived_at"] = _when(instance.archived_at)
        data["archive"] = _archive_answer(instance)
        if instance.archived_at is None:
            intents = pages.page(pages.INTENTS, instance)
            data["intents"] = [_INTENT_RENDERING.to_representation(row) for row in intents.rows]
            data["intents_next"] = intents.next
        messages = pages.page(pages.CUSTOMER_MESSAGES, instance)
        data["customer_messages"] = [_MESSAGE_RENDERING.to_representation(row) for row in messages.rows]
        data["customer_messages_next"] = messages.next
        return data


class IntentPageSerializer(serializers.Serializer):
    """A page of a run's intents, oldest first."""

    results = IntentSerializer(many=True, read_only=True)
    next = serializers.CharField(read_only=True, allow_null=True, help_text=_NEXT_HELP % "intents")


class CustomerMessagePageSerializer(serializers.Serializer):
    """A page of a run's customer messages, by the time each was told."""

    results = CustomerMessageSerializer(many=True, read_only=True)
    next = serializers.CharField(read_only=True, allow_null=True, help_text=_NEXT_HELP % "customer-messages")


# One of each, shared: neither keeps state between renderings (their fields are bound once).
_INTENT_RENDERING = IntentSerializer()
_MESSAGE_RENDERING = CustomerMessageSerializer()


def page_answer(listing: pages.Listing, page: pages.Page) -> dict[str, Any]:
    """A page as the paged endpoints answer it: {"results": [...], "next": cursor or null}."""
    return {"results": [render_row(listing, row) for row in page.rows], "next": page.next}


def render_row(listing: pages.Listing, row: Any) -> dict[str, Any]:
    """One row of a run's list, as the API renders it."""
    if listing is pages.INTENTS:
        return _INTENT_RENDERING.to_representation(row)
    return dict(_MESSAGE_RENDERING.to_representation(row))


class CancelSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=services.MAX_SUMMARY_CHARS)


class CancelledSerializer(serializers.Serializer):
    run = RunSerializer()
    completed = IntentSerializer(many=True)
    uncertain = IntentSerializer(many=True)
    cleanup_scheduled = serializers.SerializerMethodField(
        help_text="What becomes of each call still in doubt, in words, with the key to ask about."
    )
    cleanup = serializers.SerializerMethodField(
        help_text="The same, typed: {code, tool, step_id, key[, quiet_seconds]} (journal.why.CleanupCode)."
    )

    def get_cleanup_scheduled(self, cancelled: Cancelled) -> list[str]:
        return [why_words.cleanup_words(c.as_json()) for c in cancelled.cleanup_scheduled]

    def get_cleanup(self, cancelled: Cancelled) -> list[dict[str, Any]]:
        return [c.as_json() for c in cancelled.cleanup_scheduled]


class CountSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=sorted(services.COUNTERS))
