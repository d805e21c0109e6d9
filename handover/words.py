"""Plain words for what the rows store in the engine's terms: error text without protocol codes
or keys, a step id as the step it names, a process as what it does. The pages use them through
handover.templatetags.seam_words; messages built in Python (a refusal's list of changes) use them
directly."""

from __future__ import annotations

import re

from compensations.tasks import EXECUTOR
from reconciliation.tasks import SWEEP_ACTOR

# The processes that act on runs, as people call them.
PROCESS_WORDS = {
    EXECUTOR.name: "the undo worker",
    SWEEP_ACTOR: "reconciliation",
    "manage.py reconcile": "reconciliation",
}
ERROR_CLASS_WORDS = {
    "conflict": "refused",
    "permanent": "refused for good",
    "invalid_input": "refused as bad input",
    "transient": "a passing fault",
    "ambiguous": "no answer",
    "bug": "a fault in Seam",
}
_HTTP = re.compile(r"\bHTTP \d{3}:\s*")
_KEY_IN_PARENS = re.compile(r"\s*\(key [0-9a-f]{16,}\)")
_LONG_HEX = re.compile(r"\b[0-9a-f]{32,}\b")
_CLASS_IN_PARENS = re.compile(r"\((" + "|".join(ERROR_CLASS_WORDS) + r")\)")
_STEP_ID = re.compile(r"^[0-9a-f-]{36}:(\d+):([a-z0-9_]+)$")


def plain_text(text: str) -> str:
    """Stored error or outcome text without HTTP status codes or idempotency keys."""
    text = _HTTP.sub("", text or "")
    text = _KEY_IN_PARENS.sub("", text)
    text = _LONG_HEX.sub(lambda m: m[0][:8] + "…", text)
    return _CLASS_IN_PARENS.sub(lambda m: f"({ERROR_CLASS_WORDS[m[1]]})", text)


def step_words(step_id: str) -> str:
    """`<run id>:3:issue_credit` as "step 3, issue credit"."""
    match = _STEP_ID.match(step_id or "")
    if match is None:
        return step_id or ""
    return f"step {match[1]}, {match[2].replace('_', ' ')}"


def who(name: str) -> str:
    """A process's name as what it does; a person's or an agent's as it is."""
    return PROCESS_WORDS.get(name, name)
