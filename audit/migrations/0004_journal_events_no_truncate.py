"""The journal's events refuse TRUNCATE as the audit trail's rows do: a statement trigger, beside
the row trigger that already refuses UPDATE and DELETE (journal 0008), raises for everyone,
the tables' owner included; only a superuser's session in `session_replication_role = replica`
fires no trigger (the suite's flush, tests/support/postgresql; the benchmarks' clean-up). It
lives in the audit app so the journal stays unaware of who guards it; the function is the
journal's own, which names the table and the operation it refuses. Without it, `TRUNCATE
journal_journalevent CASCADE` emptied the journal at a stroke."""

from django.db import migrations

# The events' table is journal_journalevent from journal 0008 on, handover_journalevent before
# it. This migration depends on neither name: an audit migration that required journal 0008
# would pull the journal's renames ahead of the apps whose first migrations still name the
# console's tables (fanout 0001 ...). The trigger follows its table through the rename. OR
# REPLACE: journal 0021, which partitions the table and declares the trigger on it, may run first.
FORWARD_SQL = """
DO $$
DECLARE
    events regclass := coalesce(to_regclass('journal_journalevent'), to_regclass('handover_journalevent'));
BEGIN
    EXECUTE format(
        'CREATE OR REPLACE TRIGGER journal_journalevent_no_truncate BEFORE TRUNCATE ON %s '
        'FOR EACH STATEMENT EXECUTE FUNCTION seam_refuse_journal_change()', events);
END $$;
"""

BACKWARD_SQL = """
DO $$
DECLARE
    events regclass := coalesce(to_regclass('journal_journalevent'), to_regclass('handover_journalevent'));
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS journal_journalevent_no_truncate ON %s', events);
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0003_tenant_numbers_and_typed_checks"),
        # The trigger function, seam_refuse_journal_change (the console's app, before the
        # journal had its own).
        ("handover", "0002_journal_append_only"),
    ]

    operations = [migrations.RunSQL(FORWARD_SQL, BACKWARD_SQL)]
