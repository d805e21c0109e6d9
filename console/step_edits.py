"""Edit arguments…: what the console needs to let a person correct a not-done step's arguments
before resuming (the service is console.actions.step_args_edit_request over journal.step_edits).

- EditStepArgsForm draws one labelled field per property of the tool's JSON schema (a JSON
  textarea for an object, an array or a property of no single type), parses what is typed back
  into arguments and refuses, naming the field (`args.amount`), what the schema refuses;
- `diff` lists each argument old → new, which the dialog shows before anything is saved: the
  form is saved only with the digest of the arguments whose diff the person was shown
  (`previewed`), so what is saved is what was seen;
- `tool_schema` says whether a tool has arguments to edit (console.staff_actions offers the
  action on each not-done step of a run waiting for a person whose tool has);
- `confirm` is the dialog's title and what saving does."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from handover import HandoverRows, words
from journal import services as journal
from journal.keys import canonical_json
from journal.models import Run
from journal.selectors import plan_with_keys
from journal.step_edits import step_args_check, step_editable
from tools.registry import find_tool

from .confirmations import Confirmation
from .forms import StepActionForm

# JSON Schema types drawn as one line of text; anything else is typed as JSON.
SCALAR_TYPES = ("string", "integer", "number", "boolean")
MAX_FIELD_CHARS = 20_000


def tool_schema(tool: str) -> Mapping[str, Any]:
    """The tool's argument properties, or {} when the tool declares none (nothing to edit)."""
    spec = find_tool(tool)
    if spec is None:
        return {}
    properties = spec.args_schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def tool_named(tool: str) -> str:
    """The tool as a sentence names it (handover.words): its declared label, quoted."""
    return words.tool_words(tool)


def _kind(prop: Mapping[str, Any]) -> str:
    kind = prop.get("type")
    if "enum" in prop and all(isinstance(v, str) for v in prop["enum"]):
        return "enum"
    return kind if isinstance(kind, str) and kind in SCALAR_TYPES else "json"


def _shown(value: Any, kind: str) -> str:
    """An argument as its field shows it."""
    if value is None and kind != "json":
        return ""
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("string", "enum") and isinstance(value, str):
        return value
    if kind in ("integer", "number") and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return canonical_json(value)


def _field(name: str, prop: Mapping[str, Any], *, required: bool) -> forms.Field:
    kind = _kind(prop)
    label = str(prop.get("title") or name) + ("" if required else " (optional)")
    common: dict[str, Any] = {
        "label": label,
        "required": False,
        "help_text": str(prop.get("description", "")),
    }
    if kind == "enum":
        choices = [("", "—")] if not required else []
        return forms.ChoiceField(choices=[*choices, *((v, v) for v in prop["enum"])], **common)
    if kind == "boolean":
        choices = [("", "—")] if not required else []
        return forms.ChoiceField(choices=[*choices, ("true", "true"), ("false", "false")], **common)
    if kind == "json":
        return forms.CharField(
            max_length=MAX_FIELD_CHARS, strip=False, widget=forms.Textarea(attrs={"rows": 3}), **common
        )
    attrs = (
        {"inputmode": "numeric" if kind == "integer" else "decimal"} if kind in ("integer", "number") else {}
    )
    return forms.CharField(max_length=MAX_FIELD_CHARS, widget=forms.TextInput(attrs=attrs), **common)


def _parsed(text: str, kind: str, where: str) -> Any:
    """What a field holds as an argument's value, or ValidationError naming the field."""
    if kind in ("string", "enum"):
        return text
    if kind == "boolean":
        return text == "true"
    if kind == "integer":
        try:
            return int(text.strip())
        except ValueError:
            raise ValidationError(f"{where} must be a whole number; got {text!r}") from None
    if kind == "number":
        try:
            number = float(text.strip())
        except ValueError:
            raise ValidationError(f"{where} must be a number; got {text!r}") from None
        return int(number) if number.is_integer() else number
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{where} is not valid JSON: {exc.msg} (line {exc.lineno})") from None


@dataclass(frozen=True)
class ArgChange:
    """One argument in the diff: its name and its value before and after, as the field shows it."""

    name: str
    old: str
    new: str

    @property
    def changed(self) -> bool:
        return self.old != self.new


def args_digest(args: Mapping[str, Any]) -> str:
    """What the form carries once its diff was shown: saving other arguments is refused."""
    return hashlib.sha256(canonical_json(dict(args)).encode()).hexdigest()[:32]


class EditStepArgsForm(StepActionForm):
    """The step's arguments, one field per schema property. `step_id` carries the planned step's
    key (a step never attempted has no step id). Built with the run (its plan gives the step
    and its current arguments); `previewing`: the diff is being shown, not saved."""

    previewed = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)

    def __init__(self, data: Any = None, *, run: Run, previewing: bool = False, **kwargs: Any) -> None:
        super().__init__(data, **kwargs)
        self.run = run
        self.previewing = previewing
        self.new_args: dict[str, Any] | None = None
        key = (data or {}).get("step_id") if data is not None else self.initial.get("step_id")
        self.step = next((s for s in plan_with_keys(run) if s["key"] == key), None)
        self.old_args: dict[str, Any] = dict(self.step.get("args", {})) if self.step else {}
        self.kinds: dict[str, str] = {}
        self.required_args: set[str] = set()
        if self.step is None:
            return
        properties = tool_schema(self.step["tool"])
        spec = find_tool(self.step["tool"])
        self.required_args = required = set(spec.args_schema.get("required", ())) if spec else set()
        for name, prop in properties.items():
            prop = prop if isinstance(prop, Mapping) else {}
            field_name = f"args.{name}"
            self.kinds[name] = _kind(prop)
            self.fields[field_name] = _field(name, prop, required=name in required)
            if name in self.old_args:
                recorded = _shown(self.old_args[name], self.kinds[name])
                self.initial.setdefault(field_name, recorded)
                # The dialog asks before discarding only what differs from the recorded value.
                self.fields[field_name].widget.attrs["data-recorded"] = recorded

    def arg_fields(self) -> list[forms.BoundField]:
        return [self[f"args.{name}"] for name in self.kinds]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned: dict[str, Any] = self.cleaned_data
        if self.step is None:
            raise ValidationError("the run plans no such step; reload the page", code="step")
        args = {k: v for k, v in self.old_args.items() if k not in self.kinds}
        for name, kind in self.kinds.items():
            where = f"args.{name}"
            text = cleaned.get(where) or ""
            if text.strip() == "" and kind not in ("string", "enum"):
                if name in self.required_args:
                    self.add_error(where, f"{where} is required")
                continue
            if text == "" and name not in self.required_args:
                continue
            try:
                args[name] = _parsed(text, kind, where)
            except ValidationError as exc:
                self.add_error(where, exc)
        if self.errors:
            return cleaned
        self._check(args)
        cleaned["args"] = self.new_args = args
        return cleaned

    def _check(self, args: dict[str, Any]) -> None:
        """The journal's own checks (journal.step_edits.step_args_check): the schema's refusal
        is put on its field. A refusal of the run's state is left to the service (409)."""
        try:
            step_args_check(run=self.run, step_key=self.step["key"] if self.step else "", args=args)
        except journal.InvalidInput as exc:
            field = exc.field if exc.field in self.fields else None
            self.add_error(field, exc.message)
            return
        except journal.JournalError:
            pass  # the run or step is not editable now: the service refuses it, with what changed
        if not self.previewing and self.data.get("previewed") != args_digest(args):
            self.add_error(
                "previewed", "look at the changes below before saving: they are what will be saved"
            )

    @property
    def digest(self) -> str:
        return args_digest(self.new_args) if self.new_args is not None else ""

    @property
    def diff(self) -> list[ArgChange]:
        """Each argument old → new, for what was typed (empty until it parses)."""
        if self.new_args is None:
            return []
        names = [*self.kinds, *(k for k in {**self.old_args, **self.new_args} if k not in self.kinds)]
        return [
            ArgChange(
                name=name,
                old=_shown(self.old_args[name], self.kinds.get(name, "json"))
                if name in self.old_args
                else "—",
                new=_shown(self.new_args[name], self.kinds.get(name, "json"))
                if name in self.new_args
                else "—",
            )
            for name in names
            if name in self.old_args or name in self.new_args
        ]


def form_kwargs(run: Run) -> dict[str, Any]:
    return {"run": run}


def confirm(run: Run, rows: HandoverRows, step_key: str) -> Confirmation:
    """What saving does; what stops it now (journal.step_edits.step_editable) as its blockers."""
    try:
        index, planned = step_editable(run=run, step_key=step_key)
    except journal.JournalError as refused:
        return Confirmation("Edit a step's arguments", blockers=[refused.message], step_id=step_key)
    step = planned[index]
    detail = f" ({step['detail']})" if step.get("detail") else ""
    return Confirmation(
        f"Edit the arguments of {tool_named(step['tool'])}{detail}",
        [
            "change the arguments this step will be sent with when the run is resumed",
            "give the step a new key, derived from the new arguments (the old key is not reused)",
            "record the change, old and new, in the run's timeline and audit",
        ],
        ["Nothing is sent now: the step is sent when you resume the run."],
        step_id=step_key,
        button="Save the changes",
    )
