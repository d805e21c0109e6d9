from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models

PICKED_UP = models.Q(("kind__in", ["intent_reconciled", "run_resumed", "run_escalated"]))


class Migration(migrations.Migration):
    # Online: the agents write events meanwhile. The covering index is built concurrently under
    # a name of its own, the old one dropped concurrently, then the new one takes its name, so
    # the insights page always has one of them.
    atomic = False

    dependencies = [
        ("journal", "0018_escalation_tenant"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="journalevent",
            index=models.Index(
                condition=PICKED_UP,
                fields=["at"],
                include=["run", "intent", "kind"],
                name="journal_picked_up_cover_idx",
            ),
        ),
        RemoveIndexConcurrently(model_name="journalevent", name="journal_picked_up_idx"),
        migrations.RenameIndex(
            model_name="journalevent", new_name="journal_picked_up_idx", old_name="journal_picked_up_cover_idx"
        ),
    ]
