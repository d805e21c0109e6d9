"""The handover object's OpenAPI description (GET /api/v1/runs/{id}/handover/).

handover.handover builds the object as plain dicts, the same ones the run page renders; these
serializers only describe it, so that /api/schema/ (and clients generated from it) know every
field a support tool can rely on. They are never used to produce a response: the contract test
(tests/handover/test_api_handover.py) validates real handovers, in each of their states, against
the schema these produce, so a field added to the object without being described here fails it."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from compensations.models import CompensationStatus
from fanout.models import Outcome as FanOutOutcome
from journal.models import CustomerMessage, IntentStatus, RunStatus


@extend_schema_field(
    {
        "oneOf": [{"type": "boolean"}, {"type": "string"}],
        "description": "true, false, or the condition and deadline in words, e.g. "
        '"until Sun 29 Nov 18:00; after that the 7.50 GBP recall fee is lost", '
        '"partially: the 7.50 GBP recall fee is lost".',
    }
)
class ReversibleField(serializers.Field):
    """A bool or a sentence: how far a completed write can still be taken back."""


class FreeObjectField(serializers.DictField):
    """An object whose keys are the downstream's or the caller's own (a receipt, arguments)."""

    child = serializers.JSONField()


class StepCompensationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=CompensationStatus.choices)
    not_undone = serializers.CharField(help_text="What the undo could not take back, if it was partial.")
    dead_letter = serializers.IntegerField(
        allow_null=True, help_text="The dead letter's id when the undo failed and a person owns it."
    )


class CompletedStepSerializer(serializers.Serializer):
    step_id = serializers.CharField()
    tool = serializers.CharField()
    at = serializers.CharField(help_text="Local time of day it settled, HH:MM:SS, as the run page shows it.")
    settled_at = serializers.DateTimeField()
    detail = serializers.CharField(help_text="The receipt in words.")
    reversible = ReversibleField()
    receipt = FreeObjectField(help_text="The downstream's own identifiers.")
    undo_tool = serializers.CharField(
        help_text="The catalogue's compensating tool; empty when nothing undoes it."
    )
    compensation = StepCompensationSerializer(allow_null=True, help_text="The undo, once one was asked for.")
    warnings = serializers.ListField(
        child=serializers.CharField(), help_text="What a person must know before undoing it."
    )


class PlannedStepSerializer(serializers.Serializer):
    """A step of the plan that is not known to stand: what it was to send, and the key to it."""

    step_id = serializers.CharField(help_text="Empty when the step was never attempted.")
    tool = serializers.CharField()
    args = FreeObjectField()
    detail = serializers.CharField()
    idempotency_key = serializers.CharField(help_text="The key the step is (or would be) sent with.")


class NotDoneStepSerializer(PlannedStepSerializer):
    why = serializers.CharField(help_text='"never attempted", "not performed: …" or "failed (<class>): …".')


class UncertainStepSerializer(PlannedStepSerializer):
    status = serializers.ChoiceField(choices=[IntentStatus.INTENDED, IntentStatus.UNKNOWN])
    why = serializers.CharField()
    lookup_attempts = serializers.IntegerField(min_value=0)
    compensation = serializers.BooleanField(help_text="The uncertain call is itself an undo.")


class CustomerToldSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    channel = serializers.ChoiceField(choices=CustomerMessage.Channel.choices)
    body = serializers.CharField()


class AvailableUndoSerializer(serializers.Serializer):
    step_id = serializers.CharField()
    tool = serializers.CharField()
    undo_tool = serializers.CharField()
    reversible = ReversibleField()


class NextActionSerializer(serializers.Serializer):
    text = serializers.CharField()
    compensations_available = AvailableUndoSerializer(many=True)
    waiting = serializers.BooleanField(help_text="Whether the run waits on a person.")


class MissingBranchSerializer(serializers.Serializer):
    branch = serializers.CharField()
    tool = serializers.CharField()
    required = serializers.BooleanField()  # type: ignore[assignment]  # a field (DRF pops it), not Field.required
    why = serializers.CharField()
    retry = serializers.CharField()
    attempts = serializers.IntegerField(min_value=1)


class CheckedBranchSerializer(serializers.Serializer):
    branch = serializers.CharField()
    tool = serializers.CharField()
    required = serializers.BooleanField()  # type: ignore[assignment]  # a field (DRF pops it), not Field.required
    result = FreeObjectField()
    latency_ms = serializers.IntegerField(allow_null=True)
    attempts = serializers.IntegerField(min_value=1)


class FanOutDecisionSerializer(serializers.Serializer):
    proceed = serializers.BooleanField()
    rule = serializers.CharField()
    summary = serializers.CharField()
    rests_on = serializers.ListField(child=serializers.CharField())
    promise = FreeObjectField()
    conflict = FreeObjectField(allow_null=True, help_text='{"question": …, "sides": [{"source", "says"}, …]}')


class CoverageSerializer(serializers.Serializer):
    fanout = serializers.CharField()
    turn = serializers.IntegerField(min_value=0)
    deadline_ms = serializers.IntegerField(min_value=0)
    coverage = serializers.CharField(help_text='Branches that answered, of all: "2/3".')
    outcome = serializers.ChoiceField(choices=[("", "not settled"), *FanOutOutcome.choices])
    outcome_label = serializers.CharField()
    missing = MissingBranchSerializer(many=True)
    checked = CheckedBranchSerializer(many=True)
    decision = FanOutDecisionSerializer()


class HandoverSerializer(serializers.Serializer):
    """What a person needs to finish a run the agent could not, generated from the rows."""

    handover_version = serializers.CharField()
    run_id = serializers.UUIDField()
    ticket_id = serializers.CharField()
    order_id = serializers.CharField()
    task_type = serializers.CharField()
    status = serializers.ChoiceField(choices=RunStatus.choices)
    reason = serializers.CharField(
        help_text="Why the run needs a person (an outcome reason, or run_stuck); empty if it does not."
    )
    reason_detail = serializers.CharField()
    assignee = serializers.CharField(allow_null=True)
    completed = CompletedStepSerializer(many=True)
    not_done = NotDoneStepSerializer(many=True)
    uncertain = UncertainStepSerializer(many=True)
    customer_told = CustomerToldSerializer(many=True)
    next_action = NextActionSerializer()
    coverage = CoverageSerializer(allow_null=True, help_text="The run's latest fan-out, if it had one.")
    versions = serializers.DictField(child=serializers.CharField())
    deadline = serializers.DateTimeField(allow_null=True)
    deadline_passed = serializers.BooleanField()
    state = serializers.CharField(
        help_text="The run as this handover saw it; actions carrying an older one are refused."
    )
