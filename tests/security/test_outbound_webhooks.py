"""Issue 33, item 2: outbound calls only where a tenant may send. A tenant's admin named a
webhook at the worker's own loopback (an internal admin endpoint), and the worker POSTed to it
when a run escalated; and agents' text went into chat payloads as markup, making channel-wide
mentions and disguised links. Each test below drives the real path — the admin's form, a dead run
escalated by reconciliation, the notification task — against a real listener on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from console import tasks
from console.models import NotificationRule
from journal import services as journal
from journal.models import Escalation, Run, Tenant
from reconciliation import decisions
from tests.support.http_listener import Listener, listening

pytestmark = pytest.mark.django_db

SYSTEM = journal.Actor.system("test-sweeper")
HOOK_HOST = "hooks.tenant.example"
PUBLIC_ADDRESS = "93.184.216.34"
_real_getaddrinfo = socket.getaddrinfo


@pytest.fixture
def listener() -> Iterator[Listener]:
    with listening("/internal-admin/") as heard:
        yield heard


@pytest.fixture
def http_allowed(settings: Any) -> None:
    """Plain http, as the listener speaks it, so that a refusal below is the address's."""
    settings.SEAM_WEBHOOK_ALLOW_HTTP = True


@pytest.fixture
def loopback_allowed(settings: Any, http_allowed: None) -> None:
    settings.SEAM_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def escalate(
    make_run: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> Callable[..., dict[str, Any]]:
    """Escalate a dead run through reconciliation's decision; the notification the escalation
    queues runs as the worker would run it. Returns the task's report."""
    reports: list[dict[str, Any]] = []
    real_task = tasks.notify_escalation
    monkeypatch.setattr(
        tasks,
        "notify_escalation",
        SimpleNamespace(
            delay=lambda escalation_id: reports.append(real_task.apply(args=(escalation_id,)).get())
        ),
    )

    def run(**run_fields: Any) -> dict[str, Any]:
        dead = make_run(task_type="mystery", plan=[], **run_fields)
        Run.objects.filter(pk=dead.pk).update(last_heartbeat_at=timezone.now() - timedelta(minutes=5))
        with django_capture_on_commit_callbacks(execute=True):
            decision = decisions.run_decide(run=dead, actor=SYSTEM)
        assert decision.outcome == "escalated"
        [report] = reports
        assert report["escalation_id"] == Escalation.objects.get(run=dead).pk
        return report

    return run


def fake_dns(monkeypatch: pytest.MonkeyPatch, host: str, answers: list[str]) -> list[str]:
    """`host` resolves to each address of `answers` in turn (the last repeats); other names as
    the machine resolves them. Returns the addresses handed out."""
    handed: list[str] = []

    def getaddrinfo(name: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if name != host:
            return _real_getaddrinfo(name, port, *args, **kwargs)
        address = answers.pop(0) if len(answers) > 1 else answers[0]
        handed.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return handed


def _admin_post(client: Client, tenant: Tenant, webhook_url: str) -> Any:
    return client.post(
        reverse("admin:handover_notificationrule_add"),
        {"tenant": tenant.pk, "task_type": "", "emails": "", "webhook_url": webhook_url, "active": "on"},
    )


@pytest.fixture
def tenant_admin(persona: Any, tenant: Tenant) -> Client:
    client = Client()
    client.force_login(persona("tenant_admin", tenant))
    return client


# --- the worker never reaches an address inside the network --------------------------------------


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "127.1", "0.0.0.0", "[::ffff:127.0.0.1]"],  # noqa: S104 (not bound)
)
def test_a_rule_aimed_at_loopback_is_never_posted_to_when_a_run_escalates(
    tenant: Tenant,
    listener: Listener,
    http_allowed: None,
    escalate: Callable[..., dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
    host: str,
) -> None:
    # Written before the form checked addresses (or straight into the table): sending checks too.
    url = f"http://{host}:{listener.port}/internal-admin/"
    rule = NotificationRule.objects.create(tenant=tenant, webhook_url=url)

    report = escalate()

    assert listener.hits == []
    channel = f"webhook:{rule.pk}"
    assert report["sent"] == [] and report["failed"] == {}
    assert report["refused"][channel].startswith("destination refused: the address's host is a ")
    assert f"{channel} refused the notification: destination refused" in caplog.text
    assert "internal-admin" not in caplog.text  # the URL, a chat webhook's secret, is not logged


def test_plain_http_is_refused_when_sending_outside_debug(
    tenant: Tenant, listener: Listener, loopback_allowed: None, settings: Any, escalate: Any
) -> None:
    settings.SEAM_WEBHOOK_ALLOW_HTTP = False
    rule = NotificationRule.objects.create(tenant=tenant, webhook_url=listener.url)

    report = escalate()

    assert listener.hits == []
    assert report["refused"] == {
        f"webhook:{rule.pk}": "destination refused: the address must start with https://"
    }


def test_an_allow_listed_network_is_posted_to(
    tenant: Tenant, tenant_admin: Client, listener: Listener, loopback_allowed: None, escalate: Any
) -> None:
    saved = _admin_post(tenant_admin, tenant, listener.url)
    assert saved.status_code == 302
    rule = NotificationRule.objects.get(tenant=tenant)

    report = escalate()

    assert report["sent"] == [f"webhook:{rule.pk}"]
    [hit] = listener.hits
    assert (hit["method"], hit["path"]) == ("POST", "/internal-admin/")


def test_a_name_that_resolves_to_loopback_by_sending_time_is_refused(
    tenant: Tenant,
    tenant_admin: Client,
    listener: Listener,
    http_allowed: None,
    monkeypatch: pytest.MonkeyPatch,
    escalate: Any,
) -> None:
    # The name pointed at a public address when the rule was saved, and at loopback after.
    handed = fake_dns(monkeypatch, HOOK_HOST, [PUBLIC_ADDRESS, "127.0.0.1"])
    saved = _admin_post(tenant_admin, tenant, f"http://{HOOK_HOST}:{listener.port}/internal-admin/")
    assert saved.status_code == 302
    rule = NotificationRule.objects.get(tenant=tenant)

    report = escalate()

    assert handed == [PUBLIC_ADDRESS, "127.0.0.1"]
    assert listener.hits == []
    assert report["refused"] == {
        f"webhook:{rule.pk}": "destination refused: the address's host is a loopback address (127.0.0.1)"
    }


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed(
    tenant: Tenant, listener: Listener, loopback_allowed: None, escalate: Any, status: int
) -> None:
    with listening("/elsewhere") as elsewhere:
        listener.status = status
        listener.headers = {"Location": elsewhere.url}
        rule = NotificationRule.objects.create(tenant=tenant, webhook_url=listener.url)

        report = escalate()

    assert len(listener.hits) == 1
    assert elsewhere.hits == []
    assert report["refused"] == {f"webhook:{rule.pk}": f"HTTP {status}"}


# --- refused when saved, with the field named ----------------------------------------------------


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://127.0.0.1:8001/internal-admin/", "a loopback address (127.0.0.1)"),
        ("https://localhost/internal-admin/", "a loopback address"),
        ("https://[::1]/hook", "a loopback address (::1)"),
        ("https://10.1.2.3/hook", "a private address (10.1.2.3)"),
        ("https://192.168.0.10/hook", "a private address (192.168.0.10)"),
        ("https://[fe80::1]/hook", "a link-local address (fe80::1)"),
        ("https://224.0.0.251/hook", "a multicast address (224.0.0.251)"),
        ("https://169.254.169.254/latest/meta-data/", "a cloud metadata address (169.254.169.254)"),
        ("https://[fd00:ec2::254]/latest/meta-data/", "a cloud metadata address (fd00:ec2::254)"),
        ("https://[::ffff:169.254.169.254]/latest/", "a cloud metadata address"),
        ("https://100.100.100.200/latest/meta-data/", "a cloud metadata address (100.100.100.200)"),
        ("http://chat.example.com/hooks/1", "the address must start with https://"),
    ],
)
def test_the_admin_form_refuses_an_address_inside_the_network(
    tenant: Tenant, tenant_admin: Client, url: str, why: str
) -> None:
    response = _admin_post(tenant_admin, tenant, url)

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["webhook_url"]
    [message] = errors["webhook_url"]
    assert message.startswith("Seam does not send to this webhook: ") and why in message
    assert "field-webhook_url" in response.content.decode()
    assert not NotificationRule.objects.exists()


def test_the_admin_form_refuses_a_name_that_resolves_inside_the_network(
    tenant: Tenant, tenant_admin: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_dns(monkeypatch, HOOK_HOST, ["169.254.169.254"])

    response = _admin_post(tenant_admin, tenant, f"https://{HOOK_HOST}/latest/meta-data/")

    assert response.status_code == 200
    assert (
        "a cloud metadata address (169.254.169.254)"
        in response.context["adminform"].form.errors["webhook_url"][0]
    )
    assert not NotificationRule.objects.exists()


def test_the_admin_form_accepts_a_public_https_address(tenant: Tenant, tenant_admin: Client) -> None:
    response = _admin_post(tenant_admin, tenant, f"https://{PUBLIC_ADDRESS}/hooks/escalations")

    assert response.status_code == 302
    assert (
        NotificationRule.objects.get(tenant=tenant).webhook_url
        == f"https://{PUBLIC_ADDRESS}/hooks/escalations"
    )


# --- agents' text is inert in the chat payload ---------------------------------------------------


def test_agent_text_reaches_the_chat_payload_escaped(
    tenant: Tenant, listener: Listener, loopback_allowed: None, escalate: Any
) -> None:
    ticket = "<!channel> <https://evil.example|x> & @here"
    NotificationRule.objects.create(tenant=tenant, webhook_url=listener.url)

    report = escalate(ticket_id=ticket)

    assert len(report["sent"]) == 1
    payload = listener.json()
    text = payload["text"]
    assert text.startswith("&lt;!channel&gt; &lt;https://evil.example|x&gt; &amp; @\u2060here (mystery)")
    assert "<" not in text and ">" not in text
    # The data fields keep what the agent wrote, for a receiver that reads them as data.
    assert payload["ticket_id"] == ticket


# --- fuzzed: every spelling of an address inside the network ------------------------------------


def _inside_spellings(port: int) -> list[str]:
    """Ways to write loopback, a private network, link-local and cloud metadata addresses: the
    forms an address parser accepts beside the dotted quad (decimal, octal, hex, short), IPv6
    and IPv4-mapped forms, names, trailing dots, user-info and an unusual case. (A name this
    machine cannot resolve is no address here; names resolving inside are tested above.)"""
    loopback = [
        "127.0.0.1", "127.1", "127.0.1", "2130706433", "0x7f000001", "0x7f.0.0.1", "0177.0.0.1",
        "017700000001", "127.255.255.254", "0.0.0.0", "0",  # noqa: S104 (in a URL, never bound)
        "[::1]", "[0:0:0:0:0:0:0:1]",
        "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "localhost", "LOCALHOST", "localhost.",
    ]  # fmt: skip
    private = [
        "10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.254", "192.168.0.1", "192.168.1.254",
        "100.64.0.1", "[fc00::1]", "[fd12:3456::1]", "[::ffff:10.0.0.1]",
    ]  # fmt: skip
    link_local = [
        "169.254.169.254", "169.254.0.1", "[fe80::1]", "[fd00:ec2::254]", "100.100.100.200",
        "[::ffff:169.254.169.254]", "0xa9fea9fe", "2852039166",
    ]  # fmt: skip
    urls = []
    for host in [*loopback, *private, *link_local]:
        for scheme in ("http", "https"):
            urls.append(f"{scheme}://{host}:{port}/internal-admin/")
        urls.append(f"https://hooks.example.com@{host}:{port}/internal-admin/")
    return urls


def test_fuzzed_spellings_of_inside_addresses_are_never_saved_nor_posted_to(
    tenant: Tenant,
    tenant_admin: Client,
    listener: Listener,
    http_allowed: None,
    escalate: Callable[..., dict[str, Any]],
) -> None:
    from tests.security.figures import OUTBOUND_FUZZ

    spellings = _inside_spellings(listener.port)
    saved = [url for url in spellings if _admin_post(tenant_admin, tenant, url).status_code != 200]
    # Rows written before the form checked addresses (or straight into the table): the worker
    # checks again, after resolving, at sending time.
    NotificationRule.objects.bulk_create(
        NotificationRule(tenant=tenant, webhook_url=url) for url in spellings
    )

    report = escalate()

    OUTBOUND_FUZZ.update(
        spellings=len(spellings), saved=len(saved), sent=len(report["sent"]), heard=len(listener.hits)
    )
    assert saved == []
    assert listener.hits == []
    assert report["sent"] == [] and report["failed"] == {}
    assert len(report["refused"]) == len(spellings)
