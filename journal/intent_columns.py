"""The intent row's columns as the journal's own statements write and read them, declared once.

journal.sql builds its statements (the intent's insert, the outcome's settles, the agent's
evidence, and each one's "as caller" variant) from these tuples, and journal.intents and
journal.outcomes build the Intent they return from the same names. The model (journal.models.
Intent) stays the schema's source; this module says which of its columns each statement binds.

Adding an intent column touches the model, its migration and, only if a statement must bind it,
the tuple of that statement here. A column no statement binds (as reconciliation's lookup
bookkeeping) must have a `db_default`, or be nullable and NULL by default: the insert leaves it
to the database, and every statement that answers the row reads it back (UNBOUND, derived from
the model, holds it; tests/journal/test_intent_columns.py checks both)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

from django.db.models import JSONField

from .models import Intent, IntentStatus

# What recording an intent binds, in the order INSERT_INTENT takes its parameters, each with
# the type PostgreSQL is told (it cannot infer a parameter's type inside INSERT ... SELECT). The
# run is bound apart, by its id, since the statement checks it.
INTENT_BOUND: Final[tuple[tuple[str, str], ...]] = (
    ("step_id", "text"),
    ("turn", "integer"),
    ("tool", "text"),
    ("args", "jsonb"),
    ("occurrence", "integer"),
    ("idempotency_key", "text"),
    ("intended_at", "timestamptz"),
)

# What an outcome writes, in the order journal.sql.settled_columns binds them.
OUTCOME_BOUND: Final[tuple[tuple[str, str], ...]] = (
    ("status", "text"),
    ("error_class", "text"),
    ("outcome_summary", "text"),
    ("receipt", "jsonb"),
    ("request_id", "text"),
    ("settled_at", "timestamptz"),
)

# What an agent's evidence of an unknown effect writes on the open row: an outcome's columns but
# its status and time, which stay open.
EVIDENCE_BOUND: Final[tuple[tuple[str, str], ...]] = tuple(
    (name, sql_type) for name, sql_type in OUTCOME_BOUND if name not in {"status", "settled_at"}
)

# An outcome's columns on a new row: nothing said yet. INSERT_INTENT writes these as literals.
OPEN_OUTCOME: Final[MappingProxyType[str, Any]] = MappingProxyType(
    {
        "status": IntentStatus.INTENDED,
        "error_class": "",
        "outcome_summary": "",
        "receipt": {},
        "request_id": "",
        "settled_at": None,
    }
)

# The row's JSON columns: Django's connection hands jsonb back as text, which a statement's
# reader decodes.
JSON_COLUMNS: Final[tuple[str, ...]] = tuple(
    field.attname for field in Intent._meta.concrete_fields if isinstance(field, JSONField)
)

# The run's columns on its intents, which the insert writes from the run row it reads (and every
# caller knows): its id, and its created_at, the partition the row lies in.
FROM_RUN: Final[tuple[str, ...]] = ("run_id", "run_created_at")

_NAMED = {"id", *FROM_RUN, *(name for name, _ in INTENT_BOUND), *(name for name, _ in OUTCOME_BOUND)}

# Every other column of the row (reconciliation's lookup bookkeeping): bound by no statement,
# so left to its db_default (or NULL) on insert.
UNBOUND: Final[tuple[str, ...]] = tuple(
    field.attname for field in Intent._meta.concrete_fields if field.attname not in _NAMED
)

# A new row's columns that the draft does not give: the open outcome and each unbound column's
# default, as Intent.objects.create and INSERT_INTENT both store them.
NEW_ROW: Final[MappingProxyType[str, Any]] = MappingProxyType(
    {
        **OPEN_OUTCOME,
        **{
            field.attname: field.get_default()
            for field in Intent._meta.concrete_fields
            if field.attname in UNBOUND
        },
    }
)

# The columns a statement that writes a caller's step answers: every column but those the request
# names (the run, the step) and those the statement wrote (an outcome's, or the evidence's).
ANSWERED_FOR_CALLER: Final[tuple[str, ...]] = (
    "id",
    *(name for name, _ in INTENT_BOUND if name != "step_id"),
    *UNBOUND,
)
