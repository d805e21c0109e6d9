"""The dead-letter queue and the catalogue through their URLs. A dead letter is made as the
product makes one: the pickup of a return is collected by the courier in the sandbox, so the
compensating cancel_pickup is refused for good (as in test_executor)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse

from audit.models import AuditAction, AuditEntry
from compensations.models import CompensationStatus, DeadLetter
from compensations.services import compensation_execute, compensation_request
from journal import services as journal
from tests import factories
from tools import services as tools

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox_tool_catalogue() -> Iterator[None]:
    """The sandbox's tools declared (sandbox/seam.py; nothing is called, so nothing need listen
    at their address)."""
    with override_settings(SEAM_SANDBOX_URL="http://127.0.0.1:8100"):
        yield


EXECUTOR = journal.Actor.system("test-executor")
HTMX = {"HX-Request": "true"}


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _act(client: Client, letter: DeadLetter, action: str, data: dict[str, Any] | None = None) -> Any:
    """Post an action with the state of the letter as it is now (what a fresh page shows)."""
    url = reverse("handover:dead_letter_act", args=[letter.pk, action])
    state = DeadLetter.objects.filter(pk=letter.pk).values_list("version", flat=True).first()
    form = {"state": str(state), **(data or {})}
    return client.post(url, form, headers={**HTMX, "X-Request-ID": f"req-{action}"})


@pytest.fixture
def people(catalogue: None, tenant: Any, persona: Any) -> dict[str, Any]:
    # The team lead exists first: a new dead letter goes to the tenant's first team lead.
    lead = persona("team_lead", tenant)
    return {
        "lead": lead,
        "support": persona("support_staff", tenant),
        "nobody": factories.StaffUserFactory(username="no-role", membership__tenant=tenant),
    }


@pytest.fixture
def dead_letter(sandbox_tools: str, people: dict[str, Any], make_run: Any) -> DeadLetter:
    run = make_run()
    pickup = tools.tool_perform(
        run=run, tool="start_return", args={"order_id": "SU-90317"}, turn=1, actor=EXECUTOR
    ).intent
    requests.post(
        f"{sandbox_tools}/sandbox/api/returns/collect", json={"label": pickup.receipt["label"]}, timeout=5
    ).raise_for_status()
    failed = compensation_execute(
        compensation=compensation_request(original=pickup, actor=EXECUTOR), actor=EXECUTOR
    )
    assert failed.status == CompensationStatus.DEAD_LETTERED
    letter = DeadLetter.objects.select_related("compensation__original__run").get(compensation=failed)
    assert letter.owner == people["lead"]
    return letter


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[tuple[Any, ...], bool]]]:
    """compensate_step recorded instead of sent: [(arguments, transaction still open?)]."""
    from compensations.tasks import compensate_step

    calls: dict[str, list[tuple[tuple[Any, ...], bool]]] = defaultdict(list)

    def record(*args: Any) -> None:
        calls[compensate_step.name].append((args, connection.in_atomic_block))

    monkeypatch.setattr(compensate_step, "delay", record)
    return calls


def _entries() -> list[tuple[str, str, str]]:
    return list(AuditEntry.objects.order_by("seq").values_list("action", "username", "request_id"))


def test_the_page_lists_open_dead_letters_and_only_team_leads_see_assign(
    dead_letter: DeadLetter, people: dict[str, Any]
) -> None:
    url = reverse("handover:dead_letters")
    support_page = _client(people["support"]).get(url).content.decode()
    assert f'id="dl-{dead_letter.pk}"' in support_page
    assert "undo of “Start the return” failed" in support_page
    assert "Take ownership" in support_page and "Retry" in support_page
    assert 'name="owner"' not in support_page

    lead_page = _client(people["lead"]).get(url).content.decode()
    assert 'name="owner"' in lead_page
    assert f'<option value="{people["support"].pk}"' in lead_page

    partial = _client(people["support"]).get(url, headers=HTMX).content.decode()
    assert partial.lstrip().startswith('<div id="letters"')


def test_support_staff_take_a_dead_letter(dead_letter: DeadLetter, people: dict[str, Any]) -> None:
    support = people["support"]
    response = _act(_client(support), dead_letter, "take")

    assert response.status_code == 200
    assert response.content.decode().lstrip().startswith('<div id="letters"')
    assert DeadLetter.objects.get(pk=dead_letter.pk).owner == support
    assert _entries() == [(AuditAction.DEAD_LETTER_TAKE, support.username, "req-take")]
    entry = AuditEntry.objects.get()
    assert entry.old_state == {"dead_letter": dead_letter.pk, "owner": people["lead"].username}
    assert entry.run_id == dead_letter.compensation.original.run_id


def test_support_staff_cannot_assign_a_dead_letter(dead_letter: DeadLetter, people: dict[str, Any]) -> None:
    response = _act(_client(people["support"]), dead_letter, "assign", {"owner": people["support"].pk})
    assert response.status_code == 403
    assert DeadLetter.objects.get(pk=dead_letter.pk).owner == people["lead"]
    assert not AuditEntry.objects.exists()


def test_a_team_lead_assigns_a_dead_letter_to_staff_of_the_tenant_only(
    dead_letter: DeadLetter, people: dict[str, Any], persona: Any, other_tenant: Any
) -> None:
    lead, support = people["lead"], people["support"]
    outsider = persona("support_staff", other_tenant)

    refused = _act(_client(lead), dead_letter, "assign", {"owner": outsider.pk})
    assert refused.status_code == 400
    assert "owner must be an active staff member" in refused.content.decode()
    no_role = _act(_client(lead), dead_letter, "assign", {"owner": people["nobody"].pk})
    assert no_role.status_code == 400
    assert not AuditEntry.objects.exists()

    response = _act(_client(lead), dead_letter, "assign", {"owner": support.pk})
    assert response.status_code == 200
    assert DeadLetter.objects.get(pk=dead_letter.pk).owner == support
    assert _entries() == [(AuditAction.DEAD_LETTER_ASSIGN, lead.username, "req-assign")]
    assert AuditEntry.objects.get().new_state == {"dead_letter": dead_letter.pk, "owner": support.username}


def test_retry_starts_a_new_round_and_queues_the_compensation_after_commit(
    dead_letter: DeadLetter, people: dict[str, Any], queued: Any
) -> None:
    support = people["support"]
    round_before = dead_letter.compensation.retry_round

    response = _act(_client(support), dead_letter, "retry", {"note": "courier says not yet collected"})

    assert response.status_code == 200
    compensation = dead_letter.compensation
    compensation.refresh_from_db()
    assert (compensation.status, compensation.retry_round, compensation.attempts) == (
        CompensationStatus.PENDING,
        round_before + 1,
        0,
    )
    assert queued["compensations.compensate_step"] == [((compensation.pk,), False)]
    assert _entries() == [(AuditAction.DEAD_LETTER_RETRY, support.username, "req-retry")]
    assert AuditEntry.objects.get().new_state["retry_round"] == round_before + 1

    again = _act(_client(support), dead_letter, "retry")
    assert again.status_code == 409
    assert len(queued["compensations.compensate_step"]) == 1


def test_resolve_needs_a_note(dead_letter: DeadLetter, people: dict[str, Any]) -> None:
    support = people["support"]

    refused = _act(_client(support), dead_letter, "resolve", {"note": " "})
    assert refused.status_code == 400
    assert "note" in refused.content.decode()
    assert DeadLetter.objects.get(pk=dead_letter.pk).resolved_at is None
    assert not AuditEntry.objects.exists()

    response = _act(_client(support), dead_letter, "resolve", {"note": "cancelled with the courier by phone"})
    assert response.status_code == 200
    letter = DeadLetter.objects.get(pk=dead_letter.pk)
    assert letter.resolved_by == support
    assert letter.resolution_note == "cancelled with the courier by phone"
    assert _entries() == [(AuditAction.DEAD_LETTER_RESOLVE, support.username, "req-resolve")]
    assert f'id="dl-{letter.pk}"' not in response.content.decode()  # it left the open list
    resolved = _client(support).get(reverse("handover:dead_letters"), {"show": "resolved"})
    assert "cancelled with the courier by phone" in resolved.content.decode()


@pytest.mark.parametrize(
    ("action", "data"),
    [("take", {}), ("assign", {"owner": "0"}), ("retry", {}), ("resolve", {"note": "done"})],
)
def test_another_tenants_dead_letter_is_not_found(
    dead_letter: DeadLetter, persona: Any, other_tenant: Any, action: str, data: dict[str, Any]
) -> None:
    outsider = persona("team_lead", other_tenant)
    response = _act(_client(outsider), dead_letter, action, data)
    assert response.status_code == 404
    assert f'id="dl-{dead_letter.pk}"' not in response.content.decode()
    letter = DeadLetter.objects.get(pk=dead_letter.pk)
    assert (letter.owner, letter.resolved_at) == (dead_letter.owner, None)
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize("action", ["take", "assign", "retry", "resolve"])
def test_a_user_without_a_role_or_a_login_is_refused(
    dead_letter: DeadLetter, people: dict[str, Any], action: str
) -> None:
    data = {"note": "done", "owner": people["nobody"].pk}
    assert _act(_client(people["nobody"]), dead_letter, action, data).status_code == 403
    anonymous = _act(Client(), dead_letter, action, data)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    assert not AuditEntry.objects.exists()
    assert DeadLetter.objects.get(pk=dead_letter.pk).compensation.status == CompensationStatus.DEAD_LETTERED


# --- the catalogue -----------------------------------------------------------------------------


def test_the_catalogue_is_read_only_for_staff_and_editable_by_admins(
    people: dict[str, Any], persona: Any, tenant: Any
) -> None:
    url = reverse("handover:catalogue")

    support = _client(people["support"]).get(url)
    assert support.status_code == 200
    body = support.content.decode()
    assert "<code>cancel_pickup</code>" in body and "until collection" in body
    assert "Edit in the admin" not in body and "/admin/" not in body

    admin = _client(persona("admin", tenant)).get(url).content.decode()
    assert "Edit in the admin" in admin

    assert _client(people["nobody"]).get(url).status_code == 403


# --- the state a person decided on, and an honest answer (issue 33 item 1, issue 32 item 9) -----


def test_an_action_on_a_letter_that_changed_since_the_page_is_refused_and_changes_nothing(
    dead_letter: DeadLetter, people: dict[str, Any], queued: Any
) -> None:
    lead, support = people["lead"], people["support"]
    seen = dead_letter.state_token
    assert _act(_client(support), dead_letter, "take").status_code == 200  # the letter moves

    url = reverse("handover:dead_letter_act", args=[dead_letter.pk, "resolve"])
    stale = _client(lead).post(url, {"state": seen, "note": "undone by hand"}, headers=HTMX)

    assert stale.status_code == 409
    body = stale.content.decode()
    assert "This dead letter changed — nothing was applied." in body
    assert f"owner: {support.username}" in body  # what changed, named
    letter = DeadLetter.objects.get(pk=dead_letter.pk)
    assert (letter.resolved_at, letter.owner) == (None, support)
    assert [action for action, _user, _req in _entries()] == [AuditAction.DEAD_LETTER_TAKE]

    missing = _client(lead).post(url, {"note": "undone by hand"}, headers=HTMX)
    assert missing.status_code == 400 and "state is required" in missing.content.decode()
    stale_retry = _client(lead).post(
        reverse("handover:dead_letter_act", args=[dead_letter.pk, "retry"]), {"state": seen}, headers=HTMX
    )
    assert stale_retry.status_code == 409
    assert queued["compensations.compensate_step"] == []
    assert DeadLetter.objects.get(pk=dead_letter.pk).compensation.status == CompensationStatus.DEAD_LETTERED


@pytest.fixture
def worker_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    """compensate_step run at once, in the request's on_commit (as an eager worker would)."""
    from compensations.tasks import compensate_step

    monkeypatch.setattr(compensate_step, "delay", lambda pk: compensate_step.run(pk))


def test_a_retry_that_fails_again_says_so_with_the_error(
    dead_letter: DeadLetter, people: dict[str, Any], worker_inline: None
) -> None:
    response = _act(_client(people["support"]), dead_letter, "retry", {"note": "try once more"})

    assert response.status_code == 200
    body = response.content.decode()
    assert "Done." not in body
    assert "Retry failed again: HTTP 409: the courier collected" in body
    letter = DeadLetter.objects.get(pk=dead_letter.pk)
    assert letter.resolved_at is None and letter.compensation.status == CompensationStatus.DEAD_LETTERED


def test_a_queued_retry_says_it_is_queued(
    dead_letter: DeadLetter, people: dict[str, Any], queued: Any
) -> None:
    response = _act(_client(people["support"]), dead_letter, "retry")
    assert "Retry queued: this page updates when the worker has sent it." in response.content.decode()


def test_the_page_asks_in_a_dialog_labels_its_notes_and_polls_for_changes(
    dead_letter: DeadLetter, people: dict[str, Any]
) -> None:
    client = _client(people["lead"])
    url = reverse("handover:dead_letters")
    page = client.get(url)
    body = page.content.decode()
    assert "hx-confirm" not in body
    assert f'data-opens-dialog="dl-{dead_letter.pk}-retry-confirm"' in body
    assert f'<label for="dl-{dead_letter.pk}-resolve-note">Note:</label>' in body
    assert f'<label for="dl-{dead_letter.pk}-retry-note">Note (optional)</label>' in body
    assert 'hx-trigger="every 4s' in body

    state = page.context["page_state"]
    assert client.get(url, {"show": "open", "state": state}, headers=HTMX).status_code == 204
    _act(_client(people["support"]), dead_letter, "take")
    moved = client.get(url, {"show": "open", "state": state}, headers=HTMX)
    assert moved.status_code == 200 and f"<dd>{people['support'].username}</dd>" in moved.content.decode()
