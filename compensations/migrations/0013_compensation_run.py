# The compensation's original's run, copied onto it as its tenant, task type and tool are (0011):
# whether a run has an open dead letter is then one lookup by the run's index instead of one per
# intent of the run (console.selectors.with_reason_now, retention.selectors).
# Compensations are a small share of the calls, so the backfill and the index are built in the
# migration's transaction. While web nodes roll, the previous release inserts compensations
# without a run: the insert trigger of 0011 copies it from the original too, before NOT NULL is
# checked.

import django.db.models.deletion
from django.db import migrations, models

BACKFILL = """
UPDATE compensations_compensation AS c SET run_id = i.run_id
FROM journal_intent AS i WHERE i.id = c.original_id;
SET CONSTRAINTS ALL IMMEDIATE;
"""

COPY_FUNCTION = """
CREATE OR REPLACE FUNCTION compensations_compensation_copy_original() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant_id IS NULL OR NEW.task_type IS NULL OR NEW.tool IS NULL OR NEW.run_id IS NULL THEN
        SELECT r.id, r.tenant_id, r.task_type, i.tool INTO NEW.run_id, NEW.tenant_id, NEW.task_type, NEW.tool
        FROM journal_intent AS i JOIN journal_run AS r ON r.id = i.run_id WHERE i.id = NEW.original_id;
    END IF;
    RETURN NEW;
END $$;
"""

# As 0011 wrote it.
COPY_FUNCTION_BEFORE = """
CREATE OR REPLACE FUNCTION compensations_compensation_copy_original() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant_id IS NULL OR NEW.task_type IS NULL OR NEW.tool IS NULL THEN
        SELECT r.tenant_id, r.task_type, i.tool INTO NEW.tenant_id, NEW.task_type, NEW.tool
        FROM journal_intent AS i JOIN journal_run AS r ON r.id = i.run_id WHERE i.id = NEW.original_id;
    END IF;
    RETURN NEW;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("compensations", "0012_intents_without_constraints"),
        ("journal", "0022_run_unarchived_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="compensation",
            name="run",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="journal.run",
            ),
        ),
        # The pending foreign-key checks of the UPDATE are run before the ALTER that follows,
        # which PostgreSQL refuses while a table has pending trigger events.
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.RunSQL(COPY_FUNCTION, COPY_FUNCTION_BEFORE),
        migrations.AlterField(
            model_name="compensation",
            name="run",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="journal.run",
            ),
        ),
    ]
