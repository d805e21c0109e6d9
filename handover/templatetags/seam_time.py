"""How long ago something happened, in the words staff read on the queue and run lists."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

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


def _span(seconds: float) -> str:
    """A span in the two largest units staff read at a glance: "2 d 3 h", "3 h 05 min", "12 min"."""
    minutes = int(seconds // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min"


@register.filter
def countdown(deadline: datetime | None, now: datetime | None = None) -> str:
    """What is left before a deadline ("in 3 h 05 min"), or how long ago it passed ("passed
    12 min ago"); "none" for no deadline."""
    if deadline is None:
        return "none"
    left = (deadline - (now or timezone.now())).total_seconds()
    words = "under a minute" if abs(left) < 60 else _span(abs(left))
    return f"in {words}" if left >= 0 else f"passed {words} ago"
