"""Template filters of the staff-action registry's offers (console.staff_actions.run_offers)."""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


@register.filter
def for_step(offers_by_step: dict[str, list[Any]], step_id: str) -> list[Any]:
    """The buttons offered on one step: `offers.completed|for_step:item.step_id`."""
    return offers_by_step.get(step_id, [])
