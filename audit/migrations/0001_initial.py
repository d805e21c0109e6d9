"""The audit trail's models move here from the console's app with their rows, indexes and
triggers: the state first names the tables as they are, then they take the audit app's names.
The trigger functions that name a table in their body follow, and the triggers take the new
names; the content types (so the grants of the models' own permissions, and admin history)
move with the models. The console's permissions stayed with the console (handover 0017)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = ["auditentry", "auditchainhead", "auditverification"]

FUNCTIONS = """
CREATE OR REPLACE FUNCTION seam_refuse_audit_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION seam_guard_audit_head() RETURNS trigger AS $$
DECLARE
    newest_seq bigint;
    newest_hash varchar(64);
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION '%: the audit chain head cannot be deleted', TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF TG_OP = 'UPDATE' AND (NEW.id, NEW.seq, NEW.hash, NEW.seal) = (OLD.id, OLD.seq, OLD.hash, OLD.seal) THEN
        RETURN NEW;
    END IF;
    IF NEW.id <> 1 THEN
        RAISE EXCEPTION '%: the audit chain has one head, id 1', TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF TG_OP = 'UPDATE' AND (NEW.id <> OLD.id OR NEW.seq <= OLD.seq) THEN
        RAISE EXCEPTION '%: the head only moves forward (from #% to #% refused)',
            TG_TABLE_NAME, OLD.seq, NEW.seq USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT seq, hash INTO newest_seq, newest_hash
        FROM {entries} ORDER BY seq DESC LIMIT 1;
    IF NOT FOUND THEN
        newest_seq := 0;
        newest_hash := repeat('0', 64);
    END IF;
    IF NEW.seq <> newest_seq OR NEW.hash <> newest_hash THEN
        RAISE EXCEPTION '%: the head must name the newest audit row (#%)', TG_TABLE_NAME, newest_seq
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""

TRIGGERS = [
    ("auditentry", "append_only"),
    ("auditentry", "no_truncate"),
    ("auditchainhead", "no_truncate"),
    ("auditchainhead", "guard"),
]


def _rename_triggers(old_prefix: str, new_prefix: str) -> str:
    # Both ways this runs while the tables have the audit app's names (after the renames going
    # forward, before them going back).
    return "\n".join(
        f"ALTER TRIGGER {old_prefix}_{table}_{name} ON audit_{table} RENAME TO {new_prefix}_{table}_{name};"
        for table, name in TRIGGERS
    )


FORWARD_SQL = FUNCTIONS.replace("{entries}", "audit_auditentry") + _rename_triggers("handover", "audit")
BACKWARD_SQL = FUNCTIONS.replace("{entries}", "handover_auditentry") + _rename_triggers("audit", "handover")


def move_content_types(apps, schema_editor):
    content_types = apps.get_model("contenttypes", "ContentType").objects.db_manager(schema_editor.connection.alias)
    for model in MOVED:
        if not content_types.filter(app_label="audit", model=model).exists():
            content_types.filter(app_label="handover", model=model).update(app_label="audit")


def move_content_types_back(apps, schema_editor):
    content_types = apps.get_model("contenttypes", "ContentType").objects.db_manager(schema_editor.connection.alias)
    for model in MOVED:
        if not content_types.filter(app_label="handover", model=model).exists():
            content_types.filter(app_label="audit", model=model).update(app_label="handover")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("handover", "0017_staff_permissions"),
        ("journal", "0007_run_queue_indexes"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='AuditChainHead',
                    fields=[
                        ('id', models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                        ('seq', models.PositiveBigIntegerField(default=0)),
                        ('hash', models.CharField(default='0000000000000000000000000000000000000000000000000000000000000000', max_length=64)),
                        ('seal', models.CharField(blank=True, max_length=64)),
                    ],
                    options={'db_table': 'handover_auditchainhead'},
                ),
                migrations.CreateModel(
                    name='AuditVerification',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('requested_at', models.DateTimeField()),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('checked', models.PositiveBigIntegerField(blank=True, help_text='Rows verified.', null=True)),
                        ('broken_at', models.PositiveBigIntegerField(blank=True, help_text='The seq of the first row that does not link.', null=True)),
                        ('problem', models.TextField(blank=True)),
                        ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'handover_auditverification',
                        'ordering': ['-requested_at', '-pk'],
                    },
                ),
                migrations.CreateModel(
                    name='AuditEntry',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('seq', models.PositiveBigIntegerField(unique=True)),
                        ('at', models.DateTimeField()),
                        ('username', models.CharField(help_text='As it was when the action was taken.', max_length=150)),
                        ('action', models.CharField(choices=[('assign', 'Assigned the run'), ('compensate_step', 'Compensated one step'), ('compensate_run', 'Compensated the run'), ('resume', 'Resumed the run'), ('retry_lookup', 'Retried the lookup of an uncertain step'), ('mark_performed', 'Marked an uncertain step performed'), ('mark_not_performed', 'Marked an uncertain step not performed'), ('customer_told', 'Recorded what the customer was told'), ('resolve', 'Resolved the escalation'), ('dead_letter_take', 'Took ownership of a dead letter'), ('dead_letter_assign', 'Assigned a dead letter'), ('dead_letter_retry', 'Retried a dead letter'), ('dead_letter_resolve', 'Resolved a dead letter'), ('login_locked_out', 'Locked out after too many failed logins'), ('audit_verify', "Re-ran the audit chain's verification")], max_length=40)),
                        ('step_id', models.CharField(blank=True, max_length=255)),
                        ('old_state', models.JSONField(blank=True, default=dict)),
                        ('new_state', models.JSONField(blank=True, default=dict)),
                        ('note', models.TextField(blank=True)),
                        ('request_id', models.CharField(blank=True, max_length=100)),
                        ('prev_hash', models.CharField(max_length=64)),
                        ('hash', models.CharField(max_length=64, unique=True)),
                        ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='audit_entries', to='journal.run')),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='journal.tenant')),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'handover_auditentry',
                        'ordering': ['-seq'],
                        'indexes': [models.Index(fields=['tenant', '-at'], name='audit_tenant_at_idx'), models.Index(fields=['run', '-at'], name='audit_run_at_idx')],
                    },
                ),
            ],
        ),
        # Renames handover_<model> to audit_<model>, keeping rows, indexes and triggers.
        migrations.AlterModelTable(name="auditchainhead", table=None),
        migrations.AlterModelTable(name="auditverification", table=None),
        migrations.AlterModelTable(name="auditentry", table=None),
        migrations.RunSQL(FORWARD_SQL, BACKWARD_SQL),
        migrations.RunPython(move_content_types, move_content_types_back),
    ]
