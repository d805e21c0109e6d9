import django.contrib.postgres.indexes
import django.db.models.functions.text
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations


class AddIndexOnPostgreSQL(migrations.AddIndex):
    """The index in the model's state everywhere, in the database only on PostgreSQL: SQLite (the
    demo's embedded default) has neither GIN nor pg_trgm, and searches its few runs by scanning."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    dependencies = [
        ("journal", "0005_unknown_outcome_index"),
    ]

    operations = [
        TrigramExtension(),
        AddIndexOnPostgreSQL(
            model_name="run",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.text.Upper("ticket_id"), name="gin_trgm_ops"
                ),
                name="run_ticket_trgm_idx",
            ),
        ),
        AddIndexOnPostgreSQL(
            model_name="run",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.indexes.OpClass(
                    django.db.models.functions.text.Upper("order_id"), name="gin_trgm_ops"
                ),
                name="run_order_trgm_idx",
            ),
        ),
    ]
