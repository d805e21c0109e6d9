"""What the customer was told, recorded with its journal event, so that the next person's message
stays consistent with it. A message may name the run's steps whose effects it reports."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from .durability import durable
from .errors import InvalidInput
from .events import Actor, event_record
from .models import (
    CustomerMessage,
    Intent,
    JournalEvent,
    Run,
)
from .validation import MAX_MESSAGE_CHARS, check_time, clean_text

# --- what the customer was told ---------------------------------------------------------------


@dataclass(frozen=True)
class MessageInput:
    channel: str
    body: str


def customer_message_validate(*, channel: Any, body: Any) -> MessageInput:
    if channel not in CustomerMessage.Channel.values:
        raise InvalidInput(
            f"channel must be one of {', '.join(CustomerMessage.Channel.values)}", field="channel"
        )
    return MessageInput(
        channel=channel, body=clean_text(body, field="body", limit=MAX_MESSAGE_CHARS, required=True)
    )


def customer_message_about(*, run: Run, about_steps: Any) -> list[str]:
    """The step ids a message reports, each one a step of this run (InvalidInput otherwise): a
    message can only be linked to steps that exist, so a flag on it is never a guess."""
    if about_steps is None:
        return []
    if not isinstance(about_steps, list) or not all(isinstance(s, str) for s in about_steps):
        raise InvalidInput("about_steps must be a list of step ids", field="about_steps")
    wanted = list(dict.fromkeys(about_steps))
    known = set(Intent.objects.filter(run=run, step_id__in=wanted).values_list("step_id", flat=True))
    unknown = [s for s in wanted if s not in known]
    if unknown:
        raise InvalidInput(f"about_steps: no step {unknown[0]!r} in this run", field="about_steps")
    return wanted


def customer_message_insert(
    *,
    run: Run,
    channel: str,
    body: str,
    actor: Actor,
    told_at: datetime | None = None,
    about_steps: list[str] | None = None,
) -> CustomerMessage:
    """The message row and its journal event, inside the caller's transaction."""
    message = CustomerMessage.objects.create(
        run=run,
        channel=channel,
        body=body,
        told_at=told_at or timezone.now(),
        about_steps=customer_message_about(run=run, about_steps=about_steps),
    )
    event_record(
        run=run,
        kind=JournalEvent.Kind.CUSTOMER_TOLD,
        actor=actor,
        at=timezone.now(),
        data={"channel": channel, "message_id": message.pk},
    )
    return message


def customer_message_record(
    *,
    run: Run,
    channel: str,
    body: str,
    told_at: datetime | None = None,
    about_steps: list[str] | None = None,
    actor: Actor,
) -> CustomerMessage:
    """Record what the customer has been told, so the next person's message stays consistent;
    `about_steps` names the run's steps whose effects the message reports."""
    message = customer_message_validate(channel=channel, body=body)
    told_at = told_at or timezone.now()
    # A few minutes ahead is a clock's skew; more is not when anyone was told.
    check_time(told_at, field="told_at", horizon=timedelta(minutes=10))
    with durable():
        return customer_message_insert(
            run=run,
            channel=message.channel,
            body=message.body,
            actor=actor,
            told_at=told_at,
            about_steps=about_steps,
        )
