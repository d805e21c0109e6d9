"""compensations/mapping.py: building the undo's arguments from the step's arguments and receipt."""

from __future__ import annotations

import pytest

from compensations.mapping import MappingError, MissingSource, ParsedMapping, compensation_args
from compensations.models import CatalogueEntry
from sandbox.seam import DEFAULT_CATALOGUE


def _entry(tool: str) -> CatalogueEntry:
    fields = next(e for e in DEFAULT_CATALOGUE if e["tool"] == tool)
    return CatalogueEntry(**fields)


def test_a_receipt_field_becomes_the_undo_argument() -> None:
    args = compensation_args(
        _entry("offer_replacement"),
        {"order_id": "SU-90317", "sku": "OAK-BENCH", "qty": 1},
        {"reservation_id": "RSV-1", "warehouse": "LDS-2"},
    )
    assert args == {"reservation_id": "RSV-1"}


def test_the_erp_adjustment_is_undone_by_the_opposite_adjustment() -> None:
    args = compensation_args(
        _entry("adjust_stock"),
        {"sku": "SKU-4471", "qty": -3, "reference": "COR-7"},
        {"adjustment_id": "ADJ-1"},
    )
    assert args == {"sku": "SKU-4471", "qty": 3, "reference": "COR-7"}


def test_negating_a_decimal_string_keeps_it_a_string() -> None:
    entry = CatalogueEntry(
        tool="t", compensating_tool="u", argument_mapping={"amount": "negate:receipt.amount"}
    )
    assert compensation_args(entry, {}, {"amount": "14.95"}) == {"amount": "-14.95"}


def test_a_missing_receipt_field_is_named_in_the_error() -> None:
    with pytest.raises(MissingSource) as raised:
        compensation_args(_entry("issue_refund"), {"order_id": "SU-90317"}, {"amount": "14.95"})
    assert raised.value.source == "receipt.refund_id"
    assert "receipt.refund_id" in str(raised.value)
    assert "reverse_refund" in str(raised.value)


def test_a_missing_argument_is_named_in_the_error() -> None:
    with pytest.raises(MissingSource, match=r"args\.qty"):
        compensation_args(_entry("adjust_stock"), {"sku": "SKU-4471", "reference": "COR-7"}, {})


@pytest.mark.parametrize("source", ["order.id", "receipt", "receipt.", "negate:", "args.a.b", 7])
def test_an_unknown_source_is_refused(source: object) -> None:
    entry = CatalogueEntry(tool="t", compensating_tool="u", argument_mapping={"x": source})
    with pytest.raises(MappingError, match="source"):
        compensation_args(entry, {"a": 1}, {"a": 1})


def test_a_value_that_is_not_a_number_cannot_be_negated() -> None:
    entry = CatalogueEntry(tool="t", compensating_tool="u", argument_mapping={"x": "negate:args.sku"})
    with pytest.raises(MappingError, match="cannot be negated"):
        compensation_args(entry, {"sku": "OAK-BENCH"}, {})


@pytest.mark.parametrize(
    ("mapping", "args", "receipt"),
    [
        ({"reservation_id": "receipt.reservation_id"}, {}, {"reservation_id": "RSV-1"}),
        ({"reservation_id": "receipt.reservation_id"}, {"reservation_id": "RSV-1"}, {}),
        ({"qty": "negate:args.qty", "sku": "args.sku"}, {"qty": -3, "sku": "S"}, {}),
        ({"qty": "negate:args.qty", "sku": "args.sku"}, {"qty": -3}, {}),
        ({"amount": "negate:receipt.amount"}, {}, {"amount": "14.95"}),
        ({"amount": "negate:receipt.amount"}, {}, {"amount": "fourteen"}),
        ({"amount": "negate:receipt.amount"}, {}, {"amount": True}),
        ({}, {}, {}),
    ],
)
def test_builds_answers_as_build_does(
    mapping: dict[str, str], args: dict[str, object], receipt: dict[str, object]
) -> None:
    """The run page asks `builds` of every step and `build` only for the words: they must agree."""
    parsed = ParsedMapping.of(CatalogueEntry(tool="t", compensating_tool="u", argument_mapping=mapping))
    try:
        parsed.build(args, receipt)
    except MappingError:
        built = False
    else:
        built = True
    assert parsed.builds(args, receipt) is built
