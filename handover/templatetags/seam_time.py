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
