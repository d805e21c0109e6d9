from django.apps import AppConfig


class HandoverConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "handover"
    verbose_name = "Handover console"

    def ready(self) -> None:
        from axes.signals import user_locked_out

        from journal.signals import escalation_opened

        from .login_throttle import login_locked_out_audit
        from .tasks import escalation_opened_notify

        escalation_opened.connect(escalation_opened_notify, dispatch_uid="handover.notify_escalation")
        user_locked_out.connect(login_locked_out_audit, dispatch_uid="handover.audit_login_locked_out")
