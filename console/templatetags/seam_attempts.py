"""Template filters of the run's attempts counted apart (handover.attempts)."""

from __future__ import annotations

from typing import Any

from django import template

from handover.attempts import is_looping

register = template.Library()


@register.filter
def looping(outcome_why: Any) -> bool:
    """Whether the run was stopped for looping on a failing call: `run.outcome_why|looping`, read
    from the row the list already holds (no query per row)."""
    return is_looping(outcome_why if isinstance(outcome_why, dict) else None)
