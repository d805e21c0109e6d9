"""Canonical arguments and the idempotency key derived from an intent.

The key is a function of what the call is meant to do, never of the attempt: the same intent
retried (by the same process, a restarted one, or a second agent) derives the same key, so the
downstream system and our own table both see one effect. An `occurrence` number separates an
identical effect that a run legitimately wants twice."""

from __future__ import annotations

import functools
import hashlib
import json
import math
from typing import Any

KEY_SCHEME = "seam-v1"
# Deeper than any real tool's arguments; bounds the recursion below (and PostgreSQL's jsonb).
MAX_DEPTH = 64


class NotCanonicalisable(ValueError):
    """The arguments hold something JSON cannot carry faithfully (NaN, a set, an object...)."""


def _check_text(text: str, where: str) -> None:
    # PostgreSQL's jsonb cannot store U+0000, and a lone surrogate (JSON's "\\ud800") is not
    # text at all: refuse both here rather than fail at the insert or while hashing.
    if "\x00" in text:
        raise NotCanonicalisable(f"{where} contains a NUL character (U+0000)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise NotCanonicalisable(f"{where} contains an unpaired surrogate ({exc.reason})") from None


def _normalise(value: Any, path: str, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise NotCanonicalisable(f"{path or 'args'} is nested more than {MAX_DEPTH} levels deep")
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        _check_text(value, path or "args")
        return value
    if isinstance(value, float):
        return _normalise_number(value, path)
    if isinstance(value, dict):
        return _normalise_object(value, path, depth)
    if isinstance(value, (list, tuple)):
        return [_normalise(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    raise NotCanonicalisable(f"{path or 'args'} is a {type(value).__name__}; arguments must be JSON values")


def _normalise_number(value: float, path: str) -> int | float:
    if not math.isfinite(value):
        raise NotCanonicalisable(f"{path or 'args'} is {value!r}; only finite numbers are allowed")
    # JSON has one number type: 2 and 2.0 are the same argument and must give the same key.
    return int(value) if value.is_integer() else value


def _normalise_object(value: dict[Any, Any], path: str, depth: int) -> dict[str, Any]:
    out = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise NotCanonicalisable(f"{path or 'args'} has a non-string key {key!r}")
        _check_text(key, f"a key of {path or 'args'}")
        out[key] = _normalise(item, f"{path}.{key}" if path else key, depth + 1)
    return out


def canonical_args(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments as stored and hashed: JSON values only, integral floats as integers."""
    if not isinstance(args, dict):
        raise NotCanonicalisable("args must be a JSON object")
    normalised: dict[str, Any] = _normalise(args, "")
    return normalised


# One encoder for every call: json.dumps with options builds a new JSONEncoder each time, which
# is a measurable part of a journaled call. Encoding keeps no state between calls.
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no insignificant whitespace, UTF-8 kept as is."""
    return _CANONICAL_ENCODER.encode(value)


def idempotency_key(
    *,
    key_namespace: str,
    run_id: str,
    tool: str,
    args: dict[str, Any],
    policy_version: str,
    occurrence: int = 0,
) -> str:
    """sha256 over the intent's identity. Arguments are canonicalised first, so key order and
    2-versus-2.0 do not change it; anything else that differs does."""
    return idempotency_key_of_json(
        key_namespace=key_namespace,
        run_id=run_id,
        tool=tool,
        args_json=canonical_json(canonical_args(args)),
        policy_version=policy_version,
        occurrence=occurrence,
    )


def idempotency_key_of_json(
    *, key_namespace: str, run_id: str, tool: str, args_json: str, policy_version: str, occurrence: int = 0
) -> str:
    """idempotency_key for arguments already canonicalised and serialised by canonical_json: the
    journal's hot path serialises them once, for the key, the size limit and the row. The
    material is spelled exactly as canonical_json spells the list (tests/journal/test_keys.py)."""
    material = (
        f"{_key_head(key_namespace, str(run_id), tool)},{args_json},{_key_tail(policy_version, occurrence)}"
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


# The material's parts before and after the arguments repeat across a run's calls; spelled once.
@functools.lru_cache(maxsize=4096)
def _key_head(key_namespace: str, run_id: str, tool: str) -> str:
    return canonical_json([KEY_SCHEME, key_namespace, run_id, tool])[:-1]  # '[...' without ']'


@functools.lru_cache(maxsize=256, typed=True)  # True, 1 and 1.0 are spelled differently
def _key_tail(policy_version: str, occurrence: int) -> str:
    return canonical_json([policy_version, occurrence])[1:]  # '...]' without '['


def step_id_of(run_id: str, turn: int, tool: str, occurrence: int) -> str:
    """The name of one step of a run: its turn and tool, and the occurrence when a turn calls
    the same tool more than once."""
    return f"{run_id}:{turn}:{tool}:{occurrence}" if occurrence else f"{run_id}:{turn}:{tool}"
