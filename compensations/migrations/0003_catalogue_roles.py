"""Each staff role gets its catalogue permissions (the role's group is created if missing); only
adds. The grants are frozen here, as compensations.defaults.ROLE_PERMISSIONS listed them: a
migration does what it did when it was written, whatever the code says later."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

ROLE_PERMISSIONS = {
    "support_staff": ("view_catalogueentry",),
    "team_lead": ("view_catalogueentry",),
    "admin": ("view_catalogueentry", "add_catalogueentry", "change_catalogueentry", "delete_catalogueentry"),
}


def forward(apps, schema_editor):
    alias = schema_editor.connection.alias
    # Permissions are normally created after the whole migrate (post_migrate); create this app's
    # now so they can be granted.
    app_config = apps.get_app_config("compensations")
    app_config.models_module = True
    create_permissions(app_config, apps=apps, verbosity=0, using=alias)
    app_config.models_module = None
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    for group_name, codenames in ROLE_PERMISSIONS.items():
        group, _ = group_model.objects.using(alias).get_or_create(name=group_name)
        permissions = permission_model.objects.using(alias).filter(
            content_type__app_label="compensations", codename__in=codenames
        )
        missing = set(codenames) - {p.codename for p in permissions}
        if missing:
            raise LookupError(f"permissions not created yet: {', '.join(sorted(missing))}")
        group.permissions.add(*permissions)


class Migration(migrations.Migration):
    dependencies = [
        ("compensations", "0002_default_catalogue"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
