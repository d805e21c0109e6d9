from django.db import migrations


def forward(apps, schema_editor):
    from reconciliation.defaults import policies_seed_defaults

    policies_seed_defaults(
        apps.get_model("reconciliation", "TaskPolicy"), apps.get_model("reconciliation", "HistoricalTaskPolicy")
    )


class Migration(migrations.Migration):
    dependencies = [("reconciliation", "0001_task_policy")]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
