"""Fewer index writes per journaled call (the journal's cost against the raw-driver floor).

- Intent.idempotency_key is unique through a named constraint instead of unique=True, which on
  PostgreSQL also built a varchar_pattern_ops ("_like") index that no query used and that every
  intent insert and every settle paid for. The constraint is added before the old one is
  dropped, so the key is never without a unique index.
- JournalEvent.intent loses its index: nothing looks events up by intent alone (those lookups
  go by run, through journal_run_at_idx), and every call wrote two entries into it.
- JournalEvent.user is indexed only where set (journal_user_idx): agents' and workers' events
  carry no user and no longer pay an index entry for their NULL."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("handover", "0008_audit_append_only_and_roles"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddConstraint(
            model_name="intent",
            constraint=models.UniqueConstraint(fields=("idempotency_key",), name="intent_key_unique"),
        ),
        migrations.AlterField(
            model_name="intent",
            name="idempotency_key",
            field=models.CharField(max_length=64),
        ),
        migrations.AlterField(
            model_name="journalevent",
            name="intent",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=models.deletion.CASCADE,
                related_name="events",
                to="handover.intent",
            ),
        ),
        migrations.AlterField(
            model_name="journalevent",
            name="user",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=models.deletion.PROTECT,
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddIndex(
            model_name="journalevent",
            index=models.Index(
                condition=models.Q(("user__isnull", False)), fields=["user"], name="journal_user_idx"
            ),
        ),
    ]
