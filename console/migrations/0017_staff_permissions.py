"""The console's permissions (act_on_run, view_audit_trail) move from the audit entry model onto
a model of their own, StaffPermission (no table), so that they keep their names, handover.*,
and their grants when the audit trail's models move to the audit app (audit 0001)."""

from django.db import migrations, models

CONSOLE_PERMISSIONS = ["act_on_run", "view_audit_trail"]


def _move(apps, schema_editor, source: str, target: str) -> None:
    db = schema_editor.connection.alias
    content_types = apps.get_model("contenttypes", "ContentType").objects.db_manager(db)
    permissions = apps.get_model("auth", "Permission").objects.db_manager(db)
    holder, _ = content_types.get_or_create(app_label="handover", model=target)
    for codename in CONSOLE_PERMISSIONS:
        old = permissions.filter(
            content_type__app_label="handover", content_type__model=source, codename=codename
        ).first()
        if old is None:
            continue  # a fresh database: post_migrate creates it on its holder
        new = permissions.filter(content_type=holder, codename=codename).first()
        if new is None:
            old.content_type = holder
            old.save(using=db, update_fields=["content_type"])
            continue
        # Already made by an earlier step's post_migrate: its grants move to that one.
        for group in old.group_set.all():
            group.permissions.add(new)
        for user in old.user_set.all():
            user.user_permissions.add(new)
        old.delete()


def forward(apps, schema_editor):
    _move(apps, schema_editor, "auditentry", "staffpermission")


def backward(apps, schema_editor):
    _move(apps, schema_editor, "staffpermission", "auditentry")


class Migration(migrations.Migration):

    dependencies = [
        ("handover", "0016_tenant_console_settings"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.CreateModel(
            name="StaffPermission",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
            ],
            options={
                "permissions": [
                    ("view_audit_trail", "Review the audit trail of every person's actions"),
                    ("act_on_run", "Act on runs: compensate, resume, settle, resolve"),
                ],
                "managed": False,
                "default_permissions": (),
            },
        ),
        migrations.AlterModelOptions(
            name="auditentry",
            options={"ordering": ["-seq"]},
        ),
        migrations.RunPython(forward, backward),
    ]
