from django.db import migrations

# This migration used to seed the sandbox's compensation catalogue (the demo's) into every
# database, production's included. It seeds nothing now: the demo's entries live with the demo
# (sandbox.catalogue), written when a database with the sandbox installed is migrated.
#
# Databases that already ran it keep their rows: Django never runs an applied migration again,
# and nothing here or anywhere else deletes an entry (an operator who wants the demo's entries
# gone from a production catalogue deletes them in the admin, where the deletion is recorded).
# A new database, production's, gets an empty catalogue for the operator to fill.


class Migration(migrations.Migration):
    dependencies = [("compensations", "0001_catalogue")]
    operations = []
