"""Around each call a provider endpoint answers: the fault rules that may disrupt it (injected by
the control API, claimed one use at a time) and the log row that records the call."""

from __future__ import annotations

from django.db.models import F
from django.utils import timezone

from .errors import InvalidRequest
from .faults import KEY_CONFLICT, LOOKUP_OPERATION, UNKNOWN_LOOKUP, Fault
from .models import Call, FaultRule, Provider

# The operations each provider answers, by the names faults and the ledger use.
OPERATIONS: dict[str, frozenset[str]] = {
    Provider.RETURNS: frozenset({"start_return", "cancel_pickup", LOOKUP_OPERATION}),
    Provider.WAREHOUSE: frozenset({"reserve", "release", "stock", LOOKUP_OPERATION}),
    Provider.PAYMENTS: frozenset({"refund", "reverse", LOOKUP_OPERATION}),
    Provider.ACCOUNTING: frozenset({"credit", "reverse_credit", LOOKUP_OPERATION}),
    Provider.SHIPPING: frozenset({"reship", "cancel", LOOKUP_OPERATION}),
    Provider.EMAIL: frozenset({"notify_seller", "notify_customer", LOOKUP_OPERATION}),
    Provider.ERP: frozenset({"adjust_stock", "adjustments"}),
    Provider.ORDERS: frozenset({"status", "entitlement"}),
}


def call_record(
    *,
    provider: str,
    operation: str,
    target: str,
    method: str,
    status: int | None,
    fault: str,
    duration_ms: int,
) -> Call:
    """Log one call a provider endpoint answered (or hung up on)."""
    return Call.objects.create(
        provider=provider,
        operation=operation,
        target=target[:200],
        method=method,
        status=status,
        fault=fault,
        duration_ms=duration_ms,
        at=timezone.now(),
    )


def _check_operation(provider: str, operation: str) -> None:
    if provider not in OPERATIONS:
        raise InvalidRequest(
            "unknown_provider", f"provider must be one of {', '.join(sorted(OPERATIONS))}", field="provider"
        )
    if operation and operation not in OPERATIONS[provider]:
        raise InvalidRequest(
            "unknown_operation",
            f"{provider} has no operation {operation!r}; it has {', '.join(sorted(OPERATIONS[provider]))}",
            field="operation",
        )


def fault_rule_create(*, provider: str, operation: str, fault: str, remaining: int) -> FaultRule:
    """Inject `fault` into the next `remaining` calls of `provider`/`operation` (every operation
    of the provider when `operation` is blank)."""
    _check_operation(provider, operation)
    parsed = Fault.parse(fault)
    if parsed.kind == UNKNOWN_LOOKUP and operation not in ("", LOOKUP_OPERATION):
        raise InvalidRequest(
            "invalid_fault", "unknown_lookup applies only to the lookup operation", field="fault"
        )
    if parsed.kind == KEY_CONFLICT and operation == LOOKUP_OPERATION:
        raise InvalidRequest(
            "invalid_fault", "key_conflict applies only to calls, not lookups", field="fault"
        )
    if remaining < 1:
        raise InvalidRequest("invalid_remaining", "remaining must be at least 1", field="remaining")
    return FaultRule.objects.create(
        provider=provider, operation=operation, fault=str(parsed), remaining=remaining
    )


def fault_rules_clear() -> int:
    deleted, _ = FaultRule.objects.all().delete()
    return deleted


def fault_claim(*, provider: str, operation: str) -> Fault | None:
    """Take one use of the oldest live rule for this call, if any. The decrement is a
    compare-and-swap, so two calls at once never both take a rule's last use."""
    rules = FaultRule.objects.filter(provider=provider, operation__in=(operation, ""), remaining__gt=0)
    # A fault for one kind of call leaves the others alone (Fault.applies_to).
    rules = rules.exclude(fault=KEY_CONFLICT if operation == LOOKUP_OPERATION else UNKNOWN_LOOKUP)
    for rule in rules.order_by("created_at", "id")[:20]:
        taken = FaultRule.objects.filter(pk=rule.pk, remaining__gt=0).update(remaining=F("remaining") - 1)
        if taken == 1:
            FaultRule.objects.filter(pk=rule.pk, remaining=0).delete()
            return Fault.parse(rule.fault)
    return None
