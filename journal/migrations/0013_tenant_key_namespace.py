"""Idempotency keys derive from a namespace fixed when the tenant is made, not from its slug, so
a renamed tenant's replayed call keeps its key. Tenants that exist already take their slug as the
namespace: every key they have sent is still the key the journal derives."""

from django.db import migrations, models
from django.db.models import F

from django.contrib.postgres.functions import RandomUUID
from django.db.models.functions import Cast


def keep_the_keys_already_sent(apps, schema_editor):  # type: ignore[no-untyped-def]
    apps.get_model("journal", "Tenant").objects.using(schema_editor.connection.alias).update(key_namespace=F("slug"))


class Migration(migrations.Migration):
    dependencies = [("journal", "0012_attempt_allowed_event")]

    operations = [
        migrations.AddField(
            model_name="tenant",
            name="key_namespace",
            field=models.CharField(
                db_default=Cast(RandomUUID(), output_field=models.CharField()), editable=False, max_length=64
            ),
        ),
        migrations.RunPython(keep_the_keys_already_sent, migrations.RunPython.noop),
    ]
