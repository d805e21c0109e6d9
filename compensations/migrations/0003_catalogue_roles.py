from django.contrib.auth.management import create_permissions
from django.db import migrations


def forward(apps, schema_editor):
    from compensations.defaults import catalogue_grant_roles

    # Permissions are normally created after the whole migrate (post_migrate); create this app's
    # now so they can be granted.
    app_config = apps.get_app_config("compensations")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0)
    app_config.models_module = None
    catalogue_grant_roles(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [
        ("compensations", "0002_default_catalogue"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
