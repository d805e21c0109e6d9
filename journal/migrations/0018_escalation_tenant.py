# The escalation's run's tenant and task type, copied onto it (insights reads a tenant's
# escalations by an index range instead of one run lookup per escalation). Escalations are 1 to
# 2 % of runs, so the backfill and the indexes are built in the migration's transaction.

import django.db.models.deletion
from django.db import migrations, models

BACKFILL = """
UPDATE journal_escalation AS e SET tenant_id = r.tenant_id, task_type = r.task_type
FROM journal_run AS r WHERE r.id = e.run_id;
SET CONSTRAINTS ALL IMMEDIATE;
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
        migrations.AlterField(
            model_name="escalation",
            name="tenant",
            field=models.ForeignKey(
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
