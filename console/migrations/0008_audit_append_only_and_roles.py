"""The audit trail refuses UPDATE and DELETE at the database (PostgreSQL), whatever the caller;
the chain's head row is created; the staff roles get the dashboard's permissions. (TRUNCATE is a
table-owner privilege, as for the journal: production's application role does not own the
tables, see docs/architecture.md; the test suite, which owns them, empties tables with it.)

The roles' permissions are frozen here, as console.roles.ROLE_PERMISSIONS listed them: a migration
does what it did when it was written, whatever the code says later."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION seam_refuse_audit_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'handover_auditentry is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER handover_auditentry_append_only
    BEFORE UPDATE OR DELETE ON handover_auditentry
    FOR EACH ROW EXECUTE FUNCTION seam_refuse_audit_change();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS handover_auditentry_append_only ON handover_auditentry;
DROP FUNCTION IF EXISTS seam_refuse_audit_change();
"""

SUPPORT = ["handover.act_on_run", "compensations.view_catalogueentry"]
TEAM_LEAD = [*SUPPORT, "handover.view_audit_trail", "compensations.assign_deadletter"]
ADMIN = [
    *TEAM_LEAD,
    "handover.view_notificationrule",
    "handover.add_notificationrule",
    "handover.change_notificationrule",
    "handover.delete_notificationrule",
    "reconciliation.view_taskpolicy",
    "reconciliation.add_taskpolicy",
    "reconciliation.change_taskpolicy",
    "reconciliation.delete_taskpolicy",
    "compensations.view_deadletter",
]
ROLE_PERMISSIONS = {"support_staff": SUPPORT, "team_lead": TEAM_LEAD, "admin": ADMIN}


def forward(apps, schema_editor):
    alias = schema_editor.connection.alias
    schema_editor.execute(FORWARD, params=None)
    apps.get_model("handover", "AuditChainHead").objects.using(alias).get_or_create(pk=1)

    for label in ("handover", "compensations", "reconciliation"):
        app_config = apps.get_app_config(label)
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0, using=alias)
        app_config.models_module = None
    group_model = apps.get_model("auth", "Group")
    permission_model = apps.get_model("auth", "Permission")
    for group_name, dotted in ROLE_PERMISSIONS.items():
        group, _ = group_model.objects.using(alias).get_or_create(name=group_name)
        for name in dotted:
            app_label, codename = name.split(".")
            permission = permission_model.objects.using(alias).filter(
                content_type__app_label=app_label, codename=codename
            ).first()
            if permission is None:
                raise LookupError(f"permission {name} not created yet")
            group.permissions.add(permission)


def backward(apps, schema_editor):
    schema_editor.execute(BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("handover", "0007_handover_dashboard"),
        ("compensations", "0004_dead_letter_assignment"),
        ("reconciliation", "0002_default_policies"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]
    operations = [migrations.RunPython(forward, backward)]
