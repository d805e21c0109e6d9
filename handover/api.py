"""The journal's REST API (v1) for agent runtimes in other processes. Views parse and check
types, call one service, and render; every rule lives in journal.services."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound as DRFNotFound
from rest_framework.exceptions import ParseError, PermissionDenied
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.parsers import JSONParser as DRFJSONParser
from rest_framework.permissions import BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from journal import selectors, services
from journal.models import CustomerMessage, ErrorClass, Intent, Run, RunStatus, Tenant

from .authentication import (
    AgentPrincipal,
    agent_principal,
    bearer_secret,
    caller_forget,
    caller_remember,
    caller_remembered,
)
from .forms import RunPageForm
from .handover import HANDOVER_LIST_LIMIT, handover_for
from .handover_schema import HandoverSerializer


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Journal refusals become 4xx answers naming the offending field: {"<field>": ["why"]}; a
    body over the upload limit is a 413 naming the limit (Django would answer a 400 page)."""
    if isinstance(exc, services.JournalError):
        body: dict[str, Any] = {exc.field: [exc.message]} if exc.field else {"detail": exc.message}
        return Response(body, status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            {"detail": f"the request body is larger than {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)"},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    return drf_exception_handler(exc, context)


# --- access -----------------------------------------------------------------------------------


class IsAgentForWrites(BasePermission):
    """Reads are open to the tenant's staff and agents; journal writes only to agent tokens."""

    message = "Journal writes need an agent token (Authorization: Bearer ...)."

    def has_permission(self, request: Request, view: Any) -> bool:
        # This replaces the default IsAuthenticated, so it must refuse anonymous callers itself
        # (DRF then answers 401, not a 403 from the tenant lookup).
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return isinstance(request.user, AgentPrincipal)


def _tenant(request: Request) -> Tenant:
    tenant = selectors.tenant_for_user(request.user)
    if tenant is None:
        raise PermissionDenied("Your account belongs to no tenant.")
    return tenant


def _actor(request: Request) -> services.Actor:
    if isinstance(request.user, AgentPrincipal):
        return services.Actor.agent(request.user.get_username())
    return services.Actor.user(request.user)


def _run(request: Request, run_id: str) -> Run:
    # An agent's run was read with its token (handover.authentication), scoped to its tenant.
    read, run = request.user.run_named(run_id) if isinstance(request.user, AgentPrincipal) else (False, None)
    if not read:
        run = selectors.run_get(tenant=_tenant(request), run_id=run_id)
    if run is None:
        raise DRFNotFound(f"Run {run_id} not found.")
    return run


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
    external_id = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    deadline = serializers.DateTimeField(required=False, allow_null=True, default=None)
    versions = VersionsSerializer()
    plan = PlanStepSerializer(many=True, required=False, default=list)


class IntentCreateSerializer(serializers.Serializer):
    tool = serializers.CharField(max_length=100)
    args = serializers.DictField()
    turn = serializers.IntegerField(min_value=0, max_value=MAX_DB_INT)
    occurrence = serializers.IntegerField(min_value=0, max_value=MAX_DB_INT, required=False, default=0)

    @staticmethod
    def plainly_valid(data: Any) -> dict[str, Any] | None:
        """The validated data of a body that is plainly valid (JSON types exactly as declared,
        nothing to trim or coerce), or None: the serializer then decides, with its messages.
        A strict subset of what the serializer accepts, giving the same validated data
        (tests/handover/test_api_plain_bodies.py); it spares an agent's every call the copying
        of the serializer's fields (DRF deep-copies them per instance)."""
        if type(data) is not dict:
            return None
        tool, args, turn = data.get("tool"), data.get("args"), data.get("turn")
        occurrence = data.get("occurrence", 0)
        if not (_plain_text(tool, max_length=100, trimmed=True) and tool):
            return None
        if type(args) is not dict or not _plain_count(turn) or not _plain_count(occurrence):
            return None
        return {"tool": tool, "args": dict(args), "turn": turn, "occurrence": occurrence}


class ZonedDateTimeField(serializers.DateTimeField):
    """A time that must say its zone: DRF's field would read a naive one in the server's zone,
    a guess about evidence that decides whether a call was the run's work."""

    def to_internal_value(self, value: Any) -> datetime:
        if isinstance(value, str):
            parsed = parse_datetime(value)
            if parsed is not None and timezone.is_naive(parsed):
                raise serializers.ValidationError("must carry a time zone (e.g. 2026-11-29T10:00:00Z)")
        return super().to_internal_value(value)


class OutcomeSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
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

    def to_internal_value(self, data: Any) -> Any:
        # BooleanField would read "yes" or 1 as true; an outcome must say true or false.
        if isinstance(data, dict) and "ok" in data and not isinstance(data["ok"], bool):
            raise serializers.ValidationError({"ok": ["must be true or false"]})
        return super().to_internal_value(data)

    @staticmethod
    def plainly_valid(data: Any) -> dict[str, Any] | None:
        """As IntentCreateSerializer.plainly_valid, for an outcome."""
        if type(data) is not dict:
            return None
        ok, summary, receipt = data.get("ok"), data.get("summary", ""), data.get("receipt", {})
        error_class, request_id = data.get("error_class", ""), data.get("request_id", "")
        if type(ok) is not bool or type(receipt) is not dict:
            return None
        if not _plain_text(summary) or not _plain_text(request_id, max_length=200, trimmed=True):
            return None
        if type(error_class) is not str or (error_class and error_class not in ErrorClass.values):
            return None
        if data.get("evidence_at") is not None:  # a time to parse: the serializer's
            return None
        return {
            "ok": ok,
            "summary": summary,
            "receipt": dict(receipt),
            "error_class": error_class,
            "request_id": request_id,
            "evidence_at": None,
        }


def _plain_text(value: Any, *, max_length: int | None = None, trimmed: bool = False) -> bool:
    """A str that DRF's CharField keeps as it is: within max_length, no NUL, no lone surrogate
    (which UTF-8 cannot encode), and, where the field trims, no surrounding whitespace."""
    if type(value) is not str or "\x00" in value:
        return False
    if max_length is not None and len(value) > max_length:
        return False
    if trimmed and value != value.strip():
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _plain_count(value: Any) -> bool:
    """An int (not a bool) that fits the PostgreSQL integer columns, from 0."""
    return type(value) is int and 0 <= value <= MAX_DB_INT


def _validated(
    serializer_class: type[IntentCreateSerializer] | type[OutcomeSerializer], data: Any
) -> dict[str, Any]:
    """The body's validated data: plainly valid bodies without the serializer's machinery, all
    others through it (a 400 naming each field it refuses)."""
    plain = serializer_class.plainly_valid(data)
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
        # The same values as the generic rendering (tests/handover/test_api_journal.py compares
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

    class Meta:
        model = Run
        fields = [
            "id",
            "external_id",
            "task_type",
            "ticket_id",
            "order_id",
            "status",
            "deadline",
            "versions",
            "plan",
            "last_heartbeat_at",
            "created_at",
            "updated_at",
            "version",
            "outcome_reason",
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


class RunDetailSerializer(RunSerializer):
    intents = IntentSerializer(many=True, read_only=True)
    customer_messages = CustomerMessageSerializer(many=True, read_only=True)

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "intents", "customer_messages"]


# --- views ------------------------------------------------------------------------------------


class RunListCreateApi(APIView):
    permission_classes = [IsAgentForWrites]
    parser_classes = PARSERS

    @extend_schema(
        parameters=[
            OpenApiParameter("ticket_id", str),
            OpenApiParameter("order_id", str),
            OpenApiParameter("status", str, enum=RunStatus.values),
            OpenApiParameter("page", int),
        ],
        responses=RunSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        run_status = request.query_params.get("status", "")
        if run_status and run_status not in RunStatus.values:
            return Response(
                {"status": [f"must be one of {', '.join(RunStatus.values)}"]},
                status=status.HTTP_400_BAD_REQUEST,
            )
        for name in ("ticket_id", "order_id"):
            # PostgreSQL text cannot hold NUL; filtering on one is a DataError (500), not "no runs".
            if "\x00" in request.query_params.get(name, ""):
                return Response(
                    {name: ["Null characters are not allowed."]}, status=status.HTTP_400_BAD_REQUEST
                )
        runs = selectors.runs_for_tenant(
            tenant=_tenant(request),
            ticket_id=request.query_params.get("ticket_id", ""),
            order_id=request.query_params.get("order_id", ""),
            status=run_status,
        )
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(runs, request, view=self)
        return paginator.get_paginated_response(RunSerializer(page, many=True).data)

    @extend_schema(
        request=RunCreateSerializer, responses={201: RunDetailSerializer, 200: RunDetailSerializer}
    )
    def post(self, request: Request) -> Response:
        data = RunCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        result = services.run_create(
            tenant=_tenant(request),
            task_type=v["task_type"],
            versions=dict(v["versions"]),
            plan=[dict(step) for step in v["plan"]],
            ticket_id=v["ticket_id"],
            order_id=v["order_id"],
            deadline=v["deadline"],
            external_id=v["external_id"],
            actor=_actor(request),
        )
        return Response(
            RunDetailSerializer(result.run).data,
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )


class RunDetailApi(APIView):
    @extend_schema(responses=RunDetailSerializer)
    def get(self, request: Request, run_id: str) -> Response:
        run = selectors.run_get_with_journal(tenant=_tenant(request), run_id=run_id)
        if run is None:
            raise DRFNotFound(f"Run {run_id} not found.")
        return Response(RunDetailSerializer(run).data)


class HandoverApi(APIView):
    """The handover object of a run (handover.handover), exactly as the run page shows it: each
    list cut to its first HANDOVER_LIST_LIMIT items unless `?all=1` (`totals` says how many)."""

    @extend_schema(
        parameters=[OpenApiParameter("all", str, enum=["1"], description="every item of every list")],
        responses={200: HandoverSerializer},
    )
    def get(self, request: Request, run_id: str) -> Response:
        cut = RunPageForm(request.query_params)
        if not cut.is_valid():
            return Response(cut.errors, status=status.HTTP_400_BAD_REQUEST)
        run = selectors.run_get(tenant=_tenant(request), run_id=run_id)
        if run is None:
            raise DRFNotFound(f"Run {run_id} not found.")
        limit = None if cut.cleaned_data["all"] == "1" else HANDOVER_LIST_LIMIT
        return Response(HandoverSerializer(handover_for(run, limit)).data)


# --- the agent lane ---------------------------------------------------------------------------
# An agent's two calls per tool call, when plain (JSON as declared, a live token, the run and
# step found, the journal accepting), are answered by the views' `lean` handlers without DRF's
# request machinery (handover/agent_lane.py). Anything else returns None and the view itself
# answers, so every refusal keeps its status and message.


def _lean_body(request: HttpRequest) -> Any:
    """The JSON body of a plain call, or None. JSON in UTF-8, answered in JSON: DRF's parser
    and content negotiation decide every other body, charset or Accept header."""
    params = request.content_params or {}
    if request.content_type != "application/json" or set(params) - {"charset"}:
        return None
    if params.get("charset", "utf-8").lower() not in ("utf-8", "utf8"):
        return None
    if request.META.get("HTTP_ACCEPT", "*/*") not in ("*/*", "application/json"):
        return None
    try:
        # DRF's parser refuses NaN and Infinity (STRICT_JSON), so this lane does not take them.
        return json.loads(request.body.decode(), parse_constant=_refuse_constant)
    except (ValueError, RecursionError, RequestDataTooBig):
        return None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _lean_secret(request: HttpRequest) -> str | None:
    return bearer_secret(request.META.get("HTTP_AUTHORIZATION", "")) or None


def _record_intent(run: Run, v: dict[str, Any], actor: services.Actor) -> tuple[dict[str, Any], int]:
    """Records a validated intent body: the intent's rendering and 201, or 200 for a replay."""
    result = services.intent_record(
        run=run, tool=v["tool"], args=v["args"], turn=v["turn"], occurrence=v["occurrence"], actor=actor
    )
    answer = _intent_answer(result.intent)
    return answer, status.HTTP_201_CREATED if result.created else status.HTTP_200_OK


_OUTCOME_FIELDS = ("ok", "summary", "receipt", "error_class", "request_id", "evidence_at")


def _outcome_of(v: dict[str, Any]) -> dict[str, Any]:
    """A validated outcome body as the journal's outcome services take it."""
    return {name: v[name] for name in _OUTCOME_FIELDS}


def _record_outcome(intent: Intent, v: dict[str, Any], actor: services.Actor) -> dict[str, Any]:
    return _intent_answer(services.outcome_record(intent=intent, actor=actor, **_outcome_of(v)).intent)


# One of each, shared: IntentSerializer renders with to_representation alone (no per-instance
# field copies to make), and neither keeps state between calls.
_INTENT_RENDERING = IntentSerializer()
_JSON = JSONRenderer()


def _intent_answer(intent: Intent) -> dict[str, Any]:
    """The intent as the journal's write calls answer it: IntentSerializer(intent).data."""
    return _INTENT_RENDERING.to_representation(intent)


_ALLOW: dict[type[APIView], str] = {}


def _allowed_methods(view_class: type[APIView]) -> str:
    """The view's Allow header, made once per view class."""
    allow = _ALLOW.get(view_class)
    if allow is None:
        allow = _ALLOW[view_class] = ", ".join(view_class().allowed_methods)
    return allow


def _lean_response(view_class: type[APIView], data: dict[str, Any], status_code: int) -> HttpResponse:
    """The answer DRF's view would give: its JSON rendering and its Allow header."""
    response = HttpResponse(_JSON.render(data), status=status_code, content_type="application/json")
    response["Allow"] = _allowed_methods(view_class)
    return response


class IntentCreateApi(APIView):
    permission_classes = [IsAgentForWrites]
    parser_classes = PARSERS

    @classmethod
    def lean(cls, request: HttpRequest, run_id: str) -> HttpResponse | None:
        v = IntentCreateSerializer.plainly_valid(_lean_body(request))
        secret = _lean_secret(request) if v is not None else None
        if v is None or secret is None:
            return None
        caller = caller_remembered(secret, run_id)
        try:
            if caller is not None:
                # One statement asserts the caller as it writes; None: it wrote nothing.
                intent = services.intent_record_as_caller(
                    caller=caller, tool=v["tool"], args=v["args"], turn=v["turn"], occurrence=v["occurrence"]
                )
                if intent is not None:
                    return _lean_response(cls, _intent_answer(intent), status.HTTP_201_CREATED)
                caller_forget(caller)
            principal = agent_principal(secret, run_id=run_id)
            run = principal.run_named(run_id)[1] if principal is not None else None
            if principal is None or run is None:
                return None
            answer, status_code = _record_intent(run, v, services.Actor.agent(principal.get_username()))
        except services.JournalError:
            return None  # nothing was written; the view asks again and answers with the reason
        caller_remember(principal, run)
        return _lean_response(cls, answer, status_code)

    @extend_schema(request=IntentCreateSerializer, responses={201: IntentSerializer, 200: IntentSerializer})
    def post(self, request: Request, run_id: str) -> Response:
        run = _run(request, run_id)
        answer, status_code = _record_intent(
            run, _validated(IntentCreateSerializer, request.data), _actor(request)
        )
        return Response(answer, status=status_code)


class OutcomeApi(APIView):
    permission_classes = [IsAgentForWrites]
    parser_classes = PARSERS

    @classmethod
    def lean(cls, request: HttpRequest, run_id: str, step_id: str) -> HttpResponse | None:
        v = OutcomeSerializer.plainly_valid(_lean_body(request))
        secret = _lean_secret(request) if v is not None else None
        if v is None or secret is None:
            return None
        caller = caller_remembered(secret, run_id)
        try:
            if caller is not None and "\x00" not in step_id:  # no stored step id holds a NUL
                settled = services.outcome_record_as_caller(caller=caller, step_id=step_id, **_outcome_of(v))
                if settled is not None:
                    return _lean_response(cls, _intent_answer(settled), status.HTTP_200_OK)
                caller_forget(caller)
            principal = agent_principal(secret, run_id=run_id, step_id=step_id)
            intent = principal.intent_named(run_id, step_id)[1] if principal is not None else None
            if principal is None or intent is None:
                return None
            answer = _record_outcome(intent, v, services.Actor.agent(principal.get_username()))
        except services.JournalError:
            return None
        caller_remember(principal, intent.run)
        return _lean_response(cls, answer, status.HTTP_200_OK)

    @extend_schema(request=OutcomeSerializer, responses={200: IntentSerializer})
    def post(self, request: Request, run_id: str, step_id: str) -> Response:
        run = _run(request, run_id)
        v = _validated(OutcomeSerializer, request.data)
        read, intent = (
            request.user.intent_named(run_id, step_id)
            if isinstance(request.user, AgentPrincipal)
            else (False, None)
        )
        # No stored step id holds a NUL (PostgreSQL text cannot); looking one up would be a 500.
        if not read and "\x00" not in step_id:
            intent = selectors.intent_get(run=run, step_id=step_id)
        if intent is None:
            raise DRFNotFound(f"No intent {step_id} on run {run.pk}: record the intent before its outcome.")
        return Response(_record_outcome(intent, v, _actor(request)), status=status.HTTP_200_OK)


class CustomerMessageCreateApi(APIView):
    permission_classes = [IsAgentForWrites]
    parser_classes = PARSERS

    @extend_schema(request=CustomerMessageCreateSerializer, responses={201: CustomerMessageSerializer})
    def post(self, request: Request, run_id: str) -> Response:
        run = _run(request, run_id)
        data = CustomerMessageCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        message = services.customer_message_record(
            run=run,
            channel=v["channel"],
            body=v["body"],
            told_at=v["told_at"],
            about_steps=v["about_steps"],
            actor=_actor(request),
        )
        return Response(CustomerMessageSerializer(message).data, status=status.HTTP_201_CREATED)


class HeartbeatApi(APIView):
    permission_classes = [IsAgentForWrites]

    @extend_schema(request=None, responses={200: RunSerializer})
    def post(self, request: Request, run_id: str) -> Response:
        run = _run(request, run_id)
        services.run_heartbeat(run=run)
        return Response(RunSerializer(run).data)


class CompleteApi(APIView):
    permission_classes = [IsAgentForWrites]

    @extend_schema(request=None, responses={200: RunSerializer})
    def post(self, request: Request, run_id: str) -> Response:
        run = services.run_complete(run=_run(request, run_id), actor=_actor(request))
        return Response(RunSerializer(run).data)


class CancelSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=services.MAX_SUMMARY_CHARS)


class CancelledSerializer(serializers.Serializer):
    run = RunSerializer()
    completed = IntentSerializer(many=True)
    uncertain = IntentSerializer(many=True)
    cleanup_scheduled = serializers.ListField(child=serializers.CharField())


class CancelApi(APIView):
    permission_classes = [IsAgentForWrites]
    parser_classes = PARSERS

    @extend_schema(request=CancelSerializer, responses={200: CancelledSerializer})
    def post(self, request: Request, run_id: str) -> Response:
        run = _run(request, run_id)
        data = CancelSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cancelled = services.run_cancel(run=run, reason=data.validated_data["reason"], actor=_actor(request))
        return Response(CancelledSerializer(cancelled).data)


class CountSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=sorted(services.COUNTERS))


class CountApi(APIView):
    permission_classes = [IsAgentForWrites]
    parser_classes = PARSERS

    @extend_schema(request=CountSerializer, responses={200: RunSerializer})
    def post(self, request: Request, run_id: str) -> Response:
        run = _run(request, run_id)
        data = CountSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        counted = services.run_count(run=run, kind=data.validated_data["kind"], actor=_actor(request))
        return Response(RunSerializer(counted).data)
