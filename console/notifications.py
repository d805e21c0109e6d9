"""Telling people about a new escalation: an email through Django's mail backend and a JSON POST
to a webhook (a chat channel's incoming hook), per the tenant's NotificationRule rows for the
run's task type, each with a link to the run page.

Delivery is best effort and prefers losing to repeating. The escalation's own transaction queues one
task after it commits (`escalation_notify_schedule`); the task is acknowledged early, so a worker
that dies mid-send loses the notification rather than repeating it: the escalation is on the
dashboard's queue either way, and a lost message is preferable to a duplicate in a chat channel.
A channel that fails transiently (no answer, a 5xx, an SMTP error) is retried by the task with
the channels already delivered carried along, so only the failed ones are tried again (a
webhook that took the POST but timed out before answering may hear twice).

A webhook is posted to only where a tenant may send (console.outbound: checked again at each
send, after resolving its name), and its chat text is escaped for Slack's markup, since ticket
ids and details come from agents."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import requests
from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Q, QuerySet
from django.urls import reverse

from handover import why_words
from journal.models import Escalation, OutcomeReason, Run

from . import outbound
from .models import NotificationRule

logger = logging.getLogger(__name__)


@dataclass
class NotifyReport:
    """What one attempt at notifying about an escalation did, channel by channel. A channel is
    `email:<rule id>` or `webhook:<rule id>`."""

    escalation_id: int
    sent: list[str] = field(default_factory=list)
    # Delivered by an earlier attempt of the same task; not sent again.
    already_done: list[str] = field(default_factory=list)
    # Failed transiently: worth another attempt. Channel → why.
    failed: dict[str, str] = field(default_factory=dict)
    # Refused for good (a 4xx or a redirect from the webhook, or an address a tenant may not
    # send to: console.outbound): not retried. Channel → why.
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def done(self) -> list[str]:
        """Every channel delivered so far, this attempt or an earlier one."""
        return [*self.already_done, *self.sent]

    def as_dict(self) -> dict[str, Any]:
        return {
            "escalation_id": self.escalation_id,
            "sent": self.sent,
            "already_done": self.already_done,
            "failed": self.failed,
            "refused": self.refused,
        }


def notification_rules_for(run: Run) -> QuerySet[NotificationRule]:
    """The active rules of the run's tenant for its task type, or for every task type."""
    return (
        NotificationRule.objects.filter(tenant_id=run.tenant_id, active=True)
        .filter(Q(task_type=run.task_type) | Q(task_type=""))
        .order_by("pk")
    )


def run_url(run: Run) -> str:
    """The absolute link to the run's page in the staff console."""
    return settings.SEAM_BASE_URL.rstrip("/") + reverse("handover:run_detail", args=[run.pk])


def escalation_notify(escalation_id: int, *, done: Collection[str] = ()) -> NotifyReport:
    """Email and post to every channel the matching rules name, except those in `done`
    (delivered by an earlier attempt). An address or webhook named by several rules is used
    once. Never raises for a channel's failure: it is reported, transient or not."""
    report = NotifyReport(escalation_id=escalation_id)
    escalation = Escalation.objects.select_related("run__tenant").filter(pk=escalation_id).first()
    if escalation is None:
        logger.warning("escalation %s no longer exists; nobody notified", escalation_id)
        return report
    run = escalation.run
    message = _Message.of(escalation)
    seen_addresses: set[str] = set()
    seen_webhooks: set[str] = set()
    for rule in notification_rules_for(run):
        addresses = []
        for address in _addresses(rule.emails):
            if address.lower() not in seen_addresses:
                seen_addresses.add(address.lower())
                addresses.append(address)
        if addresses:
            _deliver(report, f"email:{rule.pk}", done, partial(_send_email, message, addresses))
        url = rule.webhook_url.strip()
        if url and url not in seen_webhooks:
            seen_webhooks.add(url)
            _deliver(report, f"webhook:{rule.pk}", done, partial(_post_webhook, message, url))
    return report


# --- channels ----------------------------------------------------------------------------------


class _Refused(Exception):
    """The channel answered and said no; asking again would get the same answer."""


class _Failed(Exception):
    """The channel did not deliver, for a reason that may pass."""


@dataclass(frozen=True)
class _Message:
    escalation_id: int
    ticket_id: str
    order_id: str
    task_type: str
    reason: str
    reason_label: str
    detail: str
    why: dict[str, Any]
    tenant: str
    run_url: str

    @classmethod
    def of(cls, escalation: Escalation) -> _Message:
        run = escalation.run
        reason = str(escalation.reason)
        label = OutcomeReason(reason).label if reason in OutcomeReason.values else reason
        return cls(
            escalation_id=escalation.pk,
            ticket_id=run.ticket_id,
            order_id=run.order_id,
            task_type=run.task_type,
            reason=reason,
            reason_label=str(label),
            detail=why_words.run_why_words(escalation.why, escalation.detail),
            why=dict(escalation.why),
            tenant=run.tenant.name,
            run_url=run_url(run),
        )

    @property
    def subject(self) -> str:
        # Ticket ids come from agents: no line break may reach a header.
        return _one_line(f"[Seam] {self.ticket_id or 'A run'} escalated: {self.reason}")

    @property
    def text(self) -> str:
        ticket = self.ticket_id or "a run"
        return f"{ticket} ({self.task_type}) escalated: {self.reason_label}. {self.detail}".strip()

    def body(self) -> str:
        return "\n".join(
            [
                "A run was handed to a person.",
                "",
                f"Tenant:    {self.tenant}",
                f"Ticket:    {self.ticket_id or '-'}",
                f"Order:     {self.order_id or '-'}",
                f"Task type: {self.task_type}",
                f"Reason:    {self.reason} ({self.reason_label})",
                f"Detail:    {self.detail or '-'}",
                "",
                f"Open the run: {self.run_url}",
                "",
            ]
        )

    def payload(self) -> dict[str, Any]:
        """The webhook's JSON. `text` is what a Slack-style channel shows, so it is escaped for
        that markup; the other fields are data, as written, for a receiver that reads them."""
        return {
            "text": chat_escape(f"{self.text}\n{self.run_url}"),
            "run_url": self.run_url,
            "ticket_id": self.ticket_id,
            "order_id": self.order_id,
            "task_type": self.task_type,
            "reason": self.reason,
            "detail": self.detail,
            "why": self.why,
            "escalation_id": self.escalation_id,
        }


# Channel-wide mentions that Slack-compatible chats (Mattermost, Rocket.Chat) honour in plain
# text; Slack itself only in the `<!channel>` form, which the escaping below makes inert.
# (Not after a letter or dot: `ops@here.example` is an address.)
_CHANNEL_MENTION = re.compile(r"(?<![\w.+-])@(channel|here|everyone|all)\b", re.IGNORECASE)


def chat_escape(text: str) -> str:
    """Text for a Slack-style message: `&`, `<` and `>` as Slack's escapes, so that what agents
    wrote (`<!channel>`, `<https://evil.example|Open the run>`) shows as text instead of a
    mention or a disguised link, and a word joiner after the `@` of a channel-wide mention."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _CHANNEL_MENTION.sub("@\u2060\\1", escaped)


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _addresses(emails: str) -> list[str]:
    return [a.strip() for a in re.split(r"[,\s]+", emails) if a.strip()]


def _deliver(report: NotifyReport, channel: str, done: Collection[str], send: Callable[[], None]) -> None:
    if channel in done:
        report.already_done.append(channel)
        return
    try:
        send()
    except _Refused as exc:
        report.refused[channel] = str(exc)
        logger.error("escalation %s: %s refused the notification: %s", report.escalation_id, channel, exc)
    except _Failed as exc:
        report.failed[channel] = str(exc)
        logger.warning("escalation %s: %s failed: %s", report.escalation_id, channel, exc)
    else:
        report.sent.append(channel)


def _send_email(message: _Message, addresses: list[str]) -> None:
    try:
        send_mail(message.subject, message.body(), settings.DEFAULT_FROM_EMAIL, addresses)
    except OSError as exc:  # smtplib's errors are OSErrors, as are refused connections
        raise _Failed(f"{type(exc).__name__}: {exc}") from exc


def _post_webhook(message: _Message, url: str) -> None:
    try:
        answer = outbound.post_json(url, message.payload(), timeout=settings.SEAM_WEBHOOK_TIMEOUT_SECONDS)
    except outbound.DestinationRefused as exc:
        # Not where a tenant may send (console.outbound): asking again gets the same answer.
        raise _Refused(f"destination refused: {exc}") from exc
    except outbound.DestinationUnresolved as exc:
        raise _Failed(f"NameResolutionError: {exc}") from exc
    except requests.RequestException as exc:
        # Only the kind of failure: requests' messages repeat the URL, and a chat webhook's URL
        # is its secret.
        raise _Failed(type(exc).__name__) from exc
    # A redirect is not followed (a redirected POST would arrive as a GET, and elsewhere than
    # the address checked): it counts as a refusal, as any other answer outside 2xx and 5xx.
    if answer.status >= 500:
        raise _Failed(f"HTTP {answer.status}")
    if not 200 <= answer.status < 300:
        raise _Refused(f"HTTP {answer.status}")
