"""Each audit row is numbered among its tenant's rows too (`tenant_seq`, from 1), so that a
tenant's pages, exports and checks never show another tenant's numbers; existing rows are
numbered in chain order. The append-only trigger is disabled for that one UPDATE, in this
migration's transaction, and enabled again before it commits. A check of the chain names the
tenant it was asked for (none: the whole chain) and keeps what it found as a type (intact,
broken, wiped, truncated, rolled back)."""

import django.db.models.deletion
from django.db import migrations, models

NUMBER_EXISTING_ROWS = """
ALTER TABLE audit_auditentry DISABLE TRIGGER audit_auditentry_append_only;
UPDATE audit_auditentry AS entry SET tenant_seq = numbered.n
    FROM (SELECT id, row_number() OVER (PARTITION BY tenant_id ORDER BY seq) AS n
          FROM audit_auditentry) AS numbered
    WHERE entry.id = numbered.id;
ALTER TABLE audit_auditentry ENABLE TRIGGER audit_auditentry_append_only;
"""

RESULTS = [
    ("intact", "Intact"),
    ("broken", "A row altered, removed or inserted"),
    ("wiped", "Rows the witness saw are gone or replaced"),
    ("truncated", "The newest rows were removed"),
    ("rolled_back", "An older copy of the trail was restored"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0002_login_unlocked_action"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditentry",
            name="tenant_seq",
            field=models.PositiveBigIntegerField(null=True),
        ),
        migrations.RunSQL(NUMBER_EXISTING_ROWS, migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="auditentry",
            name="tenant_seq",
            field=models.PositiveBigIntegerField(
                help_text="The row's number among its tenant's rows, from 1: what the tenant's pages and exports show."
            ),
        ),
        migrations.AddConstraint(
            model_name="auditentry",
            constraint=models.UniqueConstraint(
                fields=["tenant", "tenant_seq"], name="audit_tenant_seq_unique"
            ),
        ),
        migrations.AddField(
            model_name="auditverification",
            name="tenant",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="journal.tenant",
            ),
        ),
        migrations.AddField(
            model_name="auditverification",
            name="result",
            field=models.CharField(blank=True, choices=RESULTS, max_length=20),
        ),
        migrations.AddIndex(
            model_name="auditverification",
            index=models.Index(fields=["tenant", "finished_at"], name="audit_verification_tenant_idx"),
        ),
    ]
