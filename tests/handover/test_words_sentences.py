"""The sentences people read name tools by their labels, keep raw ids and arguments out of the
sentence (for the Details disclosure), and say an audit row as who did what."""

from __future__ import annotations

from typing import Any

import pytest

from compensations.reversibility import ReversibilityNow
from handover import audit_words, words

RUN = "2fcf4fa9-1c1f-4a43-9d34-0f3f4b7c2e11"
STEP = f"{RUN}:2:start_return"


@pytest.fixture(autouse=True)
def _sandbox_labels(sandbox_tools: str) -> None:
    """The sandbox's tools, with their declared labels, are registered."""


def test_tools_and_steps_are_named_by_their_labels() -> None:
    assert words.tool_label("cancel_pickup") == "Cancel the pickup"
    assert words.tool_words("cancel_pickup") == "“Cancel the pickup”"
    assert words.tool_words("not_a_declared_tool") == "“Not a declared tool”"
    assert words.step_words(STEP) == "step 2, “Start the return”"
    assert words.call_words("start_return", undo=False) == "“Start the return”"
    assert words.call_words("start_return", undo=True) == "the undo of “Start the return”"


def test_an_undo_is_said_by_labels_with_its_arguments_kept_for_the_details() -> None:
    said = words.undo_call_words(
        undo_tool="cancel_pickup", tool="start_return", reversible=ReversibilityNow.yes()
    )
    assert said == "send “Cancel the pickup” to undo “Start the return”"
    details = words.step_details(step_id=STEP, key="k" * 64, args={"label": "RL-1"})
    assert details == [f"step id: {STEP}", f"idempotency key: {'k' * 64}", "arguments: label=RL-1"]
    assert words.step_named("start_return", STEP) == "step 2, “Start the return”"


def test_a_resume_step_names_no_key() -> None:
    said = words.resume_step_words(
        {
            "action": "send",
            "tool": "issue_refund",
            "detail": "",
            "key": "f" * 64,
            "why": "never attempted; sent now",
        }
    )
    assert said == "send “Refund the buyer”: never attempted; sent now"
    assert "f" * 8 not in said


def _said(action: str, *, step_id: str = "", old: Any = None, new: Any = None, who: str = "lena-lead") -> str:
    return audit_words.audit_sentence(
        action=action, label="Label of the action", who=who, step_id=step_id, old=old or {}, new=new or {}
    )


def test_audit_rows_are_sentences() -> None:
    assert _said("mark_performed", step_id=STEP, old={"status": "unknown"}, new={"status": "performed"}) == (
        "lena-lead marked “Start the return” as performed"
    )
    assert _said("mark_not_performed", step_id=STEP) == "lena-lead marked “Start the return” as not performed"
    steps = [f"{RUN}:{n}:start_return" for n in range(4)]
    assert _said("compensate_run", old={"performed": steps}, new={"requested": steps}) == (
        "lena-lead asked to undo the whole run: compensation requested (4 steps)"
    )
    assert _said("compensate_run", new={"requested": steps[:1]}).endswith("(1 step)")
    assert (
        _said("compensate_step", step_id=STEP, new={"compensation": 4})
        == "lena-lead asked to undo “Start the return”"
    )
    assert _said("assign", new={"assignee": "lena-lead"}) == "lena-lead took the run"
    assert _said("assign", new={"assignee": "ana"}) == "lena-lead assigned the run to ana"
    plan = [
        {"action": "skip", "tool": "start_return", "key": "k1", "why": ""},
        {"action": "send", "tool": "issue_refund", "key": "k2", "why": ""},
    ]
    assert _said("resume", new={"status": "running", "steps": plan}) == (
        "lena-lead resumed the run, sending “Refund the buyer”"
    )
    assert _said("allow_attempt", new={"allowed": "issue_refund"}) == (
        "lena-lead allowed “Refund the buyer” to be sent once more"
    )
    assert _said("no_such_action") == "lena-lead: label of the action"


def test_no_audit_sentence_shows_a_step_id_or_a_snake_case_name() -> None:
    for action in audit_words.AUDIT_SENTENCES:
        said = _said(
            action, step_id=STEP, new={"requested": [STEP], "tool": "start_return", "assignee": "ana"}
        )
        assert RUN not in said and "start_return" not in said, (action, said)


def test_an_audited_value_says_step_ids_as_steps() -> None:
    assert words.audit_value_words(STEP) == "step 2, “Start the return”"
    assert words.audit_value_words([STEP]) == "step 2, “Start the return”"
