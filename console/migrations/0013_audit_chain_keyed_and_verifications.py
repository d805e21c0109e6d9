"""The audit chain becomes keyed and its head guarded, and checks of the chain are kept.

- Every existing row is re-hashed with HMAC-SHA256 under settings.SEAM_AUDIT_KEY (a key kept
  outside the database), after its plain SHA-256 chain has been verified: a chain that is already
  broken is not re-keyed, since that would launder the break (the migration stops and names the
  row). The head gets its seal.
- On PostgreSQL: TRUNCATE of the audit rows or of the head is refused (statement triggers; the
  row trigger of 0008 never saw it), and the head may only move forward onto the newest audit
  row, never be deleted.

The hashing is written out here rather than imported from handover.audit, so this migration
keeps doing what it did when handover.audit changes."""

import hashlib
import hmac
import json
from datetime import UTC

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

GENESIS = "0" * 64

GUARDS = """
CREATE OR REPLACE FUNCTION seam_refuse_audit_truncate() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: TRUNCATE refused', TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER handover_auditentry_no_truncate
    BEFORE TRUNCATE ON handover_auditentry
    FOR EACH STATEMENT EXECUTE FUNCTION seam_refuse_audit_truncate();
CREATE TRIGGER handover_auditchainhead_no_truncate
    BEFORE TRUNCATE ON handover_auditchainhead
    FOR EACH STATEMENT EXECUTE FUNCTION seam_refuse_audit_truncate();

CREATE OR REPLACE FUNCTION seam_guard_audit_head() RETURNS trigger AS $$
DECLARE
    newest_seq bigint;
    newest_hash varchar(64);
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'handover_auditchainhead: the audit chain head cannot be deleted'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF TG_OP = 'UPDATE' AND (NEW.id, NEW.seq, NEW.hash, NEW.seal) = (OLD.id, OLD.seq, OLD.hash, OLD.seal) THEN
        RETURN NEW;
    END IF;
    IF NEW.id <> 1 THEN
        RAISE EXCEPTION 'handover_auditchainhead: the audit chain has one head, id 1'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF TG_OP = 'UPDATE' AND (NEW.id <> OLD.id OR NEW.seq <= OLD.seq) THEN
        RAISE EXCEPTION 'handover_auditchainhead: the head only moves forward (from #% to #% refused)',
            OLD.seq, NEW.seq USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT seq, hash INTO newest_seq, newest_hash
        FROM handover_auditentry ORDER BY seq DESC LIMIT 1;
    IF NOT FOUND THEN
        newest_seq := 0;
        newest_hash := repeat('0', 64);
    END IF;
    IF NEW.seq <> newest_seq OR NEW.hash <> newest_hash THEN
        RAISE EXCEPTION 'handover_auditchainhead: the head must name the newest audit row (#%)', newest_seq
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER handover_auditchainhead_guard
    BEFORE INSERT OR UPDATE OR DELETE ON handover_auditchainhead
    FOR EACH ROW EXECUTE FUNCTION seam_guard_audit_head();
"""

DROP_GUARDS = """
DROP TRIGGER IF EXISTS handover_auditchainhead_guard ON handover_auditchainhead;
DROP FUNCTION IF EXISTS seam_guard_audit_head();
DROP TRIGGER IF EXISTS handover_auditchainhead_no_truncate ON handover_auditchainhead;
DROP TRIGGER IF EXISTS handover_auditentry_no_truncate ON handover_auditentry;
DROP FUNCTION IF EXISTS seam_refuse_audit_truncate();
"""


def _canonical(entry) -> str:
    return json.dumps(
        {
            "seq": entry.seq,
            "tenant": entry.tenant_id,
            "at": entry.at.astimezone(UTC).isoformat(timespec="microseconds"),
            "user": entry.user_id,
            "username": entry.username,
            "action": entry.action,
            "run": str(entry.run_id) if entry.run_id else None,
            "step_id": entry.step_id,
            "old": entry.old_state,
            "new": entry.new_state,
            "note": entry.note,
            "request_id": entry.request_id,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )


def _sha256(prev_hash: str, entry) -> str:
    return hashlib.sha256(f"{prev_hash}\n{_canonical(entry)}".encode()).hexdigest()


def _mac(message: str) -> str:
    return hmac.new(str(settings.SEAM_AUDIT_KEY).encode(), message.encode(), hashlib.sha256).hexdigest()


def rekey(apps, schema_editor):
    entry_model = apps.get_model("handover", "AuditEntry")
    head_model = apps.get_model("handover", "AuditChainHead")
    schema_editor.execute(
        "ALTER TABLE handover_auditentry DISABLE TRIGGER handover_auditentry_append_only", params=None
    )
    old_prev, new_prev, seq = GENESIS, GENESIS, 0
    for entry in entry_model.objects.using(schema_editor.connection.alias).order_by("seq").iterator(chunk_size=2000):
        if entry.seq != seq + 1 or entry.prev_hash != old_prev or entry.hash != _sha256(old_prev, entry):
            raise RuntimeError(
                f"The audit chain is broken at row #{seq + 1} under its unkeyed hash: not re-keying "
                "it (that would hide the break). Run `manage.py verify_audit` on the previous "
                "release and restore the audit table from a backup before migrating."
            )
        new_hash = _mac(f"{new_prev}\n{_canonical(entry)}")
        entry_model.objects.using(schema_editor.connection.alias).filter(pk=entry.pk).update(prev_hash=new_prev, hash=new_hash)
        old_prev, new_prev, seq = entry.hash, new_hash, entry.seq
    head = head_model.objects.using(schema_editor.connection.alias).filter(pk=1).first()
    if head is not None and (head.seq, head.hash) != (seq, old_prev):
        raise RuntimeError(
            f"The audit chain head names row #{head.seq}, but the last row is #{seq}: not re-keying it."
        )
    head_model.objects.using(schema_editor.connection.alias).update_or_create(
        pk=1, defaults={"seq": seq, "hash": new_prev, "seal": _mac(f"head\n{seq}\n{new_prev}")}
    )
    schema_editor.execute(
        "ALTER TABLE handover_auditentry ENABLE TRIGGER handover_auditentry_append_only", params=None
    )
    schema_editor.execute(GUARDS, params=None)


def unkey(apps, schema_editor):
    """Back to the unkeyed chain, for a rollback to the release before this one."""
    entry_model = apps.get_model("handover", "AuditEntry")
    head_model = apps.get_model("handover", "AuditChainHead")
    schema_editor.execute(DROP_GUARDS, params=None)
    schema_editor.execute(
        "ALTER TABLE handover_auditentry DISABLE TRIGGER handover_auditentry_append_only", params=None
    )
    prev = GENESIS
    for entry in entry_model.objects.using(schema_editor.connection.alias).order_by("seq").iterator(chunk_size=2000):
        new_hash = _sha256(prev, entry)
        entry_model.objects.using(schema_editor.connection.alias).filter(pk=entry.pk).update(prev_hash=prev, hash=new_hash)
        prev = new_hash
    head_model.objects.using(schema_editor.connection.alias).filter(pk=1).update(hash=prev)
    schema_editor.execute(
        "ALTER TABLE handover_auditentry ENABLE TRIGGER handover_auditentry_append_only", params=None
    )


class Migration(migrations.Migration):
    dependencies = [
        ("handover", "0012_journal_app"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="auditchainhead",
            name="seal",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.RunPython(rekey, unkey),
        migrations.AlterField(
            model_name="auditentry",
            name="action",
            field=models.CharField(
                choices=[
                    ("assign", "Assigned the run"),
                    ("compensate_step", "Compensated one step"),
                    ("compensate_run", "Compensated the run"),
                    ("resume", "Resumed the run"),
                    ("retry_lookup", "Retried the lookup of an uncertain step"),
                    ("mark_performed", "Marked an uncertain step performed"),
                    ("mark_not_performed", "Marked an uncertain step not performed"),
                    ("customer_told", "Recorded what the customer was told"),
                    ("resolve", "Resolved the escalation"),
                    ("dead_letter_take", "Took ownership of a dead letter"),
                    ("dead_letter_assign", "Assigned a dead letter"),
                    ("dead_letter_retry", "Retried a dead letter"),
                    ("dead_letter_resolve", "Resolved a dead letter"),
                    ("audit_verify", "Re-ran the audit chain's verification"),
                ],
                max_length=40,
            ),
        ),
        migrations.CreateModel(
            name="AuditVerification",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("requested_at", models.DateTimeField()),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                (
                    "checked",
                    models.PositiveBigIntegerField(blank=True, help_text="Rows verified.", null=True),
                ),
                (
                    "broken_at",
                    models.PositiveBigIntegerField(
                        blank=True, help_text="The seq of the first row that does not link.", null=True
                    ),
                ),
                ("problem", models.TextField(blank=True)),
                (
                    "requested_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-requested_at", "-pk"],
            },
        ),
    ]
