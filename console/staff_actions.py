"""The staff actions, in one registry. Each action is one `StaffAction`, which owns everything
the console needs of it: its name (the URL's slug), its label, the permission it needs, the Django
form that cleans what the page posts, its confirmation (console.confirmations), what it does (a
service of console.actions or console.dead_letters, given the cleaned values), the template
snippet that draws its fields, the message shown once it is done, where the pages offer it, and
whether the queue does it to many runs at once. The views, the templates and the access-matrix
and CSRF tests read this registry and never an action's name, so adding an action is one
`register(...)` here (or in a test, with `registered(...)`):

    register(StaffAction(
        kind=Kind.RUN, name="escalate-again", label="Escalate again", permission=ACT,
        form_class=forms.ResolveRunForm, perform=lambda ctx, run, data: ...,
        confirm=lambda run, rows, step_id: Confirmation("Escalate again", [...]),
        done_message="Escalated.", offer=offer_on_run(Place.NEXT)))

The services keep their own checks (role, tenant, stale state, the audit row): the registry says
how the console reaches them, not what they may do."""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django import forms as django_forms
from django.template import Template

from compensations.models import DeadLetter
from handover import CompletedStep, Handover, HandoverRows, UncertainStep, words
from journal import attempts
from journal.models import IntentStatus, Run, RunStatus

from . import actions, confirmations, dead_letters, forms, selectors, step_edits
from .actions import ACT, BulkOutcome, ResumePreview, StaffContext
from .confirmations import Confirmation


class Kind(enum.StrEnum):
    """What an action acts on; each kind has its own URL (`handover:run_act`,
    `handover:dead_letter_act`) and its own page."""

    RUN = "run"
    DEAD_LETTER = "dead_letter"


class Place(enum.StrEnum):
    """Where a page draws an action's button."""

    ASSIGNEE = "assignee"  # beside the run's assignee
    NEXT = "next"  # under the run's next action
    COMPLETED = "completed"  # on a completed step
    UNCERTAIN = "uncertain"  # on an uncertain step
    FAILED = "failed"  # on a failed step whose call is refused now
    NOT_DONE = "not_done"  # on a not-done step (its step_id is the planned step's key)
    LETTER = "letter"  # on an open dead letter


@dataclass(frozen=True)
class RunPage:
    """What the run page has loaded (once per request) when it asks which actions to offer."""

    run: Run
    rows: HandoverRows
    handover: Handover
    resume: ResumePreview
    user: Any


@dataclass(frozen=True)
class LetterPage:
    """One dead letter on the dead-letter page, with the people it may be handed to (read once
    per page, and only if a form drawn on it asks), and the form just refused on it (its action
    and what was posted), drawn again as it was posted."""

    letter: DeadLetter
    user: Any
    people: Callable[[], list[Any]]
    refused_action: StaffAction | None = None
    refused_data: Any = None

    @property
    def staff(self) -> list[Any]:
        return self.people()

    def form_data(self, action: StaffAction) -> Any:
        return self.refused_data if action is self.refused_action else None


@dataclass(frozen=True)
class Offer:
    """One button a page draws: an action, where, on which step, and whether it can work now."""

    action: StaffAction
    place: Place
    step_id: str = ""
    text: str = ""  # the button's words when they are not the action's label
    blocked: str = ""  # why the action cannot work now: the button is drawn disabled, with this
    css: str = ""
    form: django_forms.Form | None = None  # a form drawn inline (the dead-letter page)
    prompt: str = ""  # a question the browser asks before posting (hx-confirm)

    @property
    def name(self) -> str:
        return self.action.name

    @property
    def ask_first(self) -> bool:
        return self.action.ask_first

    @property
    def button(self) -> str:
        said = self.text or self.action.label
        return f"{said}…" if self.action.ask_first else said


Perform = Callable[[StaffContext, Any, dict[str, Any]], object]
OfferRule = Callable[["StaffAction", Any], Iterable[Offer]]
# The template snippet that draws an action's fields inside its form: a template's name, or a
# Template (an action added in one place may carry its snippet with it).
Snippet = str | Template
SNIPPETS: dict[Kind, str] = {
    Kind.RUN: "handover/actions/run_fields.html",  # in the run page's confirmation dialog
    Kind.DEAD_LETTER: "handover/actions/letter_fields.html",  # inline, on each open letter
}


@dataclass(frozen=True)
class Bulk:
    """How the queue does an action to the runs ticked in it (console.actions.runs_bulk).

    - `act(ctx, run_id, state, data)` calls the action's own service for one run, with the bulk
      form's cleaned values (`colleague`, `note`) and the state of the run its row showed;
    - `check(ctx, data)` refuses the whole request (JournalError) before any run is touched;
    - `needs_note`: the form refuses the request without a note."""

    label: str  # the option of the queue's select
    done: str  # what the report says of each run done
    act: Callable[[StaffContext, Any, str, dict[str, Any]], object]
    check: Callable[[StaffContext, dict[str, Any]], object] | None = None
    needs_note: bool = False


@dataclass(frozen=True)
class StaffAction:
    """One thing staff do to a run or a dead letter, and everything the console needs to offer it.

    - `confirm` builds what the confirmation says. For a run: `confirm(run, rows, step_id)`; for a
      dead letter: `confirm(letter)`, whose title the browser asks before posting. None: a run's
      dialog says only the label, a dead letter's action posts without asking.
    - `ask_first`: the run page's button opens the confirmation; False posts at once (as "assign
      to me" does); the confirmation stays reachable at its URL.
    - `perform(ctx, obj, cleaned_data)` calls the service; it raises JournalError to refuse. For a
      run `obj` is the Run the view found in the caller's tenant; for a dead letter it is the
      letter's id, which the service looks up (and locks) in the caller's tenant.
    - `offer(action, page)` yields the buttons a page draws for it (a RunPage or a LetterPage);
      the registry only asks it for people who hold `permission`.
    - `template`: the snippet that draws its form's fields (by default its kind's, SNIPPETS).
    - `on_queue_row(run, user)`: the queue draws it, posting at once, on each row where it holds.
    - `bulk`: the queue does it to the runs ticked in it (Bulk)."""

    kind: Kind
    name: str
    label: str
    permission: str
    form_class: type[django_forms.Form]
    perform: Perform
    done_message: str
    offer: OfferRule
    confirm: Callable[..., Confirmation] | None = None
    ask_first: bool = True
    # What the form needs beyond the posted data (e.g. the people to choose from), given the run
    # (for a run action) or the LetterPage (for a dead letter's).
    form_kwargs: Callable[[Any], dict[str, Any]] | None = None
    template: Snippet = ""
    on_queue_row: Callable[[Run, Any], bool] | None = None
    bulk: Bulk | None = None
    # The dialog shows what the typed values change before they are saved (console.views.run_preview
    # builds the form with previewing=True).
    previews: bool = False

    def confirmation(self, *args: Any) -> Confirmation:
        if self.confirm is None:
            return Confirmation(self.label, button=self.label)
        return self.confirm(*args)

    @property
    def snippet(self) -> Snippet:
        return self.template or SNIPPETS[self.kind]

    def form(self, data: Any = None, **kwargs: Any) -> django_forms.Form:
        return self.form_class(data, **kwargs)


# --- the registry -----------------------------------------------------------------------------

_REGISTRY: dict[Kind, dict[str, StaffAction]] = {kind: {} for kind in Kind}


def register(action: StaffAction) -> StaffAction:
    """Add an action; its name must be new for its kind (it is a URL slug)."""
    actions_of_kind = _REGISTRY[action.kind]
    if action.name in actions_of_kind:
        raise ValueError(f"a {action.kind} action named {action.name!r} is already registered")
    actions_of_kind[action.name] = action
    return action


def unregister(action: StaffAction) -> None:
    _REGISTRY[action.kind].pop(action.name, None)


@contextlib.contextmanager
def registered(action: StaffAction) -> Iterator[StaffAction]:
    """The action registered for the duration of a block (tests add a dummy action this way)."""
    register(action)
    try:
        yield action
    finally:
        unregister(action)


def actions_of(kind: Kind) -> tuple[StaffAction, ...]:
    """Every action of a kind, in the order the pages draw them."""
    return tuple(_REGISTRY[kind].values())


def action_get(kind: Kind, name: str) -> StaffAction | None:
    return _REGISTRY[kind].get(name)


def run_actions() -> tuple[StaffAction, ...]:
    return actions_of(Kind.RUN)


def dead_letter_actions() -> tuple[StaffAction, ...]:
    return actions_of(Kind.DEAD_LETTER)


def permitted(kind: Kind, user: Any) -> Iterator[StaffAction]:
    """The actions of a kind the user's role allows, in the order the pages draw them."""
    return (action for action in actions_of(kind) if user.has_perm(action.permission))


def bulk_actions() -> dict[str, StaffAction]:
    """The run actions the queue does to many runs at once, by name (the select's values)."""
    return {action.name: action for action in run_actions() if action.bulk is not None}


def runs_bulk(
    ctx: StaffContext, action: StaffAction, *, runs: list[tuple[Any, str]], data: dict[str, Any]
) -> list[BulkOutcome]:
    """Do `action` to each of `runs` by its own service (console.actions.runs_bulk)."""
    bulk = action.bulk
    if bulk is None:
        raise ValueError(f"{action.name} is not done in bulk")
    return actions.runs_bulk(
        ctx,
        runs=runs,
        act=lambda run_id, state: bulk.act(ctx, run_id, state, data),
        done=bulk.done,
        check=lambda: bulk.check(ctx, data) if bulk.check else None,
    )


# --- what the pages offer ---------------------------------------------------------------------


def run_offers(page: RunPage) -> dict[str, Any]:
    """The buttons of the run page, by place: `assignee` and `next` are lists; `completed`,
    `uncertain` and `failed` map a step id to its list."""
    offers: dict[str, Any] = {
        Place.ASSIGNEE: [],
        Place.NEXT: [],
        Place.COMPLETED: {},
        Place.UNCERTAIN: {},
        Place.FAILED: {},
        Place.NOT_DONE: {},
    }
    for action in permitted(Kind.RUN, page.user):
        for offer in action.offer(action, page):
            if offer.step_id:
                offers[offer.place].setdefault(offer.step_id, []).append(offer)
            else:
                offers[offer.place].append(offer)
    return {str(place): value for place, value in offers.items()}


def dead_letter_offers(page: LetterPage) -> list[Offer]:
    """The forms drawn on one open dead letter."""
    return [
        offer for action in permitted(Kind.DEAD_LETTER, page.user) for offer in action.offer(action, page)
    ]


def offer_on_run(place: Place, when: Callable[[RunPage], bool] = lambda page: True) -> OfferRule:
    """Offered once on the run page, at `place`, when `when(page)` holds."""

    def offer(action: StaffAction, page: RunPage) -> Iterator[Offer]:
        if when(page):
            yield Offer(action, place)

    return offer


def _offer_assign(action: StaffAction, page: RunPage) -> Iterator[Offer]:
    if page.run.assignee_id != page.user.pk:
        yield Offer(action, Place.ASSIGNEE, text="assign to me", css="link")


def _offer_assign_to(action: StaffAction, page: RunPage) -> Iterator[Offer]:
    yield Offer(action, Place.ASSIGNEE, text="assign to a colleague", css="link")


def _offer_resume(action: StaffAction, page: RunPage) -> Iterator[Offer]:
    # Not done steps are what resuming sends; a disabled button says why it cannot work now.
    if page.handover.not_done:
        yield Offer(action, Place.NEXT, blocked="; ".join(page.resume.blockers))


def _offer_undo_step(action: StaffAction, page: RunPage) -> Iterator[Offer]:
    for item in page.handover.completed:
        # An undo that cannot be built is not offered; the page says why beside the step.
        if not item.compensation and item.undo_tool and not item.undo_blocked:
            yield Offer(
                action,
                Place.COMPLETED,
                step_id=item.step_id,
                text=words.say(words.UNDO_STEP_BUTTON, tool=words.tool_words(item.tool)),
                css="compensate",
            )


def offer_on_steps(place: Place) -> OfferRule:
    """Offered on every step of the handover's list of that place (completed or uncertain)."""

    def offer(action: StaffAction, page: RunPage) -> Iterator[Offer]:
        items: list[CompletedStep] | list[UncertainStep] = (
            page.handover.completed if place == Place.COMPLETED else page.handover.uncertain
        )
        for item in items:
            yield Offer(action, place, step_id=item.step_id)

    return offer


def _offer_allow_again(action: StaffAction, page: RunPage) -> Iterator[Offer]:
    # Only where it can work: a failed step whose call the taxonomy refuses now, in a run that
    # may still send it (journal.attempts.allowable_steps; no query when nothing failed).
    if page.run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
        return
    failed = [i for i in page.rows.intents if i.status == IntentStatus.FAILED]
    if failed:
        for step_id in attempts.allowable_steps(page.run, failed):
            yield Offer(action, Place.FAILED, step_id=step_id)


def _offer_edit_args(action: StaffAction, page: RunPage) -> Iterator[Offer]:
    # A run a person holds, on each step resuming would send whose tool declares its arguments.
    if page.run.awaiting_person:
        for item in page.handover.not_done:
            if step_edits.tool_schema(item.tool):
                yield Offer(action, Place.NOT_DONE, step_id=item.idempotency_key)


def _mark_action(name: str, *, label: str, performed: bool) -> StaffAction:
    """A person's judgement of an uncertain step: it happened, or it did not."""
    return StaffAction(
        kind=Kind.RUN,
        name=name,
        label=label,
        permission=ACT,
        form_class=forms.MarkStepForm,
        perform=lambda ctx, run, data: actions.step_mark(
            ctx,
            run_id=run.pk,
            step_id=data["step_id"],
            performed=performed,
            note=data["note"],
            state=data["state"],
        ),
        done_message=f"Marked {'performed' if performed else 'not performed'}.",
        confirm=confirmations.mark(performed=performed),
        offer=offer_on_steps(Place.UNCERTAIN),
    )


def letter_form(action: StaffAction, page: LetterPage) -> django_forms.Form:
    """An action's form as drawn on one letter (bound to what was posted, if it was refused)."""
    kwargs = action.form_kwargs(page) if action.form_kwargs else {}
    return action.form(page.form_data(action), auto_id=f"dl-{page.letter.pk}-{action.name}-%s", **kwargs)


def offer_on_open_letter(when: Callable[[LetterPage], bool] = lambda page: True) -> OfferRule:
    """Offered, with its form, on each open dead letter where `when(page)` holds."""

    def offer(action: StaffAction, page: LetterPage) -> Iterator[Offer]:
        if page.letter.resolved_at is None and when(page):
            prompt = action.confirm(page.letter).title if action.confirm else ""
            yield Offer(action, Place.LETTER, form=letter_form(action, page), prompt=prompt)

    return offer


def _retry_prompt(letter: DeadLetter) -> Confirmation:
    intent = letter.compensation.intent
    tool = words.tool_words(intent.tool) if intent else "the compensation"
    return Confirmation(f"Send {tool} again? It is a new attempt, and it may act on the world.")


def _check_colleague(ctx: StaffContext, data: dict[str, Any]) -> None:
    if data["colleague"] is not None:
        actions.staff_member(ctx.tenant, data["colleague"], field="colleague")


# The console's own actions, in the order the pages draw them.
CONSOLE_ACTIONS = (
    StaffAction(
        kind=Kind.RUN,
        name="assign",
        label="Assign to me",
        permission=ACT,
        form_class=forms.AssignForm,
        perform=lambda ctx, run, data: actions.run_assign(ctx, run_id=run.pk, state=data["state"]),
        done_message="The run is assigned to you.",
        confirm=confirmations.assign_to_me,
        ask_first=False,
        offer=_offer_assign,
        on_queue_row=lambda run, user: run.assignee_id != user.pk,
        # From the queue, to the person acting or to the colleague chosen beside it.
        bulk=Bulk(
            label="Assign",
            done="assigned",
            act=lambda ctx, run_id, state, data: actions.run_assign(
                ctx, run_id=run_id, state=state, assignee_id=data["colleague"]
            ),
            check=_check_colleague,
        ),
    ),
    StaffAction(
        kind=Kind.RUN,
        name="assign-to",
        label="Assign to a colleague",
        permission=ACT,
        form_class=forms.AssignToForm,
        form_kwargs=lambda run: {"staff": selectors.assignable_staff(tenant=run.tenant)},
        perform=lambda ctx, run, data: actions.run_assign(
            ctx, run_id=run.pk, state=data["state"], assignee_id=data["assignee"]
        ),
        done_message="The run is assigned.",
        confirm=confirmations.assign_to_colleague,
        offer=_offer_assign_to,
    ),
    StaffAction(
        kind=Kind.RUN,
        name="resume",
        label="Resume",
        permission=ACT,
        form_class=forms.ResumeForm,
        perform=lambda ctx, run, data: actions.run_resume_request(ctx, run_id=run.pk, state=data["state"]),
        done_message="Resumption requested; the page updates as the steps are sent.",
        confirm=confirmations.resume,
        offer=_offer_resume,
    ),
    StaffAction(
        kind=Kind.RUN,
        name="compensate-run",
        label="Compensate the run",
        permission=ACT,
        form_class=forms.CompensateRunForm,
        perform=lambda ctx, run, data: actions.run_compensate_request(
            ctx, run_id=run.pk, state=data["state"]
        ),
        done_message="Compensation of the run requested; the page updates as each step is undone.",
        confirm=confirmations.compensate_run,
        offer=offer_on_run(
            Place.NEXT,
            lambda page: bool(page.handover.next_action.compensations_available),
        ),
    ),
    StaffAction(
        kind=Kind.RUN,
        name="customer-told",
        label="Add what the customer was told",
        permission=ACT,
        form_class=forms.CustomerToldForm,
        perform=lambda ctx, run, data: actions.customer_told_add(
            ctx, run_id=run.pk, channel=data["channel"], body=data["body"], state=data["state"]
        ),
        done_message="Recorded what the customer was told.",
        confirm=confirmations.customer_told,
        offer=offer_on_run(Place.NEXT),
    ),
    StaffAction(
        kind=Kind.RUN,
        name="resolve",
        label="Resolve",
        permission=ACT,
        form_class=forms.ResolveRunForm,
        perform=lambda ctx, run, data: actions.run_resolve(
            ctx, run_id=run.pk, note=data["note"], state=data["state"]
        ),
        done_message="Resolved.",
        confirm=confirmations.resolve,
        offer=offer_on_run(Place.NEXT, lambda page: page.run.awaiting_person or page.run.status == "running"),
        bulk=Bulk(
            label="Resolve",
            done="resolved",
            act=lambda ctx, run_id, state, data: actions.run_resolve(
                ctx, run_id=run_id, note=data["note"], state=state
            ),
            check=lambda ctx, data: actions.note_clean(data["note"], required=True),
            needs_note=True,
        ),
    ),
    StaffAction(
        kind=Kind.RUN,
        name="compensate-step",
        label="Compensate a step",
        permission=ACT,
        form_class=forms.CompensateStepForm,
        perform=lambda ctx, run, data: actions.step_compensate(
            ctx, run_id=run.pk, step_id=data["step_id"], state=data["state"]
        ),
        done_message="Compensation requested; the page updates when the worker has done it.",
        confirm=confirmations.compensate_step,
        offer=_offer_undo_step,
    ),
    StaffAction(
        kind=Kind.RUN,
        name="retry-lookup",
        label="Retry the lookup",
        permission=ACT,
        form_class=forms.RetryLookupForm,
        perform=lambda ctx, run, data: actions.step_lookup_retry(
            ctx, run_id=run.pk, step_id=data["step_id"], state=data["state"]
        ),
        done_message="Lookup requested; the page updates when the downstream answers.",
        confirm=confirmations.retry_lookup,
        offer=offer_on_steps(Place.UNCERTAIN),
    ),
    _mark_action("mark-performed", label="It happened", performed=True),
    _mark_action("mark-not-performed", label="It did not happen", performed=False),
    StaffAction(
        kind=Kind.RUN,
        name="allow-again",
        label="Allow this call again",
        permission=ACT,
        form_class=forms.StepActionForm,
        perform=lambda ctx, run, data: actions.step_attempt_allow(
            ctx, run_id=run.pk, step_id=data["step_id"], state=data["state"]
        ),
        done_message="Allowed: the agent's next such call is admitted once.",
        confirm=confirmations.allow_again,
        offer=_offer_allow_again,
    ),
    StaffAction(
        kind=Kind.RUN,
        name="edit-step",
        label="Edit arguments",
        permission=ACT,
        form_class=step_edits.EditStepArgsForm,
        form_kwargs=step_edits.form_kwargs,
        perform=lambda ctx, run, data: actions.step_args_edit_request(
            ctx, run_id=run.pk, step_key=data["step_id"], args=data["args"], state=data["state"]
        ),
        done_message="Arguments changed; resuming sends the step with them, under its new key.",
        confirm=step_edits.confirm,
        offer=_offer_edit_args,
        template="handover/actions/edit_step_fields.html",
        previews=True,
    ),
    # The dead-letter queue.
    StaffAction(
        kind=Kind.DEAD_LETTER,
        name="take",
        label="Take ownership",
        permission=ACT,
        form_class=forms.DeadLetterTakeForm,
        perform=lambda ctx, letter_id, data: dead_letters.dead_letter_take(
            ctx, dead_letter_id=letter_id, state=data.get("state", "")
        ),
        done_message="You own this dead letter now.",
        ask_first=False,  # its form is on the page and posts at once
        offer=offer_on_open_letter(lambda page: page.letter.owner_id != page.user.pk),
    ),
    StaffAction(
        kind=Kind.DEAD_LETTER,
        name="assign",
        label="Assign",
        permission=dead_letters.ASSIGN,
        form_class=forms.DeadLetterAssignForm,
        form_kwargs=lambda page: {"staff": page.staff, "initial": {"owner": page.letter.owner_id}},
        perform=lambda ctx, letter_id, data: dead_letters.dead_letter_assign(
            ctx, dead_letter_id=letter_id, owner_id=data["owner"], state=data.get("state", "")
        ),
        done_message="Assigned.",
        ask_first=False,  # its form is on the page and posts at once
        offer=offer_on_open_letter(),
    ),
    StaffAction(
        kind=Kind.DEAD_LETTER,
        name="retry",
        label="Retry",
        permission=ACT,
        form_class=forms.DeadLetterRetryForm,
        perform=lambda ctx, letter_id, data: dead_letters.dead_letter_retry(
            ctx, dead_letter_id=letter_id, note=data["note"], state=data.get("state", "")
        ),
        # What came of it is said from the compensation (console.dead_letters.retry_result_words).
        done_message="Retry queued: this page updates when the worker has sent it.",
        # The dead-letter page asks first in a dialog (console.dead_letter_views.dead_letter_confirm).
        ask_first=True,
        confirm=_retry_prompt,
        offer=offer_on_open_letter(),
    ),
    StaffAction(
        kind=Kind.DEAD_LETTER,
        name="resolve",
        label="Resolve",
        permission=ACT,
        form_class=forms.DeadLetterResolveForm,
        perform=lambda ctx, letter_id, data: dead_letters.dead_letter_resolve(
            ctx, dead_letter_id=letter_id, note=data["note"], state=data.get("state", "")
        ),
        done_message="Resolved: your note is kept on the letter.",
        ask_first=False,  # its form is on the page and posts at once
        offer=offer_on_open_letter(),
    ),
)
for _action in CONSOLE_ACTIONS:
    register(_action)
