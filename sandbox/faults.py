"""The faults the sandbox can inject, parsed from the `X-Sandbox-Fault` header or a stored rule:

- `fail_before` — answer 503 without acting;
- `drop_after` — act, commit, then close the connection without answering;
- `slow:<ms>` — act, then answer after <ms> milliseconds;
- `unknown_lookup` — a key lookup answers {"status": "unknown"} (lookups only);
- `key_conflict` — answer 409 without acting, as a provider does that holds the call's key for
  another request (calls only, not lookups)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InvalidRequest

FAIL_BEFORE = "fail_before"
DROP_AFTER = "drop_after"
SLOW = "slow"
UNKNOWN_LOOKUP = "unknown_lookup"
KEY_CONFLICT = "key_conflict"
MAX_SLOW_MS = 60_000
LOOKUP_OPERATION = "lookup"

_SLOW = re.compile(r"^slow:(\d{1,6})$")


@dataclass(frozen=True)
class Fault:
    kind: str
    ms: int = 0

    def __str__(self) -> str:
        return f"{SLOW}:{self.ms}" if self.kind == SLOW else self.kind

    @classmethod
    def parse(cls, text: str, *, field: str = "fault") -> Fault:
        text = text.strip()
        if text in (FAIL_BEFORE, DROP_AFTER, UNKNOWN_LOOKUP, KEY_CONFLICT):
            return cls(kind=text)
        match = _SLOW.match(text)
        if match and int(match.group(1)) <= MAX_SLOW_MS:
            return cls(kind=SLOW, ms=int(match.group(1)))
        raise InvalidRequest(
            "invalid_fault",
            f"unknown fault {text[:60]!r}: expected fail_before, drop_after, unknown_lookup, key_conflict or "
            f"slow:<ms> with ms <= {MAX_SLOW_MS}",
            field=field,
        )

    def applies_to(self, operation: str) -> bool:
        """`unknown_lookup` means something only to a key lookup, `key_conflict` only to a call;
        every other fault to any call."""
        if self.kind == UNKNOWN_LOOKUP:
            return operation == LOOKUP_OPERATION
        if self.kind == KEY_CONFLICT:
            return operation != LOOKUP_OPERATION
        return True
