"""How far a performed step can be taken back, read from its catalogue entry and receipt: a value
with a kind for code (compensations.reversibility), and the sentence the console says for people
(handover.words), the same words the handover always showed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from compensations.models import CatalogueEntry, Reversibility
from compensations.reversibility import ReversibilityKind, ReversibilityNow, reads_receipt, reversibility_now
from handover import ReversibilityNow as HandoverReversibility
from handover.words import reversibility_sentence

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _entry(grade: str, **fields: str) -> CatalogueEntry:
    return CatalogueEntry(
        tool="reship", reversibility=grade, **{"compensating_tool": "cancel_shipment", **fields}
    )


def _reship(**fields: str) -> CatalogueEntry:
    return _entry(
        Reversibility.REVERSIBLE_UNTIL,
        until_condition="until the recall cutoff",
        deadline_field="recall_cutoff",
        **fields,
    )


def _cutoff(delta: timedelta) -> dict[str, str]:
    return {"recall_cutoff": (NOW + delta).isoformat()}


@pytest.mark.parametrize(
    ("entry", "receipt", "kind", "sentence", "flag"),
    [
        (None, {}, ReversibilityKind.NONE, "no", False),
        (_entry(Reversibility.NONE), {}, ReversibilityKind.NONE, "no", False),
        (_entry(Reversibility.REVERSIBLE, compensating_tool=""), {}, ReversibilityKind.NONE, "no", False),
        (_entry(Reversibility.REVERSIBLE), {}, ReversibilityKind.YES, "yes", True),
        (
            _entry(Reversibility.PARTIAL, loss="the 7.50 GBP recall fee"),
            {},
            ReversibilityKind.PARTIAL,
            "partially: the 7.50 GBP recall fee is lost",
            "partially: the 7.50 GBP recall fee is lost",
        ),
        (
            _entry(Reversibility.PARTIAL),
            {},
            ReversibilityKind.PARTIAL,
            "partially: not everything is lost",
            None,
        ),
        (
            _entry(Reversibility.REVERSIBLE_UNTIL, until_condition="until collection"),
            {},
            ReversibilityKind.UNTIL,
            "until collection",
            "until collection",
        ),
        (_entry(Reversibility.REVERSIBLE_UNTIL), {}, ReversibilityKind.YES, "yes", True),
        (_reship(), _cutoff(timedelta(hours=6)), ReversibilityKind.UNTIL, "until 2026-11-29 18:00 UTC", None),
        (
            _reship(loss="the recall fee"),
            _cutoff(timedelta(hours=6)),
            ReversibilityKind.UNTIL,
            "until 2026-11-29 18:00 UTC; after that the recall fee is lost",
            None,
        ),
        (
            _reship(loss="the recall fee"),
            _cutoff(-timedelta(hours=1)),
            ReversibilityKind.PARTIAL,
            "partially: past its deadline, the recall fee is lost",
            None,
        ),
        (_reship(), _cutoff(-timedelta(hours=1)), ReversibilityKind.NONE, "no", False),
        # A receipt without the deadline falls back on the condition in words.
        (_reship(), {}, ReversibilityKind.UNTIL, "until the recall cutoff", None),
    ],
)
def test_reversibility_reads_the_grade_and_the_receipts_deadline(
    entry: CatalogueEntry | None, receipt: dict[str, str], kind: str, sentence: str, flag: bool | str | None
) -> None:
    now = reversibility_now(entry, receipt, NOW)

    assert now.kind == kind
    assert reversibility_sentence(now) == sentence
    # The handover's older `reversible`: true, false, or the sentence.
    said = HandoverReversibility.of(now)
    assert (said.sentence, said.flag_or_sentence) == (sentence, sentence if flag is None else flag)
    assert now.can_undo is (kind != ReversibilityKind.NONE)
    assert now.loses is (kind == ReversibilityKind.PARTIAL)


def test_only_a_partial_undo_warns_of_a_loss_and_only_until_or_partial_needs_its_words() -> None:
    assert [r.loses for r in (ReversibilityNow.yes(), ReversibilityNow.until(condition="until x"))] == [
        False,
        False,
    ]
    assert ReversibilityNow.partial(loss="the fee").loses
    assert not ReversibilityNow.yes().conditional and not ReversibilityNow.none().conditional
    assert ReversibilityNow.until(condition="until collection").conditional


@pytest.mark.parametrize(
    "entry",
    [
        None,
        _entry(Reversibility.NONE),
        _entry(Reversibility.REVERSIBLE, compensating_tool=""),
        _entry(Reversibility.REVERSIBLE),
        _entry(Reversibility.PARTIAL, loss="the 7.50 GBP recall fee"),
        _reship(),
        _reship(loss="the recall fee"),
        _entry(Reversibility.REVERSIBLE_UNTIL, until_condition="until collection"),
    ],
)
def test_an_entry_that_does_not_read_the_receipt_answers_the_same_for_every_step(
    entry: CatalogueEntry | None,
) -> None:
    # A long run's handover works out the reversibility of such a tool once for all its steps.
    answers = {
        reversibility_now(entry, receipt, NOW)
        for receipt in (None, {}, _cutoff(timedelta(hours=2)), _cutoff(-timedelta(hours=2)))
    }
    assert (len(answers) > 1) == (entry is not None and entry.deadline_field != "")
    if not reads_receipt(entry):
        assert len(answers) == 1
