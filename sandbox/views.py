"""The sandbox's HTTP API (docs/sandbox.md) and its one page.

These are a fake external provider, not part of Seam's UI: plain JSON views, no sessions, no
authentication, no CSRF. Each view parses its body, calls one service and answers JSON. The
`provider_endpoint` decorator owns what is transport rather than business: the method check,
faults (per-call header or stored rule), the JSON error body, and the request id."""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt

from . import endpoint_calls, parsing, seeded_world, selectors, services
from .errors import Conflict, DropConnection, InvalidRequest, SandboxError, Unavailable, UnknownObject
from .faults import DROP_AFTER, FAIL_BEFORE, KEY_CONFLICT, LOOKUP_OPERATION, SLOW, UNKNOWN_LOOKUP, Fault
from .ledger import Outcome
from .models import FaultRule, Provider

FAULT_HEADER = "X-Sandbox-Fault"
KEY_HEADER = "Idempotency-Key"

View = Callable[..., HttpResponse]


# --- transport --------------------------------------------------------------------------------


def _error(exc: SandboxError) -> JsonResponse:
    return JsonResponse(exc.as_json(), status=exc.status_code)


def _method_not_allowed(allowed: tuple[str, ...]) -> JsonResponse:
    response = JsonResponse(
        {"error": {"code": "method_not_allowed", "message": f"use {' or '.join(allowed)}", "field": None}},
        status=405,
    )
    response["Allow"] = ", ".join(allowed)
    return response


def _with_request_id(response: HttpResponse) -> HttpResponse:
    response["X-Request-Id"] = "sbx_" + secrets.token_hex(8)
    return response


def _fault_for(request: HttpRequest, *, provider: str, operation: str) -> Fault | None:
    """The header's fault if the call carries one (it overrides stored rules and uses none of
    them), else one use of the oldest matching stored rule."""
    header = request.headers.get(FAULT_HEADER, "").strip()
    if not header:
        return endpoint_calls.fault_claim(provider=provider, operation=operation)
    fault = Fault.parse(header, field=FAULT_HEADER)
    if not fault.applies_to(operation):
        raise InvalidRequest("invalid_fault", "unknown_lookup applies only to lookups", field=FAULT_HEADER)
    return fault


def _refusal(provider: str, fault: Fault | None) -> SandboxError | None:
    """The error a fault answers with before the view runs, if it is one that does."""
    if fault is not None and fault.kind == FAIL_BEFORE:
        return Unavailable("unavailable", f"{provider} is unavailable; nothing was done")
    if fault is not None and fault.kind == KEY_CONFLICT:
        return Conflict(
            "idempotency_key_in_use",
            f"{provider} holds this idempotency key for another request",
            field="Idempotency-Key",
        )
    return None


def provider_endpoint(provider: str, operation: str, *, method: str = "POST") -> Callable[[View], View]:
    """A provider operation that faults can reach. `fail_before` answers 503 before the view
    runs, `key_conflict` answers 409 before it; `unknown_lookup` answers a lookup without
    consulting the ledger; `slow` and
    `drop_after` let the view act (and commit) first, then delay the answer or withhold it."""

    def decorate(view: View) -> View:
        @csrf_exempt
        @functools.wraps(view)
        def endpoint(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method != method:
                return _with_request_id(_method_not_allowed((method,)))
            started = time.monotonic()
            target = "/".join(str(value) for value in kwargs.values())

            def log(status: int | None, fault: Fault | None) -> None:
                endpoint_calls.call_record(
                    provider=provider,
                    operation=operation,
                    target=target,
                    method=method,
                    status=status,
                    fault=str(fault) if fault is not None else "",
                    duration_ms=round((time.monotonic() - started) * 1000),
                )

            try:
                fault = _fault_for(request, provider=provider, operation=operation)
            except SandboxError as exc:
                log(exc.status_code, None)
                return _with_request_id(_error(exc))
            refused = _refusal(provider, fault)
            if refused is not None:
                log(refused.status_code, fault)
                return _with_request_id(_error(refused))
            if fault is not None and fault.kind == UNKNOWN_LOOKUP:
                response: HttpResponse = JsonResponse(
                    {
                        "status": "unknown",
                        "reason": f"{provider} cannot say right now: the lookup could not tell",
                    }
                )
            else:
                try:
                    response = view(request, *args, **kwargs)
                except SandboxError as exc:
                    response = _error(exc)
            if fault is not None and fault.kind == SLOW:
                time.sleep(fault.ms / 1000)
            if fault is not None and fault.kind == DROP_AFTER:
                log(None, fault)
                # Whatever happened is committed; now the answer is lost (sandbox.server hangs up).
                raise DropConnection(f"{request.method} {request.path} (fault drop_after)")
            log(response.status_code, fault)
            return _with_request_id(response)

        return endpoint

    return decorate


def control_endpoint(*methods: str) -> Callable[[View], View]:
    """A test-and-demo control: no faults, same error bodies."""

    def decorate(view: View) -> View:
        @csrf_exempt
        @functools.wraps(view)
        def endpoint(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in methods:
                return _with_request_id(_method_not_allowed(methods))
            try:
                return _with_request_id(view(request, *args, **kwargs))
            except SandboxError as exc:
                return _with_request_id(_error(exc))

        return endpoint

    return decorate


def _key(request: HttpRequest) -> str:
    return request.headers.get(KEY_HEADER, "")


def _receipt(outcome: Outcome) -> JsonResponse:
    """201 with the receipt when the effect was performed now; 200 with the original receipt and
    `Idempotent-Replayed: true` when an earlier request with this key performed it."""
    response = JsonResponse(outcome.receipt, status=200 if outcome.replayed else 201)
    if outcome.replayed:
        response["Idempotent-Replayed"] = "true"
    return response


# --- returns ----------------------------------------------------------------------------------


@provider_endpoint(Provider.RETURNS, "start_return")
def start_return(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"order_id"})
    return _receipt(
        services.return_start(order_id=parsing.text(body, "order_id"), idempotency_key=_key(request))
    )


@provider_endpoint(Provider.RETURNS, "cancel_pickup")
def cancel_pickup(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"label"})
    return _receipt(services.pickup_cancel(label=parsing.text(body, "label"), idempotency_key=_key(request)))


@control_endpoint("POST")
def collect(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"label"})
    ret = services.parcel_collect(label=parsing.text(body, "label"))
    assert ret.collected_at is not None
    return JsonResponse(
        {"label": ret.label, "status": "collected", "collected_at": ret.collected_at.isoformat()}
    )


# --- warehouse --------------------------------------------------------------------------------


@provider_endpoint(Provider.WAREHOUSE, "reserve")
def reserve(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"order_id", "sku", "qty"})
    outcome = services.reservation_create(
        order_id=parsing.text(body, "order_id"),
        sku=parsing.text(body, "sku", max_length=40),
        qty=parsing.integer(body, "qty", minimum=1, maximum=1000),
        idempotency_key=_key(request),
    )
    return _receipt(outcome)


@provider_endpoint(Provider.WAREHOUSE, "release")
def release(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"reservation_id"})
    outcome = services.reservation_release(
        reservation_id=parsing.text(body, "reservation_id"), idempotency_key=_key(request)
    )
    return _receipt(outcome)


@provider_endpoint(Provider.WAREHOUSE, "stock", method="GET")
def warehouse_stock(request: HttpRequest, code: str) -> HttpResponse:
    sku = parsing.text(dict(request.GET.items()), "sku", max_length=40)
    level = seeded_world.warehouse_stock_read(code=code, sku=sku)
    return JsonResponse(
        {
            "warehouse": level.warehouse,
            "sku": level.sku,
            "available": level.available,
            "restock_date": level.restock_date.isoformat() if level.restock_date else None,
        }
    )


@control_endpoint("POST")
def warehouse_configure(request: HttpRequest, code: str) -> HttpResponse:
    body = parsing.json_body(request, allowed={"latency_ms", "fail_every", "stock"})
    warehouse = seeded_world.warehouse_configure(
        code=code,
        latency_ms=parsing.optional_integer(body, "latency_ms", minimum=0, maximum=60_000),
        fail_every=parsing.optional_integer(body, "fail_every", minimum=0, maximum=1_000_000),
        stock=parsing.stock_levels(body, "stock"),
    )
    return JsonResponse(
        {"warehouse": warehouse.code, "latency_ms": warehouse.latency_ms, "fail_every": warehouse.fail_every}
    )


# --- payments ---------------------------------------------------------------------------------


@provider_endpoint(Provider.PAYMENTS, "refund")
def refund(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"order_id", "amount", "currency"})
    outcome = services.refund_create(
        order_id=parsing.text(body, "order_id"),
        amount=parsing.money(body, "amount"),
        currency=parsing.currency(body, "currency"),
        idempotency_key=_key(request),
    )
    return _receipt(outcome)


@provider_endpoint(Provider.PAYMENTS, "reverse")
def reverse_refund(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"refund_id"})
    return _receipt(
        services.refund_reverse(refund_id=parsing.text(body, "refund_id"), idempotency_key=_key(request))
    )


# --- accounting -------------------------------------------------------------------------------


@provider_endpoint(Provider.ACCOUNTING, "credit")
def credit(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"order_id", "amount"})
    outcome = services.credit_memo_create(
        order_id=parsing.text(body, "order_id"),
        amount=parsing.money(body, "amount"),
        idempotency_key=_key(request),
    )
    return _receipt(outcome)


@provider_endpoint(Provider.ACCOUNTING, "reverse_credit")
def reverse_credit(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"credit_memo_id"})
    outcome = services.credit_memo_reverse(
        credit_memo_id=parsing.text(body, "credit_memo_id"), idempotency_key=_key(request)
    )
    return _receipt(outcome)


# --- shipping ---------------------------------------------------------------------------------


@provider_endpoint(Provider.SHIPPING, "reship")
def reship(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"order_id", "sku", "qty"})
    outcome = services.shipment_create(
        order_id=parsing.text(body, "order_id"),
        sku=parsing.text(body, "sku", max_length=40),
        qty=parsing.integer(body, "qty", minimum=1, maximum=1000),
        idempotency_key=_key(request),
    )
    return _receipt(outcome)


@provider_endpoint(Provider.SHIPPING, "cancel")
def cancel_shipment(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"shipment_id"})
    return _receipt(
        services.shipment_cancel(shipment_id=parsing.text(body, "shipment_id"), idempotency_key=_key(request))
    )


@control_endpoint("POST")
def advance(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"shipment_id"})
    shipment = services.shipment_advance(shipment_id=parsing.text(body, "shipment_id"))
    return JsonResponse(
        {"shipment_id": shipment.shipment_id, "recall_cutoff": shipment.recall_cutoff.isoformat()}
    )


# --- email ------------------------------------------------------------------------------------


def _notify(request: HttpRequest, recipient: str) -> HttpResponse:
    body = parsing.json_body(request, allowed={"order_id", "template"})
    outcome = services.email_send(
        recipient=recipient,
        order_id=parsing.text(body, "order_id"),
        template=parsing.text(body, "template"),
        idempotency_key=_key(request),
    )
    return _receipt(outcome)


@provider_endpoint(Provider.EMAIL, "notify_seller")
def notify_seller(request: HttpRequest) -> HttpResponse:
    return _notify(request, "seller")


@provider_endpoint(Provider.EMAIL, "notify_customer")
def notify_customer(request: HttpRequest) -> HttpResponse:
    return _notify(request, "customer")


# --- the legacy ERP ---------------------------------------------------------------------------


@provider_endpoint(Provider.ERP, "adjust_stock")
def adjust_stock(request: HttpRequest) -> HttpResponse:
    body = parsing.json_body(request, allowed={"sku", "qty", "reference"})
    outcome = services.stock_adjust(
        sku=parsing.text(body, "sku", max_length=40),
        qty=parsing.integer(body, "qty", minimum=-1000, maximum=1000, nonzero=True),
        reference=parsing.text(body, "reference"),
    )
    return _receipt(outcome)


@provider_endpoint(Provider.ERP, "adjustments", method="GET")
def adjustments(request: HttpRequest) -> HttpResponse:
    reference = parsing.text(dict(request.GET.items()), "reference")
    return JsonResponse({"adjustments": selectors.erp_adjustments(reference=reference)})


# --- orders -----------------------------------------------------------------------------------


@provider_endpoint(Provider.ORDERS, "status", method="GET")
def order_status(request: HttpRequest, order_id: str) -> HttpResponse:
    order = seeded_world.order_status_read(order_id=order_id)
    return JsonResponse(
        {
            "order_id": order.order_id,
            "status": order.status,
            "carrier": order.carrier or None,
            "eta": order.eta.isoformat() if order.eta else None,
        }
    )


@provider_endpoint(Provider.ORDERS, "entitlement", method="GET")
def entitlement(request: HttpRequest, order_id: str) -> HttpResponse:
    terms = seeded_world.entitlement_read(order_id=order_id)
    return JsonResponse(
        {
            "order_id": terms.order_id,
            "remedies": terms.remedies,
            "need_by": terms.need_by.isoformat() if terms.need_by else None,
            "clause": terms.clause,
        }
    )


@control_endpoint("POST")
def entitlement_configure(request: HttpRequest, order_id: str) -> HttpResponse:
    body = parsing.json_body(request, allowed={"remedies", "need_by", "clause"})
    terms = seeded_world.entitlement_configure(
        order_id=order_id,
        remedies=parsing.optional_text_list(body, "remedies"),
        need_by=parsing.optional_date(body, "need_by"),
        clear_need_by="need_by" in body and body["need_by"] is None,
        clause=parsing.optional_text(body, "clause", max_length=200) if "clause" in body else None,
    )
    return JsonResponse(
        {
            "order_id": terms.order_id,
            "remedies": terms.remedies,
            "need_by": terms.need_by.isoformat() if terms.need_by else None,
            "clause": terms.clause,
        }
    )


# --- lookups ----------------------------------------------------------------------------------


def lookup_for(provider: str) -> View:
    """`<provider>/lookup/<key>`: what became of the call made with this key."""

    @provider_endpoint(provider, LOOKUP_OPERATION, method="GET")
    def lookup(request: HttpRequest, key: str) -> HttpResponse:
        effect = selectors.effect_for_key(provider=provider, idempotency_key=key)
        if effect is None:
            return JsonResponse({"status": "not_performed"})
        return JsonResponse(
            {
                "status": "performed",
                "operation": effect.operation,
                "receipt": effect.receipt,
                "performed_at": effect.created_at.isoformat(),
            }
        )

    lookup.__name__ = f"{provider}_lookup"
    return lookup


# --- control: faults and the ledger -----------------------------------------------------------


def _rule_as_json(rule: FaultRule) -> dict[str, Any]:
    return {
        "id": rule.pk,
        "provider": rule.provider,
        "operation": rule.operation,
        "fault": rule.fault,
        "remaining": rule.remaining,
    }


@control_endpoint("GET", "POST", "DELETE")
def faults(request: HttpRequest) -> HttpResponse:
    if request.method == "DELETE":
        return JsonResponse({"deleted": endpoint_calls.fault_rules_clear()})
    if request.method == "GET":
        rules = selectors.fault_rules()
        return JsonResponse({"rules": [_rule_as_json(rule) for rule in rules]})
    body = parsing.json_body(request, allowed={"provider", "operation", "fault", "remaining"})
    rule = endpoint_calls.fault_rule_create(
        provider=parsing.text(body, "provider", max_length=20),
        operation=parsing.optional_text(body, "operation", max_length=40),
        fault=parsing.text(body, "fault", max_length=40),
        remaining=parsing.optional_integer(body, "remaining", minimum=1, maximum=1_000_000) or 1,
    )
    return JsonResponse(_rule_as_json(rule), status=201)


@control_endpoint("GET")
def ledger(request: HttpRequest) -> HttpResponse:
    effects = selectors.ledger(
        provider=request.GET.get("provider", ""),
        operation=request.GET.get("operation", ""),
        business_ref=request.GET.get("business_ref", ""),
    )
    return JsonResponse({"effects": [selectors.effect_as_json(effect) for effect in effects]})


@control_endpoint("GET")
def calls(request: HttpRequest) -> HttpResponse:
    found = selectors.calls(
        provider=request.GET.get("provider", ""),
        operation=request.GET.get("operation", ""),
        target=request.GET.get("target", ""),
    )
    return JsonResponse({"calls": [selectors.call_as_json(call) for call in found]})


@control_endpoint("GET", "POST", "PUT", "PATCH", "DELETE")
def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    raise UnknownObject("unknown_endpoint", f"the sandbox has no endpoint {request.path}")


# --- the page ---------------------------------------------------------------------------------


def world(request: HttpRequest) -> HttpResponse:
    """What the world looks like: every provider's state and the ledger, newest first."""
    return render(request, "sandbox/world.html", {"tables": selectors.world_overview()})
