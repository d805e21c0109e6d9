"""journal.keys: the idempotency key is a function of the intent, not of its spelling or attempt."""

from __future__ import annotations

import hashlib
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal.keys import (
    KEY_SCHEME,
    NotCanonicalisable,
    canonical_args,
    canonical_json,
    idempotency_key,
    idempotency_key_of_json,
)
from journal.models import Run, Tenant
from journal.selectors import plan_with_keys

# Any text PostgreSQL can store: every character but U+0000 and lone surrogates, which
# canonical_args refuses (tested below).
storable_characters = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))
storable_text = st.text(alphabet=storable_characters)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | storable_text
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(
                alphabet=st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=8
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)
json_objects = st.dictionaries(
    st.text(alphabet=storable_characters, max_size=10),
    json_values,
    max_size=6,
)

BASE = {
    "key_namespace": "sundry",
    "run_id": "6d1f0b1e-0000-4000-8000-000000000001",
    "tool": "issue_refund",
    "policy_version": "2026-11",
    "occurrence": 0,
}


def _shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys inserted in another order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@settings(max_examples=200)
@given(args=json_objects, seed=st.integers())
def test_key_ignores_the_order_arguments_were_written_in(args: dict[str, Any], seed: int) -> None:
    reordered = _shuffled(args, random.Random(seed))
    assert idempotency_key(args=args, **BASE) == idempotency_key(args=reordered, **BASE)


@settings(max_examples=200)
@given(args=json_objects)
def test_key_is_stable_across_calls(args: dict[str, Any]) -> None:
    assert idempotency_key(args=args, **BASE) == idempotency_key(args=dict(args), **BASE)


@settings(max_examples=200)
@given(a=json_objects, b=json_objects)
def test_different_arguments_give_different_keys(a: dict[str, Any], b: dict[str, Any]) -> None:
    if canonical_args(a) != canonical_args(b):
        assert idempotency_key(args=a, **BASE) != idempotency_key(args=b, **BASE)


@pytest.mark.parametrize(
    "field,other",
    [
        ("key_namespace", "acme"),
        ("run_id", "6d1f0b1e-0000-4000-8000-000000000002"),
        ("tool", "reverse_refund"),
        ("policy_version", "2026-12"),
        ("occurrence", 1),
    ],
)
def test_every_part_of_the_intent_changes_the_key(field: str, other: Any) -> None:
    args = {"order_id": "SU-90317", "amount": "14.95"}
    assert idempotency_key(args=args, **BASE) != idempotency_key(args=args, **{**BASE, field: other})


def test_integral_floats_and_integers_are_the_same_argument() -> None:
    assert idempotency_key(args={"qty": 2}, **BASE) == idempotency_key(args={"qty": 2.0}, **BASE)
    assert idempotency_key(args={"qty": 2}, **BASE) != idempotency_key(args={"qty": 2.5}, **BASE)


def test_types_are_not_conflated() -> None:
    keys = {idempotency_key(args={"v": v}, **BASE) for v in (1, "1", True, None, [1], {"1": 1})}
    assert len(keys) == 6


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def test_reasonable_nesting_is_accepted() -> None:
    assert canonical_args({"deep": _nested(60)}) == {"deep": _nested(60)}


@pytest.mark.parametrize(
    "bad", [{"x": float("nan")}, {"x": float("inf")}, {"x": {1, 2}}, {1: "int key"}, {"x": object()}]
)
def test_values_json_cannot_carry_are_refused(bad: dict[Any, Any]) -> None:
    with pytest.raises(NotCanonicalisable):
        canonical_args(bad)


@settings(max_examples=200)
@given(args=json_objects, tenant=storable_text, tool=storable_text, occurrence=st.integers(0, 2**31 - 1))
def test_the_key_is_the_hash_of_the_intents_canonical_json(
    args: dict[str, Any], tenant: str, tool: str, occurrence: int
) -> None:
    """The scheme recorded keys were derived with: the journal's hot path spells the material
    itself from the arguments' canonical JSON, and must spell it exactly so."""
    parts = {**BASE, "key_namespace": tenant, "tool": tool, "occurrence": occurrence}
    material = canonical_json(
        [
            KEY_SCHEME,
            parts["key_namespace"],
            str(parts["run_id"]),
            parts["tool"],
            canonical_args(args),
            parts["policy_version"],
            parts["occurrence"],
        ]
    )
    expected = hashlib.sha256(material.encode("utf-8")).hexdigest()
    assert idempotency_key(args=args, **parts) == expected
    args_json = canonical_json(canonical_args(args))
    assert idempotency_key_of_json(args_json=args_json, **parts) == expected


@pytest.mark.django_db
def test_a_tenants_keys_do_not_move_when_its_slug_is_renamed(make_run: Any) -> None:
    """Keys derive from the namespace the tenant was given when it was made, not from its slug,
    which an admin may edit: the planned step's key after a rename is the key before it."""
    run = make_run(plan=[{"tool": "start_return", "args": {"order_id": "SU-90317"}}])
    namespace = run.tenant.key_namespace
    before = plan_with_keys(run)[0]["key"]

    Tenant.objects.filter(pk=run.tenant.pk).update(slug="renamed")
    renamed = Run.objects.select_related("tenant").get(pk=run.pk)

    assert namespace not in ("", run.tenant.slug)
    assert renamed.tenant.key_namespace == namespace
    assert plan_with_keys(renamed)[0]["key"] == before
