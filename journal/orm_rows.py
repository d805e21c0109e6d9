"""Model instances from rows the journal read or wrote itself, and SQL from Django's compiler.

The journal's hot writes are single statements (journal.sql) that return the row they wrote, and
its batch settle is one UPDATE ... FROM (VALUES ...) (journal.transitions). Asking the ORM again
for the row just written would cost a second query per call, so the instance is built here from
the values in hand, as Model.from_db would leave it; and the batch's one expression (a counter's
F() + 1) is compiled here by Django's own compiler, as QuerySet.update would compile it.

Each of these leans on how Django lays out a loaded instance (its __dict__, a ModelState with
`adding` and `db`, the related-object cache) or compiles an update, which is Django's to change.
That reliance lives in this module only, and tests/journal/test_orm_rows.py fails if Django
changes underneath it: an instance built here must equal, field for field and state for state,
one the ORM fetches, and refresh, save and follow its foreign keys as one."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.db import DEFAULT_DB_ALIAS
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init
from django.db.models.sql import UpdateQuery

from .models import Intent, Run

_INTENT_RUN_FIELD = Intent._meta.get_field("run")


@functools.cache
def _intent_attnames() -> tuple[str, ...]:
    return tuple(field.attname for field in Intent._meta.concrete_fields)


def intent_of_columns(values: dict[str, Any], run: Run | None) -> Intent:
    """An Intent as Django would load it from every column's value (`values`, keyed by attname),
    with its run cached when known (else `intent.run` is read when asked for, as for any loaded
    row). `values` is taken over: the instance's __dict__ is filled from it.

    Not through Model.__init__, whose generic loop over the fields' descriptors cost about 0.1 ms
    per journaled call on a 2-core machine, where the process resumes with cold caches after each
    commit (bench: about 7 % of a call). Model.__init__ also sends pre_init and post_init; should
    anything listen to them for Intent, this falls back to Model.from_db so that they are sent."""
    if pre_init.has_listeners(Intent) or post_init.has_listeners(Intent):
        names = _intent_attnames()
        intent = Intent.from_db(DEFAULT_DB_ALIAS, names, [values[name] for name in names])
        if run is not None:
            _INTENT_RUN_FIELD.set_cached_value(intent, run)
        return intent
    state = ModelState()
    state.adding = False
    state.db = DEFAULT_DB_ALIAS
    if run is not None:
        state.fields_cache = {_INTENT_RUN_FIELD.cache_name: run}
    intent = Intent.__new__(Intent)
    values["_state"] = state
    intent.__dict__.update(values)
    return intent


# --- rows of a statement that reads several models at once ------------------------------------


@dataclass(frozen=True, slots=True)
class ModelColumns:
    """One model's columns in a hand-written SELECT: its fields and, per field, the converters
    Django's compiler would apply to the value read (a JSON column arrives as text)."""

    model: type[Model]
    attnames: tuple[str, ...]
    converters: tuple[tuple[Any, ...], ...]
    sql: str


def model_columns(model: type[Model], alias: str, db: BaseDatabaseWrapper) -> ModelColumns:
    """`model`'s concrete columns, selected from the table aliased `alias`, in field order."""
    fields = list(model._meta.concrete_fields)
    quote = db.ops.quote_name
    return ModelColumns(
        model=model,
        attnames=tuple(field.attname for field in fields),
        converters=tuple(tuple(field.get_db_converters(db)) for field in fields),
        sql=", ".join(f"{alias}.{quote(cast(str, field.column))}" for field in fields),
    )


def instance_of(columns: ModelColumns, values: Sequence[Any], db: BaseDatabaseWrapper) -> Model:
    """The instance the ORM would load from `values`, read as `columns` selects them."""
    converted = []
    for value, converters in zip(values, columns.converters, strict=True):
        for converter in converters:
            value = converter(value, None, db)
        converted.append(value)
    return columns.model.from_db(db.alias, columns.attnames, converted)


# --- an expression in a hand-written UPDATE ---------------------------------------------------


def update_expression_sql(
    model: type[Model], expression: Any, db: BaseDatabaseWrapper
) -> tuple[str, list[Any]]:
    """`expression` (an F() sum, say) as the SQL and parameters QuerySet.update would write for it
    in an UPDATE of `model`'s table: resolved for saving, without joins, and compiled by the
    connection's own compiler."""
    query = UpdateQuery(model)
    compiler = query.get_compiler(connection=db)
    resolved = expression.resolve_expression(query, allow_joins=False, for_save=True)
    sql, params = compiler.compile(resolved)
    return sql, list(params)
