"""On PostgreSQL, the journal refuses UPDATE and DELETE at the database, whatever the caller:
an event once accepted is history. (TRUNCATE is a table-owner privilege; production revokes it
from the application role, see docs/architecture.md.)"""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION seam_refuse_journal_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'handover_journalevent is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER handover_journalevent_append_only
    BEFORE UPDATE OR DELETE ON handover_journalevent
    FOR EACH ROW EXECUTE FUNCTION seam_refuse_journal_change();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS handover_journalevent_append_only ON handover_journalevent;
DROP FUNCTION IF EXISTS seam_refuse_journal_change();
"""


def forward(apps, schema_editor):
    schema_editor.execute(FORWARD, params=None)


def backward(apps, schema_editor):
    schema_editor.execute(BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [("handover", "0001_initial")]
    operations = [migrations.RunPython(forward, backward)]
