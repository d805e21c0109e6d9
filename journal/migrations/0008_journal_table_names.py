"""The journal's tables take the journal's name. They kept the console's (handover_run, ...)
when the models moved here (handover 0012) so that the move copied no data; now each is renamed
in place, its rows, indexes, constraints and sequences with it (an index or sequence keeps its
old name, which nothing reads). The journal's append-only trigger follows its table; its
function named the table in its message, so it now names whichever table it guards, and the
trigger takes the table's new name."""

from django.db import migrations

MODELS = [
    "tenant",
    "membership",
    "agenttoken",
    "run",
    "intent",
    "customermessage",
    "journalevent",
    "escalation",
]

REFUSE_JOURNAL_CHANGE = """
CREATE OR REPLACE FUNCTION seam_refuse_journal_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '{message}', {arguments}
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""

FORWARD_SQL = REFUSE_JOURNAL_CHANGE.format(
    message="% is append-only: % refused", arguments="TG_TABLE_NAME, TG_OP"
) + (
    "ALTER TRIGGER handover_journalevent_append_only ON journal_journalevent "
    "RENAME TO journal_journalevent_append_only;"
)
# As handover 0002 wrote it, so that migrating back leaves what was there.
BACKWARD_SQL = REFUSE_JOURNAL_CHANGE.format(
    message="handover_journalevent is append-only: % refused", arguments="TG_OP"
) + (
    "ALTER TRIGGER journal_journalevent_append_only ON journal_journalevent "
    "RENAME TO handover_journalevent_append_only;"
)


class Migration(migrations.Migration):
    dependencies = [
        ("journal", "0007_run_queue_indexes"),
        # The trigger this renames.
        ("handover", "0002_journal_append_only"),
    ]

    operations = [
        *(migrations.AlterModelTable(name=model, table=None) for model in MODELS),
        # Forward after the renames, backward before them: the trigger is on journal_journalevent.
        migrations.RunSQL(FORWARD_SQL, BACKWARD_SQL),
    ]
