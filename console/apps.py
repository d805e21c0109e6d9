from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The staff console: the queue, the run page, staff actions, dead letters, the audit page,
    notifications and roles. Its label stays `handover`, the name under which its tables
    (handover_notificationrule, handover_tenantsettings), migrations, permissions
    (`handover.act_on_run`, `handover.view_audit_trail`), URL namespace and templates were made:
    relabelling would rewrite every deployed database's migration history for a name."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "console"
    label = "handover"
    verbose_name = "Staff console"

    def ready(self) -> None:
        from axes.signals import user_locked_out

        from journal.signals import escalation_opened

        from .login_throttle import login_locked_out_audit
        from .tasks import escalation_opened_notify

        escalation_opened.connect(escalation_opened_notify, dispatch_uid="handover.notify_escalation")
        user_locked_out.connect(login_locked_out_audit, dispatch_uid="handover.audit_login_locked_out")
