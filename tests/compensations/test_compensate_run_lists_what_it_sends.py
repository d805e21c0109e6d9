""" "Compensate the run" after one of its steps was already undone by hand: the confirmation lists
exactly the undos the worker then sends (compensations.selectors.steps_to_undo is both's rule),
and the downstream gets no second undo of the step undone before."""

from __future__ import annotations

from typing import Any

import pytest

from compensations.services import compensation_execute, compensation_request, run_undo
from console.confirmations import compensate_run
from handover import handover_rows
from journal import services as journal
from journal.models import Run
from sandbox.catalogue import catalogue_seed_defaults

pytestmark = pytest.mark.django_db(transaction=True)

PERSON = journal.Actor.system("compensations")


def _undoes(ledger: Any, run: Run, tool: str) -> int:
    original = run.intents.get(tool=tool)
    return ledger.filter(undoes__idempotency_key=original.idempotency_key).count()


def test_an_undone_pickup_is_neither_listed_nor_sent_again(escalated_bench: Run, ledger: Any) -> None:
    catalogue_seed_defaults()
    run = escalated_bench
    pickup = run.intents.get(tool="start_return")
    compensation_execute(compensation=compensation_request(original=pickup, actor=PERSON), actor=PERSON)
    assert _undoes(ledger, run, "start_return") == 1

    listed = compensate_run(run, handover_rows(run), "")
    run_undo(run=run, actor=PERSON)

    assert len(listed.effects) == 1 and "start_return" not in " ".join(listed.effects), listed.effects
    assert not listed.blockers
    # What the dialog listed is what went out: the replacement's undo, and no second cancel.
    assert _undoes(ledger, run, "offer_replacement") == 1
    assert _undoes(ledger, run, "start_return") == 1
