"""The journal's REST API (v1) for agent runtimes in other processes. Views parse and check
types (agent_api.serializers), call one service, and render; every rule lives in the journal's
services. An agent's plain intent and outcome calls are answered by the views' `lean` handlers
(agent_api.lane), with the same declarations and services."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import APIException, PermissionDenied
from rest_framework.exceptions import NotFound as DRFNotFound
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import BasePermission
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder as DRFJSONEncoder
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from console.forms import RunPageForm
from handover import HANDOVER_LIST_LIMIT, handover_for
from journal import selectors, services
from journal.attempts import AttemptRefused
from journal.models import Intent, Run, RunStatus, Tenant

from . import pages
from .authentication import (
    AgentPrincipal,
    agent_principal,
    bearer_secret,
    caller_forget,
    caller_remember,
    caller_remembered,
)
from .handover_schema import HandoverSerializer
from .serializers import (
    PARSERS,
    CancelledSerializer,
    CancelSerializer,
    CountSerializer,
    CustomerMessageCreateSerializer,
    CustomerMessagePageSerializer,
    CustomerMessageSerializer,
    IntentCreateSerializer,
    IntentPageSerializer,
    IntentSerializer,
    OutcomeSerializer,
    RunCreateSerializer,
    RunDetailSerializer,
    RunSerializer,
    page_answer,
    plainly_valid,
    render_row,
    validated,
)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Journal refusals become 4xx answers naming the offending field: {"<field>": ["why"]}; a
    body over the upload limit is a 413 naming the limit (Django would answer a 400 page)."""
    if isinstance(exc, services.JournalError):
        body: dict[str, Any] = {exc.field: [exc.message]} if exc.field else {"detail": exc.message}
        if isinstance(exc, services.RunDiffers):
            body["differences"] = exc.differences
        if isinstance(exc, AttemptRefused):
            # A typed code the agent's runtime acts on (journal.attempts.AttemptCode), and for a
            # retry that came too soon, when to come back.
            body["code"] = str(exc.code)
            if exc.retry_after is not None:
                body["retry_after"] = exc.retry_after
                headers = {"Retry-After": str(max(1, round(exc.retry_after)))}
                return Response(body, status=exc.status_code, headers=headers)
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
    # An agent's run was read with its token (agent_api.authentication), scoped to its tenant.
    read, run = request.user.run_named(run_id) if isinstance(request.user, AgentPrincipal) else (False, None)
    if not read:
        run = selectors.run_get(tenant=_tenant(request), run_id=run_id)
    if run is None:
        raise DRFNotFound(f"Run {run_id} not found.")
    return run


class RunArchived(APIException):
    """A run's intents and events were archived (retention): they are no longer the journal's to
    list, export or build a handover from. Its summary and archive are at GET /runs/{id}/."""

    status_code = status.HTTP_410_GONE
    default_code = "archived"


def _unless_archived(run: Run, listing: pages.Listing | None = None) -> None:
    if run.archived_at is not None and listing is not pages.CUSTOMER_MESSAGES:
        raise RunArchived(
            f"Run {run.pk} was archived at {run.archived_at.isoformat()}: its intents and events are "
            f"in its archive, named at /api/v1/runs/{run.pk}/."
        )


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
        v = validated(RunCreateSerializer, request.data)
        result = services.run_create(
            tenant=_tenant(request),
            task_type=v["task_type"],
            versions=dict(v["versions"]),
            plan=[dict(step) for step in v["plan"]],
            ticket_id=v["ticket_id"],
            order_id=v["order_id"],
            customer_ref=v["customer_ref"],
            deadline=v["deadline"],
            external_id=v["external_id"],
            actor=_actor(request),
        )
        return Response(
            RunDetailSerializer(result.run).data,
            status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK,
        )


class RunDetailApi(APIView):
    """The run with the first page of its intents and of its customer messages, each with the
    cursor of its next page (`intents_next`, `customer_messages_next`)."""

    @extend_schema(responses=RunDetailSerializer)
    def get(self, request: Request, run_id: str) -> Response:
        return Response(RunDetailSerializer(_run(request, run_id)).data)


_PAGE_PARAMETERS = [
    OpenApiParameter("cursor", str, description="`next` of the page before (none: the first page)"),
    OpenApiParameter(
        "limit", int, description=f"rows per page, 1 to {pages.MAX_LIMIT} (default {pages.DEFAULT_LIMIT})"
    ),
]


def _page_response(request: Request, run_id: str, listing: pages.Listing) -> Response:
    """One page of a run's list after the query's cursor: 400 naming a bad cursor or limit."""
    run = _run(request, run_id)
    _unless_archived(run, listing)
    try:
        limit = pages.limit_of(request.query_params.get("limit"))
        page = pages.page(listing, run, cursor=request.query_params.get("cursor"), limit=limit)
    except pages.PageRefused as refused:
        return Response({refused.field: [refused.message]}, status=status.HTTP_400_BAD_REQUEST)
    return Response(page_answer(listing, page))


class JSONLinesRenderer(BaseRenderer):
    """JSON lines (one JSON value a line), the export's format; an error is one line too."""

    media_type = "application/x-ndjson"
    format = "jsonl"
    charset = None

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return json_line(data)


def json_line(value: Any) -> bytes:
    return json.dumps(value, cls=DRFJSONEncoder, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def export_lines(run: Run) -> Iterator[bytes]:
    """The run's export: {"run": ...}, then {"intent": ...} for each intent and
    {"customer_message": ...} for each message, in the lists' order. Rows are read when the
    response is streamed, through server-side cursors, so memory does not grow with the run."""
    yield json_line({"run": RunSerializer(run).data})
    for listing, key in ((pages.INTENTS, "intent"), (pages.CUSTOMER_MESSAGES, "customer_message")):
        for row in pages.every_row(listing, run):
            yield json_line({key: render_row(listing, row)})


class RunExportApi(APIView):
    """Everything the run holds, streamed as JSON lines (application/x-ndjson)."""

    renderer_classes = [JSONRenderer, JSONLinesRenderer]

    @extend_schema(responses={(200, "application/x-ndjson"): OpenApiTypes.STR})
    def get(self, request: Request, run_id: str) -> StreamingHttpResponse:
        run = _run(request, run_id)
        _unless_archived(run)
        response = StreamingHttpResponse(export_lines(run), content_type="application/x-ndjson")
        response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.jsonl"'
        return response


class HandoverApi(APIView):
    """The handover object of a run (handover), exactly as the run page shows it: each
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
        _unless_archived(run)
        limit = None if cut.cleaned_data["all"] == "1" else HANDOVER_LIST_LIMIT
        return Response(HandoverSerializer(handover_for(run, limit)).data)


# --- the agent lane ---------------------------------------------------------------------------
# An agent's two calls per tool call, when plain (JSON as declared, a live token, the run and
# step found, the journal accepting), are answered by the views' `lean` handlers without DRF's
# request machinery (agent_api/lane.py). Anything else returns None and the view itself
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
        view = view_class()
        if hasattr(view, "get") and not hasattr(view, "head"):
            # As View.setup() does for every request: a view that answers GET answers HEAD.
            view.head = view.get  # type: ignore[attr-defined]
        allow = _ALLOW[view_class] = ", ".join(view.allowed_methods)
    return allow


def _lean_response(view_class: type[APIView], data: dict[str, Any], status_code: int) -> HttpResponse:
    """The answer DRF's view would give: its JSON rendering and its Allow header."""
    response = HttpResponse(_JSON.render(data), status=status_code, content_type="application/json")
    response["Allow"] = _allowed_methods(view_class)
    return response


def _lean_refusal(view_class: type[APIView], refused: AttemptRefused) -> HttpResponse:
    """The answer exception_handler gives the view's AttemptRefused: its body and Retry-After."""
    answer = exception_handler(refused, {})
    assert answer is not None
    response = _lean_response(view_class, answer.data, answer.status_code)
    if answer.has_header("Retry-After"):
        response["Retry-After"] = answer["Retry-After"]
    return response


class IntentCreateApi(APIView):
    permission_classes = [IsAgentForWrites]
    parser_classes = PARSERS

    @classmethod
    def lean(cls, request: HttpRequest, run_id: str) -> HttpResponse | None:
        v = plainly_valid(IntentCreateSerializer, _lean_body(request))
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
        except AttemptRefused as refused:
            # Its refusal is recorded (an event counted toward a loop): answered here as the view
            # would answer it, since asking again would record, and count, it twice.
            return _lean_refusal(cls, refused)
        except services.JournalError:
            return None  # nothing was written; the view asks again and answers with the reason
        caller_remember(principal, run)
        return _lean_response(cls, answer, status_code)

    @extend_schema(parameters=_PAGE_PARAMETERS, responses=IntentPageSerializer)
    def get(self, request: Request, run_id: str) -> Response:
        """A page of the run's intents, oldest first (after `cursor`, at most `limit`)."""
        return _page_response(request, run_id, pages.INTENTS)

    @extend_schema(request=IntentCreateSerializer, responses={201: IntentSerializer, 200: IntentSerializer})
    def post(self, request: Request, run_id: str) -> Response:
        run = _run(request, run_id)
        answer, status_code = _record_intent(
            run, validated(IntentCreateSerializer, request.data), _actor(request)
        )
        return Response(answer, status=status_code)


class OutcomeApi(APIView):
    permission_classes = [IsAgentForWrites]
    parser_classes = PARSERS

    @classmethod
    def lean(cls, request: HttpRequest, run_id: str, step_id: str) -> HttpResponse | None:
        v = plainly_valid(OutcomeSerializer, _lean_body(request))
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
        v = validated(OutcomeSerializer, request.data)
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

    @extend_schema(parameters=_PAGE_PARAMETERS, responses=CustomerMessagePageSerializer)
    def get(self, request: Request, run_id: str) -> Response:
        """A page of the run's customer messages, by the time each was told."""
        return _page_response(request, run_id, pages.CUSTOMER_MESSAGES)

    @extend_schema(request=CustomerMessageCreateSerializer, responses={201: CustomerMessageSerializer})
    def post(self, request: Request, run_id: str) -> Response:
        run = _run(request, run_id)
        v = validated(CustomerMessageCreateSerializer, request.data)
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


class CancelApi(APIView):
    permission_classes = [IsAgentForWrites]
    parser_classes = PARSERS

    @extend_schema(request=CancelSerializer, responses={200: CancelledSerializer})
    def post(self, request: Request, run_id: str) -> Response:
        run = _run(request, run_id)
        reason = validated(CancelSerializer, request.data)["reason"]
        cancelled = services.run_cancel(run=run, reason=reason, actor=_actor(request))
        return Response(CancelledSerializer(cancelled).data)


class CountApi(APIView):
    permission_classes = [IsAgentForWrites]
    parser_classes = PARSERS

    @extend_schema(request=CountSerializer, responses={200: RunSerializer})
    def post(self, request: Request, run_id: str) -> Response:
        run = _run(request, run_id)
        kind = validated(CountSerializer, request.data)["kind"]
        counted = services.run_count(run=run, kind=kind, actor=_actor(request))
        return Response(RunSerializer(counted).data)
