"""The staff console's own rows: the rules for who hears about a new escalation, each tenant's
console settings, and the holder of the console's permissions. The journal's rows (runs,
intents, events) live in journal.models and the audit trail's in audit.models; the console
reads them and changes them through their owners' services."""

from __future__ import annotations

from urllib.parse import quote

from django.core.exceptions import ValidationError
from django.db import models

from journal.models import Tenant

from .outbound import DestinationRefused, destination_check


class StaffPermission(models.Model):
    """No rows: the holder of the console's own permissions, so that they are named handover.*
    (`handover.act_on_run`, `handover.view_audit_trail`) whichever app's models they concern."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_audit_trail", "Review the audit trail of every person's actions"),
            ("act_on_run", "Act on runs: compensate, resume, settle, resolve"),
        ]

    def __str__(self) -> str:
        return "the console's permissions"


class NotificationRule(models.Model):
    """Who hears about a new escalation of a task type (blank: every task type): an email to the
    listed addresses through Django's mail backend, and/or a JSON POST to a webhook (a chat
    channel's incoming hook), each with a link to the run page. Edited by admins."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="notification_rules")
    task_type = models.SlugField(max_length=64, blank=True, help_text="Blank: every task type.")
    emails = models.TextField(blank=True, help_text="Addresses, comma separated.")
    webhook_url = models.URLField(blank=True)
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["tenant", "task_type"]

    def __str__(self) -> str:
        return f"{self.tenant.slug}: {self.task_type or 'all task types'}"

    def clean(self) -> None:
        """The webhook only where a tenant may send (console.outbound): told to the admin on
        saving, and checked again on every send, since a name may resolve elsewhere later."""
        if not self.webhook_url.strip():
            return
        try:
            destination_check(self.webhook_url)
        except DestinationRefused as exc:
            message = f"Seam does not send to this webhook: {exc}."
            raise ValidationError({"webhook_url": ValidationError(message, code=exc.code)}) from exc


TICKET_ID_PLACEHOLDER = "{ticket_id}"


def validate_ticket_url_template(value: str) -> None:
    """An http(s) address with `{ticket_id}` once, and no other braces."""
    if not value.startswith(("https://", "http://")):
        raise ValidationError("the helpdesk link must start with https:// or http://", code="scheme")
    if value.count(TICKET_ID_PLACEHOLDER) != 1:
        raise ValidationError("the helpdesk link must contain {ticket_id} exactly once", code="placeholder")
    rest = value.replace(TICKET_ID_PLACEHOLDER, "")
    if "{" in rest or "}" in rest or any(c.isspace() or ord(c) < 32 for c in rest):
        raise ValidationError(
            "the helpdesk link may hold no spaces, control characters or braces besides {ticket_id}",
            code="invalid",
        )


class TenantSettings(models.Model):
    """How the staff console works for one tenant. Edited by admins in the Django admin; a tenant
    without a row has every default."""

    tenant = models.OneToOneField(
        Tenant, on_delete=models.CASCADE, primary_key=True, related_name="console_settings"
    )
    helpdesk_ticket_url = models.CharField(
        "helpdesk link for a ticket",
        max_length=500,
        blank=True,
        validators=[validate_ticket_url_template],
        help_text="The helpdesk's page of a ticket, with {ticket_id} where the ticket id goes, e.g. "
        "https://help.example.com/tickets/{ticket_id}. Blank: ticket ids are not linked.",
    )

    class Meta:
        verbose_name = "tenant's console settings"
        verbose_name_plural = "tenants' console settings"

    def __str__(self) -> str:
        return f"console settings of {self.tenant}"


def helpdesk_ticket_url(template: str, ticket_id: str) -> str:
    """The helpdesk's address of a ticket: the tenant's template with the ticket id URL-escaped
    into it (a ticket id is whatever the agent sent, so it may hold `/`, `?`, `#` or quotes)."""
    if not template or not ticket_id:
        return ""
    return template.replace(TICKET_ID_PLACEHOLDER, quote(ticket_id, safe=""))


def tenant_helpdesk_template(tenant: Tenant | None) -> str:
    """The tenant's helpdesk link template, from its settings row if one was joined or exists."""
    if tenant is None:
        return ""
    try:
        settings_row = tenant.console_settings
    except TenantSettings.DoesNotExist:
        return ""
    return settings_row.helpdesk_ticket_url if settings_row else ""
