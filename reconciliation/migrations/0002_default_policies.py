from django.db import migrations

# This migration used to seed the scripted flows' recovery policies (the demo's) into every
# database, production's included. It seeds nothing now: the demo's policies live with the demo
# (scenarios.policies), written when a database with the scenarios installed is migrated.
#
# Databases that already ran it keep their rows: Django never runs an applied migration again,
# and nothing here or anywhere else deletes a policy. A new database, production's, has no
# policies until the operator writes them (a dead run without one is handed to a person).


class Migration(migrations.Migration):
    dependencies = [("reconciliation", "0001_task_policy")]
    operations = []
