"""The forms of the staff actions, one per action (handover.staff_actions names which). Each field
is named as the page posts it and refuses bad input with a message naming the field, so a view
answers 400 with the form kept and nothing written, and a service receives typed, cleaned values.

What a form cannot know — whether the step exists, whether the run changed, whether the owner is
a person of the tenant — stays with the services, which answer 404 / 409 / 400 as before."""

from __future__ import annotations

import re
import uuid
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from journal.models import CustomerMessage, RunStatus
from journal.services import MAX_MESSAGE_CHARS

from .actions import MAX_NOTE_CHARS

# A step id is `run:turn:tool[:occurrence]`: printable ASCII, no spaces.
STEP_ID = re.compile(r"[!-~]+")
# The state token a page was drawn with (handover.handover.run_state_token).
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
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            max_length=255, widget=forms.HiddenInput, error_messages=_messages("step_id"), **kwargs
        )

    def validate(self, value: Any) -> None:
        super().validate(value)
        if "\x00" in value:  # said as such, before the broader rule below
            raise ValidationError(self.error_messages["null_characters_not_allowed"], code="null")
        if value and not STEP_ID.fullmatch(value):
            raise ValidationError("step_id must be printable ASCII without spaces", code="invalid")


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
    (handover.actions.staff_member): a form only knows the id is a number."""

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
    """Assign or resolve the runs ticked in the queue (handover.actions.runs_bulk)."""

    action = forms.ChoiceField(
        choices=[("assign", "Assign"), ("resolve", "Resolve")],
        error_messages={**_messages("action"), "invalid_choice": "action must be assign or resolve"},
    )
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

    def __init__(self, *args: Any, staff: Any = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _staff_choices(self.fields["colleague"], staff)
        widget = self.fields["colleague"].widget
        assert isinstance(widget, forms.Select)
        widget.choices = [("", "me"), *list(widget.choices)[1:]]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("action") == "resolve" and not (data.get("note") or "").strip():
            self.add_error("note", ValidationError("note is required to resolve", code="required"))
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

# A task type or reason as the queue's links spell them: a slug.
SLUG = re.compile(r"[-a-zA-Z0-9_]*")


class _QueryCharField(forms.CharField):
    """A text query parameter: its length and characters checked, its message naming it."""

    def __init__(self, name: str, *, max_length: int, pattern: re.Pattern[str] | None = None) -> None:
        self.name, self.pattern = name, pattern
        super().__init__(required=False, max_length=max_length, strip=True, error_messages=_messages(name))

    def validate(self, value: Any) -> None:
        super().validate(value)
        if "\x00" in value:  # said as such, before the broader rule below
            raise ValidationError(self.error_messages["null_characters_not_allowed"], code="null")
        if self.pattern is not None and not self.pattern.fullmatch(value):
            raise ValidationError(f"{self.name} may hold only letters, digits, '-' and '_'", code="invalid")


class RunSearchForm(forms.Form):
    """`q`: any part of a ticket or order id (handover.selectors.search_q)."""

    q = _QueryCharField("q", max_length=100)

    def clean_q(self) -> str:
        q: str = self.cleaned_data["q"]
        if any(ord(c) < 32 or ord(c) == 127 for c in q):
            raise ValidationError("q contains a control character", code="invalid")
        return q


class QueueQueryForm(RunSearchForm):
    """The queue's filters, as its form and links put them in the URL. A bad value is a 400
    naming the parameter, never silently read as "all"."""

    task_type = _QueryCharField("task_type", max_length=64, pattern=SLUG)
    reason = _QueryCharField("reason", max_length=40, pattern=SLUG)
    status = forms.ChoiceField(
        required=False, choices=[("", "all"), *RunStatus.choices], error_messages=_messages("status")
    )
    assignee = _QueryCharField("assignee", max_length=150)
    sort = forms.ChoiceField(
        required=False,
        choices=[("deadline", "nearest deadline first"), ("oldest", "oldest first")],
        error_messages=_messages("sort"),
    )
    # When the open page was first drawn: the poll counts the escalations that arrived since.
    since = forms.DateTimeField(required=False, error_messages=_messages("since"))

    def clean_sort(self) -> str:
        return self.cleaned_data["sort"] or "deadline"
