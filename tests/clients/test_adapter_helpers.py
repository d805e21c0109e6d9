"""What the adapters share (seam_client.adapters): the text a replayed call hands the model, and
how a tool's exception or error answer is classed."""

from __future__ import annotations

import pytest
from seam_client import ErrorClass, Intent, ToolError
from seam_client.adapters import UNKNOWN_TEXT, classify, error_answer, replay_text


def settled(status: str, summary: str = "", **fields: object) -> Intent:
    return Intent.from_json(
        {
            "step_id": "r:1:t",
            "idempotency_key": "k",
            "status": status,
            "tool": "award_points",
            "outcome_summary": summary,
            **fields,
        },
        replayed=True,
    )


def test_a_performed_call_replays_its_summary_or_says_it_was_done() -> None:
    assert replay_text(settled("performed", "booked pt_2")) == "booked pt_2"
    bare = replay_text(settled("performed", receipt={"entry_id": "pt_2", "_call_id": "call-3"}))
    assert bare == 'Done: award_points was performed ({"entry_id": "pt_2"}).'


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("unknown", UNKNOWN_TEXT),
        ("not_performed", "This call was not performed: it had no effect."),
        ("failed", "This call failed (conflict) (stale balance); it had no effect."),
        ("already_so", "Nothing was done: this was already so before the call."),
    ],
)
def test_every_other_outcome_is_a_sentence_never_an_empty_result(status: str, expected: str) -> None:
    summary = "stale balance" if status == "failed" else ""
    intent = settled(status, summary, error_class="conflict" if status == "failed" else "")
    assert replay_text(intent) == expected
    assert UNKNOWN_TEXT.startswith("The outcome of this call is unknown; a person is checking")


def test_an_unclassified_error_is_ambiguous_unless_the_tool_declares_its_errors_mean_not_performed() -> None:
    refused = ToolError(ErrorClass.CONFLICT, "stale")
    assert classify(refused) is refused
    assert classify(RuntimeError("502 from the ledger")).error_class is ErrorClass.AMBIGUOUS
    declared = classify(RuntimeError("card blocked"), errors_mean_not_performed=True)
    assert (declared.error_class, declared.message) == (ErrorClass.PERMANENT, "RuntimeError: card blocked")
    assert error_answer("ledger said no").error_class is ErrorClass.AMBIGUOUS


def test_a_frameworks_refusal_of_the_arguments_is_invalid_input_even_where_errors_are_refusals() -> None:
    class ArgumentsRefused(ValueError):
        pass

    for declared in (False, True):
        refused = classify(
            ArgumentsRefused("points: not an integer"),
            errors_mean_not_performed=declared,
            argument_errors=(ArgumentsRefused,),
        )
        assert (refused.error_class, refused.message) == (ErrorClass.INVALID_INPUT, "points: not an integer")
    assert classify(ValueError("x"), argument_errors=(ArgumentsRefused,)).error_class is ErrorClass.AMBIGUOUS
