# The escalation's run's tenant and task type, copied onto it (insights reads a tenant's
# escalations by an index range instead of one run lookup per escalation). Escalations are 1 to
# 2 % of runs, so the backfill and the indexes are built in the migration's transaction.
# While web nodes roll, the previous release inserts escalations without the new columns: a
# trigger copies them from the run when an insert leaves them empty, before NOT NULL is checked.

import django.db.models.deletion
from django.db import migrations, models

BACKFILL = """
UPDATE journal_escalation AS e SET tenant_id = r.tenant_id, task_type = r.task_type
FROM journal_run AS r WHERE r.id = e.run_id;
SET CONSTRAINTS ALL IMMEDIATE;
"""

COPY_TRIGGER = """
CREATE FUNCTION journal_escalation_copy_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant_id IS NULL OR NEW.task_type IS NULL THEN
        SELECT r.tenant_id, r.task_type INTO NEW.tenant_id, NEW.task_type
        FROM journal_run AS r WHERE r.id = NEW.run_id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER journal_escalation_copy_run BEFORE INSERT ON journal_escalation
    FOR EACH ROW EXECUTE FUNCTION journal_escalation_copy_run();
"""

DROP_COPY_TRIGGER = """
DROP TRIGGER journal_escalation_copy_run ON journal_escalation;
DROP FUNCTION journal_escalation_copy_run();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("journal", "0017_step_args_edited"),
    ]

    operations = [
        migrations.AddField(
            model_name="escalation",
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
            model_name="escalation",
            name="task_type",
            field=models.SlugField(default="", max_length=64),
            preserve_default=False,
        ),
        # The pending foreign-key checks of the UPDATE are run before the ALTER that follows,
        # which PostgreSQL refuses while a table has pending trigger events.
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.RunSQL(COPY_TRIGGER, DROP_COPY_TRIGGER),
        migrations.AlterField(
            model_name="escalation",
            name="tenant",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="journal.tenant",
            ),
        ),
        migrations.AddIndex(
            model_name="escalation",
            index=models.Index(fields=["tenant", "created_at"], name="escalation_tenant_opened_idx"),
        ),
        migrations.AddIndex(
            model_name="escalation",
            index=models.Index(
                condition=models.Q(("resolved_at__isnull", False)),
                fields=["tenant", "resolved_at"],
                name="escalation_tenant_resolved_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="escalation",
            index=models.Index(fields=["tenant", "task_type"], name="escalation_tenant_type_idx"),
        ),
    ]
