"""Links out of the console: a ticket id to the tenant's helpdesk (console.models.TenantSettings)."""

from __future__ import annotations

from django import template

from console.models import helpdesk_ticket_url

register = template.Library()


@register.filter
def helpdesk_url(ticket_id: str, url_template: str) -> str:
    """`{{ run.ticket_id|helpdesk_url:helpdesk }}`: the ticket's page in the helpdesk, the id
    URL-escaped into the tenant's template (autoescaping then escapes it for the attribute)."""
    return helpdesk_ticket_url(url_template, ticket_id)
