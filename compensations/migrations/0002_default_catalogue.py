from django.db import migrations


def forward(apps, schema_editor):
    from compensations.defaults import catalogue_seed_defaults

    catalogue_seed_defaults(
        apps.get_model("compensations", "CatalogueEntry"),
        apps.get_model("compensations", "HistoricalCatalogueEntry"),
    )


class Migration(migrations.Migration):
    dependencies = [("compensations", "0001_catalogue")]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
