"""The sandbox's ledger, and the one rule of idempotency every provider's write follows.

Every keyed write follows Stripe's rule: the first request with an idempotency key performs the
effect and records it; a repeat with the same key and the same parameters answers the recorded
receipt and performs nothing; the same key with different parameters, or on a different
operation of the same provider, is a conflict. The effect's ledger row is inserted first in the
effect's own transaction, so the unique key is claimed before anything is touched: of two
identical requests at once, the second waits on the first's insert, fails it, and replays the
winner. The legacy ERP ignores keys, and a repeat performs again."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from .errors import Conflict, InvalidRequest
from .models import Effect, Provider

UNKEYED_PROVIDERS = frozenset({Provider.ERP})
MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class Outcome:
    """What a write came to: the effect (just performed, or the earlier one a replay answers
    from) and whether this request was a replay."""

    effect: Effect
    replayed: bool

    @property
    def receipt(self) -> dict[str, Any]:
        receipt: dict[str, Any] = self.effect.receipt
        return receipt


# An operation's body: given the (already inserted) ledger row, change the provider's state and
# return the receipt and the id of the effect this one undoes, if it is an undo.
Act = Callable[[Effect], tuple[dict[str, Any], int | None]]


def _earlier_effect(*, provider: str, idempotency_key: str) -> Effect | None:
    return Effect.objects.filter(provider=provider, idempotency_key=idempotency_key).first()


def _replay(earlier: Effect, *, operation: str, request: Mapping[str, Any]) -> Outcome:
    if earlier.operation != operation:
        raise Conflict(
            "idempotency_key_reused",
            f"this Idempotency-Key was already used for {earlier.provider}/{earlier.operation}",
            field="Idempotency-Key",
        )
    if earlier.request != dict(request):
        raise Conflict(
            "idempotency_key_mismatch",
            "this Idempotency-Key was already used with different parameters",
            field="Idempotency-Key",
        )
    return Outcome(effect=earlier, replayed=True)


def effect_perform(
    *,
    provider: str,
    operation: str,
    idempotency_key: str,
    business_ref: str,
    request: Mapping[str, Any],
    act: Act,
) -> Outcome:
    """Run one effect with its ledger row in one durable transaction, honouring the key."""
    keyed = provider not in UNKEYED_PROVIDERS
    key = idempotency_key.strip() if keyed else ""
    if keyed:
        if not key:
            raise InvalidRequest(
                "missing_idempotency_key",
                "every write takes an Idempotency-Key header",
                field="Idempotency-Key",
            )
        if len(key) > MAX_KEY_LENGTH:
            raise InvalidRequest(
                "invalid_idempotency_key",
                f"an Idempotency-Key is at most {MAX_KEY_LENGTH} characters",
                field="Idempotency-Key",
            )
        earlier = _earlier_effect(provider=provider, idempotency_key=key)
        if earlier is not None:
            return _replay(earlier, operation=operation, request=request)
    try:
        with transaction.atomic(durable=True):
            # Claim the key first: a concurrent twin blocks here until this commits, then fails.
            effect = Effect.objects.create(
                provider=provider,
                operation=operation,
                idempotency_key=key,
                business_ref=business_ref,
                request=dict(request),
                receipt={},
            )
            receipt, undoes_id = act(effect)
            effect.receipt = receipt
            effect.undoes_id = undoes_id
            effect.save(update_fields=["receipt", "undoes"])
    except IntegrityError:
        winner = _earlier_effect(provider=provider, idempotency_key=key) if key else None
        if winner is None:
            raise
        return _replay(winner, operation=operation, request=request)
    return Outcome(effect=effect, replayed=False)
