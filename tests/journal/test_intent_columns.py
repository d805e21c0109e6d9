"""journal.intent_columns: the one declaration of the intent's columns the journal's statements
bind. Adding a column to Intent must need no edit of journal.sql's statements unless one of them
binds it; these tests say what such a column must then have."""

from __future__ import annotations

from django.db.models import NOT_PROVIDED

from journal import intent_columns, sql
from journal.models import Intent


def test_every_column_is_bound_by_a_statement_or_left_to_its_database_default() -> None:
    bound = {name for name, _ in (*intent_columns.INTENT_BOUND, *intent_columns.OUTCOME_BOUND)}
    for field in Intent._meta.concrete_fields:
        if field.attname in {"id", *intent_columns.FROM_RUN} or field.attname in bound:
            continue
        assert field.attname in intent_columns.UNBOUND
        # INSERT_INTENT leaves it out, so the database must fill it as Django would: with its
        # db_default, or NULL where NULL is the default.
        fills_itself = field.db_default is not NOT_PROVIDED or (field.null and field.get_default() is None)
        assert fills_itself, f"Intent.{field.attname} needs a db_default"


def test_a_new_row_holds_what_the_orm_would_store() -> None:
    unsaved = Intent()
    for name, value in intent_columns.NEW_ROW.items():
        assert getattr(unsaved, name) == value, name


def test_the_statements_name_every_declared_column() -> None:
    for name, sql_type in intent_columns.INTENT_BOUND:
        assert f"%s::{sql_type}" in sql.INSERT_INTENT and name in sql.INSERT_INTENT
    for statement in (sql.SETTLE_INTENT, sql.SETTLE_STEP_AS_CALLER):
        for name, sql_type in intent_columns.OUTCOME_BOUND:
            assert f"{name} = %s::{sql_type}" in statement
    for statement in (sql.NOTE_EVIDENCE_BY_ID, sql.NOTE_EVIDENCE_AS_CALLER):
        for name, sql_type in intent_columns.EVIDENCE_BOUND:
            assert f"{name} = %s::{sql_type}" in statement
    answered = ", ".join(intent_columns.ANSWERED_FOR_CALLER)
    assert f"SELECT {answered} FROM settled" in sql.SETTLE_STEP_AS_CALLER  # noqa: S608
    assert Intent._meta.db_table in sql.INSERT_INTENT
