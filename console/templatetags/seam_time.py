"""How long ago something happened, in the words staff read on the queue and run lists."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.timesince import timesince

from console.dates import DateInput
from handover import words

register = template.Library()


@register.filter
def elapsed(value: datetime | None, now: datetime | None = None) -> str:
    """Time since `value`: "under a minute" where Django's timesince would say "0 minutes" (a run
    that just died looks as if it had waited no time at all), "never" for no time."""
    if value is None:
        return "never"
    now = now or timezone.now()
    if now - value < timedelta(minutes=1):
        return "under a minute"
    return timesince(value, now)


# One way of writing a moment on every page, the handover's prose and receipts included:
# handover.words.when_words ("2026-12-01 21:43 UTC"), here in a <time> element carrying the
# exact instant.
when_text = words.when_words


@register.filter
def when(value: datetime | None) -> str:
    if value is None:
        return "—"
    return format_html('<time datetime="{}">{}</time>', value.isoformat(), when_text(value))


def _span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 1:
        return "under a minute"
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} d"] if days else []
    if hours:
        parts.append(f"{hours} h")
    if minutes and not days:
        parts.append(f"{minutes} min")
    return " ".join(parts)


def countdown_text(deadline: datetime, now: datetime | None = None) -> str:
    """ "3 h 20 min left" before the deadline, "passed 12 min ago" after it."""
    now = now or timezone.now()
    if deadline > now:
        return f"{_span(deadline - now)} left"
    return f"passed {_span(now - deadline)} ago"


@register.filter
def countdown(deadline: datetime | None, now: datetime | None = None) -> str:
    """A deadline as time left, with the moment itself in the one date format beside it."""
    if deadline is None:
        return "none"
    now = now or timezone.now()
    css = "countdown passed" if deadline <= now else "countdown"
    return format_html(
        '<time class="{}" datetime="{}" title="{}">{}</time> <span class="muted">({})</span>',
        css,
        deadline.isoformat(),
        when_text(deadline),
        countdown_text(deadline, now),
        when_text(deadline),
    )


@register.filter
def typed_date(value: date | None, date_input: DateInput | None) -> str:
    """A filter's date as the person types it (console.dates): "03/12/2026" in en-GB."""
    return (date_input or DateInput()).show(value)
