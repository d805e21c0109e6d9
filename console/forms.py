"""The forms of the staff actions, one per action (console.staff_actions names which). Each field
is named as the page posts it and refuses bad input with a message naming the field, so a view
answers 400 with the form kept and nothing written, and a service receives typed, cleaned values.

What a form cannot know — whether the step exists, whether the run changed, whether the owner is
a person of the tenant — stays with the services, which answer 404 / 409 / 400 as before."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from audit.models import AuditAction
from handover import words
from journal.models import CustomerMessage, OutcomeReason, RunStatus, Tenant
from journal.services import MAX_MESSAGE_CHARS
from retention.windows import retention_too_short

from . import selectors
from .actions import MAX_NOTE_CHARS
from .dates import LocaleDateField, LocaleDateForm
from .models import NotificationRule

# A step id is `run:turn:tool[:occurrence]`: printable ASCII, no spaces.
STEP_ID = re.compile(r"[!-~]+")
# The state token a page was drawn with (handover.run_state_token).
STATE = re.compile(r"[0-9]{1,18}(\.[0-9]{1,18}){2}")
# An object id: ASCII digits only. int() would read '٣' (ARABIC-INDIC DIGIT THREE) as 3.
ASCII_DIGITS = re.compile(r"[0-9]{1,18}")


def _messages(name: str, *, required: str = "") -> dict[str, str]:
    """Django's error messages, said with the field's name (the page shows them out of context)."""
    return {
        "required": required or f"{name} is required",
        "max_length": f"{name} is %(show_value)d characters; the limit is %(limit_value)d",
        "null_characters_not_allowed": f"{name} contains a NUL character (U+0000)",
        "invalid_choice": f"{name} %(value)s is not one of the choices",
        "invalid": f"{name} is not valid",
    }


class _Textarea(forms.Textarea):
    """A textarea without Django's default cols and rows (the stylesheet sizes it)."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        forms.Widget.__init__(self, attrs)


class NoteField(forms.CharField):
    def clean(self, value: Any) -> Any:
        value = super().clean(value)
        if self.required and not value.strip():
            raise ValidationError(self.error_messages["required"], code="required")
        return value


class StepIdField(forms.CharField):
    def __init__(self, name: str = "step_id", **kwargs: Any) -> None:
        self.name = name
        super().__init__(max_length=255, widget=forms.HiddenInput, error_messages=_messages(name), **kwargs)

    def validate(self, value: Any) -> None:
        super().validate(value)
        if "\x00" in value:  # said as such, before the broader rule below
            raise ValidationError(self.error_messages["null_characters_not_allowed"], code="null")
        if value and not STEP_ID.fullmatch(value):
            raise ValidationError(f"{self.name} must be printable ASCII without spaces", code="invalid")


class ObjectIdField(forms.Field):
    """A primary key as a page posts it: ASCII digits, cleaned to an int."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        self.name = name
        super().__init__(error_messages=_messages(name), **kwargs)

    def to_python(self, value: Any) -> int | None:
        if value in self.empty_values:
            return None
        text = str(value)
        if "\x00" in text:
            raise ValidationError(self.error_messages["null_characters_not_allowed"], code="null")
        if not ASCII_DIGITS.fullmatch(text):
            raise ValidationError(f"{self.name} must be a number in ASCII digits (0-9)", code="invalid")
        return int(text)


# --- the run actions --------------------------------------------------------------------------


class RunActionForm(forms.Form):
    """Every run action carries the state of the run the page showed (run_state_token)."""

    state = forms.CharField(
        max_length=100,
        strip=False,
        widget=forms.HiddenInput,
        error_messages=_messages("state", required="state is required: the state of the run you saw"),
    )


class StepActionForm(RunActionForm):
    step_id = StepIdField()


class AssignForm(RunActionForm):
    pass


def _staff_choices(field: forms.Field, staff: Any) -> None:
    widget = field.widget
    assert isinstance(widget, forms.Select)
    widget.choices = [("", "choose a colleague"), *((p.pk, p.get_username()) for p in staff)]


class AssignToForm(RunActionForm):
    """Whom to hand the run to. Whether they are staff of the tenant is the service's to check
    (console.actions.staff_member): a form only knows the id is a number."""

    assignee = ObjectIdField("assignee", label="Colleague", widget=forms.Select)

    def __init__(self, *args: Any, staff: Any = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _staff_choices(self.fields["assignee"], staff)


class CompensateStepForm(StepActionForm):
    pass


class CompensateRunForm(RunActionForm):
    pass


class ResumeForm(RunActionForm):
    pass


class RetryLookupForm(StepActionForm):
    pass


class MarkStepForm(StepActionForm):
    """It happened / it did not: a person's judgement, which needs their note."""

    note = NoteField(
        label="Note (required)",
        max_length=MAX_NOTE_CHARS,
        strip=False,
        widget=_Textarea(attrs={"required": True}),
        error_messages=_messages("note"),
    )


class CustomerToldForm(RunActionForm):
    channel = forms.ChoiceField(
        label="Channel",
        choices=CustomerMessage.Channel.choices,
        error_messages={
            **_messages("channel"),
            "invalid_choice": f"channel must be one of {', '.join(CustomerMessage.Channel.values)}",
        },
    )
    body = NoteField(
        label="What they were told",
        max_length=MAX_MESSAGE_CHARS,
        strip=False,
        widget=_Textarea(attrs={"required": True}),
        error_messages=_messages("body"),
    )


class ResolveRunForm(RunActionForm):
    note = NoteField(
        label="Note (required)",
        max_length=MAX_NOTE_CHARS,
        strip=False,
        widget=_Textarea(attrs={"required": True}),
        error_messages=_messages("note"),
    )


# --- the dead-letter actions ------------------------------------------------------------------


class DeadLetterTakeForm(forms.Form):
    pass


class BulkRunField(forms.Field):
    """The runs ticked in the queue, each posted as `<run id>:<state the row showed>`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(error_messages=_messages("run", required="run: choose at least one run"), **kwargs)

    def to_python(self, value: Any) -> list[tuple[uuid.UUID, str]]:
        if value in self.empty_values:
            return []
        values = value if isinstance(value, list | tuple) else [value]
        runs: dict[uuid.UUID, str] = {}
        for item in values:
            text = str(item)
            if "\x00" in text:
                raise ValidationError(self.error_messages["null_characters_not_allowed"], code="null")
            run_id, _, state = text.partition(":")
            try:
                pk = uuid.UUID(run_id)
            except ValueError:
                raise ValidationError(f"run {text[:60]!r} is not a run id", code="invalid") from None
            if not STATE.fullmatch(state):
                raise ValidationError(f"run {run_id} does not say the state the page showed", code="invalid")
            runs.setdefault(pk, state)  # a run ticked twice is acted on once
        return list(runs.items())


class BulkMultipleWidget(forms.CheckboxSelectMultiple):
    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        return data.getlist(name) if hasattr(data, "getlist") else data.get(name)


class BulkRunsForm(forms.Form):
    """Do one of the registry's bulk actions (console.staff_actions.bulk_actions, given as
    `actions`: name → action) to the runs ticked in the queue; the form draws its choices and
    asks for the note from the action, never from its name."""

    action = forms.ChoiceField(error_messages=_messages("action"))
    run = BulkRunField(widget=BulkMultipleWidget)
    # Not `assignee`: the queue's filter of that name is posted alongside (hx-include).
    colleague = ObjectIdField("colleague", required=False, label="to", widget=forms.Select)
    note = NoteField(
        label="Note (needed to resolve)",
        required=False,
        max_length=MAX_NOTE_CHARS,
        strip=False,
        widget=forms.TextInput,
        error_messages=_messages("note"),
    )

    def __init__(self, *args: Any, actions: Mapping[str, Any], staff: Any = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.actions = actions
        field = self.fields["action"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(name, action.bulk.label) for name, action in actions.items()]
        field.error_messages["invalid_choice"] = f"action must be {' or '.join(actions)}"
        _staff_choices(self.fields["colleague"], staff)
        widget = self.fields["colleague"].widget
        assert isinstance(widget, forms.Select)
        widget.choices = [("", "me"), *list(widget.choices)[1:]]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        action = self.actions.get(data.get("action", ""))
        if action is not None and action.bulk.needs_note and not (data.get("note") or "").strip():
            self.add_error("note", ValidationError(f"note is required to {action.name}", code="required"))
        return data


class DeadLetterAssignForm(forms.Form):
    """Whom to hand the letter to. The owner's tenant and role are the service's to check: a form
    only knows the id is a number."""

    owner = ObjectIdField("owner", label="Owner", widget=forms.Select)

    def __init__(self, *args: Any, staff: Any = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        widget = self.fields["owner"].widget
        assert isinstance(widget, forms.Select)
        widget.choices = [(person.pk, person.get_username()) for person in staff]


class DeadLetterRetryForm(forms.Form):
    note = NoteField(
        label="Note",
        required=False,
        max_length=MAX_NOTE_CHARS,
        strip=False,
        widget=forms.HiddenInput,
        error_messages=_messages("note"),
    )


class DeadLetterResolveForm(forms.Form):
    note = NoteField(
        label="Note",
        max_length=MAX_NOTE_CHARS,
        strip=False,
        widget=forms.TextInput(attrs={"required": True, "placeholder": "how it was settled (required)"}),
        error_messages=_messages("note"),
    )


# --- the pages' query parameters --------------------------------------------------------------
# Every parameter a staff page reads is a field of one of these forms: a page binds its form to
# the query string (or to the posted data that carries it), and answers 400 naming the field
# when it is not valid, before reading or writing anything (console.views.parameters).


def text_parameter(name: str, max_length: int) -> forms.CharField:
    """A free-text parameter: optional, at most `max_length` characters, no NUL (PostgreSQL text
    cannot hold one: filtering on it would be a DataError)."""
    return forms.CharField(required=False, max_length=max_length, error_messages=_messages(name))


def choice_parameter(name: str, choices: Any) -> forms.ChoiceField:
    """One of `choices` (their values), or empty."""
    values = [value for value, _label in choices]
    return forms.ChoiceField(
        required=False,
        choices=[("", ""), *choices],
        error_messages={
            **_messages(name),
            "invalid_choice": f"{name} must be one of {', '.join(values)}",
        },
    )


class PageNumberField(ObjectIdField):
    """A page of a paged list: ASCII digits (a number past the last page is the last page)."""

    def __init__(self) -> None:
        super().__init__("page", required=False)


def _date_parameter(name: str) -> LocaleDateField:
    """A filter's date, in the person's order or ISO (console.dates)."""
    return LocaleDateField(name=name, error_messages=_messages(name))


class SearchField(forms.CharField):
    """`q`: any part of a ticket or order id (console.selectors.search_q), without NUL or other
    control characters (no id holds one)."""

    def __init__(self) -> None:
        super().__init__(required=False, max_length=100, error_messages=_messages("q"))

    def validate(self, value: Any) -> None:
        super().validate(value)
        if "\x00" not in value and any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValidationError("q contains a control character", code="invalid")


class SinceField(forms.DateTimeField):
    """A date and time as ISO 8601 (what the page itself sends), nothing else."""

    def __init__(self) -> None:
        super().__init__(
            required=False,
            error_messages={**_messages("since"), "invalid": "since must be a date and time, as ISO 8601"},
        )

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and any(ord(c) < 32 for c in value):
            raise ValidationError(self.error_messages["invalid"], code="invalid")
        return super().to_python(value)


QUEUE_REASONS = [
    *OutcomeReason.choices,
    (selectors.STUCK, "Stuck: the agent went quiet"),
    (selectors.ANSWERED, "Answered since: check and resolve"),
]
# The statuses a run shows now (console.selectors.status_now_case): a resolved run is never
# "Escalated", and the Escalated filter leaves resolved runs out.
QUEUE_STATUSES = [*RunStatus.choices, (selectors.RESOLVED, "Resolved")]


class QueueFiltersForm(forms.Form):
    """The queue's filters, from its query string, or from an action posted from the queue
    (which carries them, to draw the queue again)."""

    task_type = text_parameter("task_type", 64)
    reason = choice_parameter("reason", QUEUE_REASONS)
    status = choice_parameter("status", QUEUE_STATUSES)
    assignee = text_parameter("assignee", 150)
    q = SearchField()
    sort = choice_parameter("sort", [("deadline", "nearest deadline first"), ("oldest", "oldest first")])
    page = PageNumberField()
    # When the open page was first drawn: each poll counts the escalations that arrived since.
    since = SinceField()

    def filters(self) -> selectors.QueueFilters:
        data = self.cleaned_data
        return selectors.QueueFilters(
            task_type=data["task_type"],
            reason=data["reason"],
            status=data["status"],
            assignee=data["assignee"],
            q=data["q"],
            sort=data["sort"] or "deadline",
        )


class AuditFiltersForm(LocaleDateForm):
    person = text_parameter("person", 150)
    run = text_parameter("run", 100)
    action = choice_parameter("action", AuditAction.choices)
    since = _date_parameter("since")
    until = _date_parameter("until")
    page = PageNumberField()

    def filters(self) -> selectors.AuditFilters:
        data = self.cleaned_data
        return selectors.AuditFilters(
            person=data["person"],
            run=data["run"],
            action=data["action"],
            since=data["since"],
            until=data["until"],
        )


class RunListForm(forms.Form):
    q = SearchField()
    page = PageNumberField()


class RunPageForm(forms.Form):
    """The run page (and its panel): `all=1` draws its long lists whole."""

    all = choice_parameter("all", [("1", "every item")])


class RunPanelForm(forms.Form):
    """The poll of a run page: the state token of what the page shows."""

    state = forms.CharField(required=False, max_length=100, strip=False, error_messages=_messages("state"))


class RunConfirmForm(forms.Form):
    """The confirmation of an action: the step it is about, if any."""

    step = StepIdField("step", required=False)


class RunActFromForm(forms.Form):
    """Where an action was posted from: the queue wants the queue drawn again."""

    from_ = choice_parameter("from", [("queue", "the queue")])

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["from"] = self.fields.pop("from_")


class DeadLettersForm(forms.Form):
    show = choice_parameter("show", [("open", "open"), ("resolved", "resolved"), ("all", "all")])


class TenantForm(forms.ModelForm):
    """The admin's form of a tenant. Its retention period must outlast every undo its catalogue
    allows (retention.windows): a run archived sooner would lose an undo still possible."""

    class Meta:
        model = Tenant
        fields = ["slug", "name", "retention_days"]
        help_texts = {
            "retention_days": "Days an ended run's intents and events stay in the database before they "
            "are archived; longer than the longest undo window of the compensation catalogue.",
        }

    def clean_retention_days(self) -> int:
        days: int = self.cleaned_data["retention_days"]
        tenant = self.instance if self.instance.pk else None
        short = retention_too_short(tenant=tenant, retention_days=days)
        if short is not None:
            raise ValidationError(
                words.say(
                    words.RETENTION_SHORTER_THAN_UNDO,
                    days=days,
                    tool=words.tool_words(short.tool),
                    window=words.duration_words(short.window),
                    needed=short.days_needed,
                ),
                code="shorter_than_undo",
            )
        return days


class NotificationRuleForm(forms.ModelForm):
    """The admin's form of a notification rule. The webhook is checked by the model's clean
    (console.outbound), which every form of the model runs; this form says the rules up front."""

    class Meta:
        model = NotificationRule
        fields = ["tenant", "task_type", "emails", "webhook_url", "active"]
        help_texts = {
            "webhook_url": "An https:// address reachable on the internet, e.g. a chat channel's "
            "incoming webhook. Addresses inside the operator's network (loopback, private, "
            "link-local, cloud metadata) are refused unless the operator allows them.",
        }
