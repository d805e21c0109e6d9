# The compensation's original's tenant, task type and tool, copied onto it (insights reads a
# tenant's compensations and dead letters by an index range instead of an intent and a run
# lookup per compensation).
# Compensations are a small share of the calls, so the backfill and the index are built in the
# migration's transaction. While web nodes roll, the previous release inserts compensations
# without the new columns: a trigger copies them from the original when an insert leaves them
# empty, before NOT NULL is checked.

import django.db.models.deletion
from django.db import migrations, models

BACKFILL = """
UPDATE compensations_compensation AS c SET tenant_id = r.tenant_id, task_type = r.task_type, tool = i.tool
FROM journal_intent AS i JOIN journal_run AS r ON r.id = i.run_id
WHERE i.id = c.original_id;
SET CONSTRAINTS ALL IMMEDIATE;
"""

COPY_TRIGGER = """
CREATE FUNCTION compensations_compensation_copy_original() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant_id IS NULL OR NEW.task_type IS NULL OR NEW.tool IS NULL THEN
        SELECT r.tenant_id, r.task_type, i.tool INTO NEW.tenant_id, NEW.task_type, NEW.tool
        FROM journal_intent AS i JOIN journal_run AS r ON r.id = i.run_id WHERE i.id = NEW.original_id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER compensations_compensation_copy_original BEFORE INSERT ON compensations_compensation
    FOR EACH ROW EXECUTE FUNCTION compensations_compensation_copy_original();
"""

DROP_COPY_TRIGGER = """
DROP TRIGGER compensations_compensation_copy_original ON compensations_compensation;
DROP FUNCTION compensations_compensation_copy_original();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("compensations", "0010_dead_letter_version_and_dropped_sends"),
        # The intents and runs the backfill reads are the journal app's tables by then.
        ("journal", "0018_escalation_tenant"),
    ]

    operations = [
        migrations.AddField(
            model_name="compensation",
            name="tenant",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="journal.tenant",
            ),
        ),
        migrations.AddField(
            model_name="compensation",
            name="task_type",
            field=models.SlugField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="compensation",
            name="tool",
            field=models.CharField(default="", max_length=100),
            preserve_default=False,
        ),
        # The pending foreign-key checks of the UPDATE are run before the ALTER that follows,
        # which PostgreSQL refuses while a table has pending trigger events.
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.RunSQL(COPY_TRIGGER, DROP_COPY_TRIGGER),
        migrations.AlterField(
            model_name="compensation",
            name="tenant",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="journal.tenant",
            ),
        ),
        migrations.AddIndex(
            model_name="compensation",
            index=models.Index(fields=["tenant", "created_at"], name="compensation_tenant_idx"),
        ),
    ]
