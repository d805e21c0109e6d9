"""The audit trail's models now belong to the audit app (audit 0001 took them with their tables):
only Django's picture of the console's app changes here, not the database."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("handover", "0017_staff_permissions"),
        ("audit", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="AuditChainHead"),
                migrations.DeleteModel(name="AuditVerification"),
                migrations.DeleteModel(name="AuditEntry"),
            ],
        ),
    ]
