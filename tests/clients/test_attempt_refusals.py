"""The taxonomy's refusals (journal.attempts) as seam-client raises them: a SeamRefused with the
refusal's typed `code` (and `retry_after` for a retry that came too soon), which the runtime acts
on, and the tool never called."""

from __future__ import annotations

import time
from typing import Any

import pytest
from seam_client import ErrorClass, Outcome, Run, SeamClient, SeamRefused, ToolError

from journal.models import Intent
from tests.factories import BENCH_PLAN, VERSIONS

pytestmark = pytest.mark.django_db(transaction=True)

REFUND = {"order_id": "SO-1", "amount": "9.99"}
# The server runs with the default budgets (config/settings/base.py SEAM_ERROR_BUDGETS): two
# repairs per tool, three retries per call, a second between retries.
SPACING = 1.05


class Refunds:
    """A tool that fails as told, counting its calls."""

    def __init__(self, *failures: ErrorClass) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self, args: dict[str, Any], key: str) -> Outcome:
        self.calls += 1
        if self.failures:
            raise ToolError(self.failures.pop(0), "refused")
        return Outcome(summary="refunded", receipt={"refund_id": "re_1"})


def _attempt(run: Run, tool: Refunds, turn: int, args: dict[str, Any] = REFUND) -> None:
    with pytest.raises(ToolError):
        run.perform("issue_refund", args, tool, turn=turn)
    time.sleep(SPACING)  # past the retry spacing, so only the budget can refuse the next


@pytest.mark.parametrize(
    ("failures", "repeat", "code"),
    [
        ([ErrorClass.PERMANENT], [REFUND], "permanent_repeated"),
        ([ErrorClass.INVALID_INPUT], [REFUND], "invalid_input_repeated"),
        # the call and two repairs fail; a third repair is refused
        (
            [ErrorClass.INVALID_INPUT] * 3,
            [{**REFUND, "amount": f"{n}.00"} for n in (1, 2, 3)],
            "repairs_spent",
        ),
        # the call and three retries fail; a fourth retry is refused
        ([ErrorClass.TRANSIENT] * 4, [REFUND] * 4, "retries_spent"),
    ],
    ids=["permanent", "invalid-input", "repairs", "retries"],
)
def test_each_refusal_reaches_the_client_as_its_code(
    seam: SeamClient, failures: list[ErrorClass], repeat: list[dict[str, Any]], code: str
) -> None:
    # One handle, as an agent's: the same call at a new turn is its next occurrence, a new intent.
    run = seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN)
    tool = Refunds(*failures)
    _attempt(run, tool, 1)
    for turn, args in enumerate(repeat[:-1], start=2):
        _attempt(run, tool, turn, args)

    with pytest.raises(SeamRefused) as refused:
        run.perform("issue_refund", repeat[-1], tool, turn=len(repeat) + 1)

    assert (refused.value.status, refused.value.code) == (409, code)
    assert tool.calls == len(failures)  # the refused call never reached the tool
    assert Intent.objects.filter(run_id=run.id).count() == len(failures)


def test_a_retry_too_soon_says_when_to_come_back(seam: SeamClient) -> None:
    run = seam.start_run(task_type="returns", versions=VERSIONS, plan=BENCH_PLAN)
    tool = Refunds(ErrorClass.TRANSIENT)
    with pytest.raises(ToolError):
        run.perform("issue_refund", REFUND, tool, turn=1)
    with pytest.raises(SeamRefused) as refused:
        run.perform("issue_refund", REFUND, tool, turn=2)

    assert refused.value.code == "retry_too_soon"
    assert refused.value.retry_after is not None and 0 < refused.value.retry_after <= 1.0
    assert tool.calls == 1
