"""The pages' filters of handover.words: plain words for what the rows store in the engine's
terms. The raw value stays reachable behind a disclosure wherever a page shows it."""

from __future__ import annotations

from django import template

from handover import why_words, words
from journal.models import Intent

register = template.Library()


@register.filter
def plain(text: str) -> str:
    """Stored error or outcome text without HTTP status codes or idempotency keys."""
    return words.plain_text(str(text or ""))


@register.filter
def step_words(step_id: str) -> str:
    """`<run id>:3:issue_credit` as "step 3, “Issue a credit”"."""
    return words.step_words(step_id)


@register.filter
def tool_label(tool: str) -> str:
    """A tool by its declared label: `cancel_pickup` as "Cancel the pickup"."""
    return words.tool_label(str(tool or ""))


@register.filter
def tool_words(tool: str) -> str:
    """A tool as a sentence names it: its label in quotes."""
    return words.tool_words(str(tool or ""))


@register.filter
def who(name: str) -> str:
    """A process's name as what it does; a person's or an agent's as it is."""
    return words.who(name)


@register.filter
def plain_class(error_class: str) -> str:
    """An error class (conflict, transient, …) in words."""
    return words.error_class_words(error_class)


@register.filter
def call_said(intent: Intent) -> str:
    """What the run's record says of a call: what settled it when its runtime did not (a
    lookup, a person), else what the tool said."""
    return why_words.call_verdict_words(intent)
