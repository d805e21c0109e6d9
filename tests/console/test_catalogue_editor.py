"""The catalogue editor (console.catalogue_editor, console.catalogue_views): who may edit, what
the preview says against the tool's real intent rows, and what a save writes (the tenant's own
row, its history, an audit row) or refuses (bad input, a stale page) without writing anything."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditAction, AuditEntry
from compensations.models import CatalogueEntry, Compensation, CompensationStatus
from console import catalogue_editor as editor
from journal.models import IntentStatus, Run, RunStatus
from tests import factories

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}
TOOL = "start_return"


@pytest.fixture
def default_entry(db: None) -> CatalogueEntry:
    """The default entry of start_return (the migrated database seeds the demo's), as this file
    reads it."""
    entry, _ = CatalogueEntry.objects.update_or_create(
        tenant=None,
        tool=TOOL,
        defaults={
            "description": "Book the return's courier pickup",
            "compensating_tool": "cancel_pickup",
            "argument_mapping": {"label": "receipt.label"},
            "reversibility": "reversible_until",
            "until_condition": "until collection",
            "deadline_field": "",
            "loss": "",
        },
    )
    return entry


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _edit_url(entry: CatalogueEntry) -> str:
    return reverse("handover:catalogue_edit", args=[entry.pk])


def _preview_url(entry: CatalogueEntry) -> str:
    return reverse("handover:catalogue_preview", args=[entry.pk])


def _form(client: Client, entry: CatalogueEntry, **changes: Any) -> dict[str, Any]:
    """The edit form as the page draws it (its `seen` token included), with `changes` typed in."""
    page = client.get(_edit_url(entry))
    assert page.status_code == 200
    form = dict(page.context["form"].initial)
    form.update(changes)
    return form


def _history_rows() -> int:
    return int(CatalogueEntry.history.count())


# --- who may edit ---------------------------------------------------------------------------------


def test_an_admin_opens_the_entry_from_the_catalogue(
    tenant: Any, persona: Any, default_entry: CatalogueEntry
) -> None:
    client = _client(persona("tenant_admin", tenant))
    listing = client.get(reverse("handover:catalogue"))
    assert _edit_url(default_entry) in listing.content.decode()
    page = client.get(_edit_url(default_entry))
    assert page.status_code == 200
    assert "receipt.label" in page.content.decode()


@pytest.mark.parametrize("role", ["support_staff", "team_lead"])
def test_support_and_leads_may_read_but_not_edit(
    role: str, tenant: Any, persona: Any, default_entry: CatalogueEntry
) -> None:
    client = _client(persona(role, tenant))
    assert _edit_url(default_entry) not in client.get(reverse("handover:catalogue")).content.decode()
    assert client.get(_edit_url(default_entry)).status_code == 403
    assert client.post(_edit_url(default_entry), {"reversibility": "none"}).status_code == 403
    assert client.post(_preview_url(default_entry), {"reversibility": "none"}).status_code == 403
    assert not CatalogueEntry.objects.filter(tenant=tenant).exists()


def test_another_tenants_entry_is_not_found(
    tenant: Any, other_tenant: Any, persona: Any, default_entry: CatalogueEntry
) -> None:
    theirs = CatalogueEntry.objects.create(
        tenant=other_tenant, tool=TOOL, description="theirs", reversibility="none", staff_notes="call them"
    )
    client = _client(persona("tenant_admin", tenant))
    assert client.get(_edit_url(theirs)).status_code == 404
    assert client.post(_preview_url(theirs), {"reversibility": "none"}).status_code == 404
    posted = client.post(_edit_url(theirs), {"reversibility": "none", "seen": editor.entry_token(theirs)})
    assert posted.status_code == 404
    assert CatalogueEntry.objects.get(pk=theirs.pk).staff_notes == "call them"


# --- the preview ----------------------------------------------------------------------------------


def _performed(run: Run, n: int, receipt: dict[str, Any], *, args: dict[str, Any] | None = None) -> Any:
    return factories.call_row(
        run,
        TOOL,
        args or {"order_id": "SU-1", "reason": "damaged"},
        IntentStatus.PERFORMED,
        n=n,
        at=timezone.now() - timedelta(minutes=60 - n),
        receipt=receipt,
    )


@pytest.fixture
def receipts(tenant: Any, other_tenant: Any, make_run: Any) -> dict[str, Run]:
    """Five performed start_return calls: three receipts carry the label (one also a tracking
    number), two do not. Of the runs, one escalated with its step not undone, one escalated whose
    step was undone, one completed; another tenant's receipts are not this tenant's."""
    open_run = make_run(ticket_id="T-OPEN")
    undone_run = make_run(ticket_id="T-UNDONE")
    done_run = make_run(ticket_id="T-DONE")
    _performed(open_run, 1, {"label": "RL-1", "tracking": "TR-1"})
    _performed(open_run, 2, {"pickup_date": "2026-12-05"})
    undone = _performed(undone_run, 3, {"label": "RL-3"})
    _performed(done_run, 4, {"label": "RL-4"})
    _performed(done_run, 5, {})
    Compensation.objects.create(original=undone, status=CompensationStatus.DONE)
    Run.objects.filter(pk__in=[open_run.pk, undone_run.pk]).update(status=RunStatus.ESCALATED)
    Run.objects.filter(pk=done_run.pk).update(status=RunStatus.COMPLETED)
    elsewhere = make_run(tenant=other_tenant, ticket_id="T-ACME")
    _performed(elsewhere, 6, {})
    Run.objects.filter(pk=elsewhere.pk).update(status=RunStatus.ESCALATED)
    return {"open": open_run, "undone": undone_run, "done": done_run}


def test_the_preview_counts_the_receipts_the_undo_could_be_built_from(
    tenant: Any, persona: Any, default_entry: CatalogueEntry, receipts: dict[str, Run]
) -> None:
    client = _client(persona("tenant_admin", tenant))
    entries_before, audit_before = CatalogueEntry.objects.count(), AuditEntry.objects.count()
    mapping = json.dumps({"label": "receipt.tracking", "reason": "args.note"})
    answer = client.post(
        _preview_url(default_entry), _form(client, default_entry, argument_mapping=mapping), headers=HTMX
    )
    assert answer.status_code == 200
    preview = answer.context["preview"]
    # Only receipt 1 carries a tracking number; no call's arguments carry a note.
    assert (preview.receipts, preview.buildable) == (5, 0)
    assert dict(preview.missing) == {"receipt.tracking": 4, "args.note": 5}
    html = answer.content.decode()
    assert re.search(r'class="buildable">0<.*class="receipts">5<', html)

    answer = client.post(_preview_url(default_entry), _form(client, default_entry), headers=HTMX)
    preview = answer.context["preview"]
    assert (preview.receipts, preview.buildable) == (5, 3)
    assert preview.missing == [("receipt.label", 2)]
    # The open runs it changes: the escalated one with its step not undone, not the one undone
    # nor the completed one, nor another tenant's.
    assert [(o.run.pk, o.steps) for o in preview.open_runs] == [(receipts["open"].pk, 2)]
    assert "T-OPEN" in answer.content.decode() and "T-UNDONE" not in answer.content.decode()
    # A preview writes nothing.
    assert (CatalogueEntry.objects.count(), AuditEntry.objects.count()) == (entries_before, audit_before)


def test_the_preview_reads_the_newest_receipts_only(
    tenant: Any, default_entry: CatalogueEntry, make_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = make_run()
    for n in range(1, 5):
        _performed(run, n, {"label": f"RL-{n}"} if n > 2 else {})
    monkeypatch.setattr(editor, "RECEIPTS_READ", 2)
    draft = editor.Draft.of(default_entry)
    preview = editor.catalogue_preview(tenant=tenant, draft=draft)
    assert (preview.receipts, preview.buildable) == (2, 2)


def test_the_preview_says_what_a_new_window_means_for_each_open_run(
    tenant: Any, default_entry: CatalogueEntry, make_run: Any
) -> None:
    passed, coming = make_run(ticket_id="T-PASSED"), make_run(ticket_id="T-COMING")
    _performed(passed, 1, {"label": "RL-1", "cutoff": (timezone.now() - timedelta(hours=1)).isoformat()})
    _performed(coming, 2, {"label": "RL-2", "cutoff": (timezone.now() + timedelta(days=1)).isoformat()})
    Run.objects.filter(pk__in=[passed.pk, coming.pk]).update(status=RunStatus.RUNNING)
    draft = replace(editor.Draft.of(default_entry), deadline_field="cutoff", loss="the courier's fee")
    preview = editor.catalogue_preview(tenant=tenant, draft=draft)
    said = {o.run.ticket_id: (o.reversible_now, o.reversible_after) for o in preview.open_runs}
    assert said["T-PASSED"] == ("until collection", "partially: past its deadline, the courier's fee is lost")
    assert said["T-COMING"][0] == "until collection"
    assert said["T-COMING"][1].startswith("until ") and "the courier's fee is lost" in said["T-COMING"][1]


def test_the_preview_reads_a_fixed_number_of_queries(
    tenant: Any,
    persona: Any,
    default_entry: CatalogueEntry,
    make_run: Any,
    django_assert_max_num_queries: Any,
) -> None:
    client = _client(persona("tenant_admin", tenant))
    form = _form(client, default_entry)
    for n in range(1, 13):
        run = make_run(ticket_id=f"T-{n}")
        _performed(run, n, {"label": f"RL-{n}"} if n % 3 else {})
    Run.objects.update(status=RunStatus.ESCALATED)
    with django_assert_max_num_queries(10):
        answer = client.post(_preview_url(default_entry), form, headers=HTMX)
    preview = answer.context["preview"]
    assert (preview.receipts, preview.buildable, preview.open_runs_total) == (12, 8, 12)


# --- saving ---------------------------------------------------------------------------------------


def test_a_save_writes_the_tenants_own_entry_with_history_and_an_audit_row(
    tenant: Any, persona: Any, default_entry: CatalogueEntry
) -> None:
    admin = persona("tenant_admin", tenant)
    client = _client(admin)
    history_before = _history_rows()
    form = _form(
        client,
        default_entry,
        argument_mapping=json.dumps({"label": "receipt.label", "reason": "args.reason"}),
        until_condition="until the courier collects",
        note="the courier wants the reason too",
    )
    answer = client.post(_edit_url(default_entry), form, headers={"X-Request-ID": "req-cat"})
    assert answer.status_code == 302
    own = CatalogueEntry.objects.get(tenant=tenant, tool=TOOL)
    assert own.argument_mapping == {"label": "receipt.label", "reason": "args.reason"}
    assert own.until_condition == "until the courier collects"
    assert own.description == default_entry.description
    # The default is untouched: other tenants keep it.
    default_entry.refresh_from_db()
    assert default_entry.argument_mapping == {"label": "receipt.label"}
    assert _history_rows() == history_before + 1
    record = own.history.get()
    assert (record.history_user_id, record.history_change_reason) == (
        admin.pk,
        "the courier wants the reason too",
    )
    audit = AuditEntry.objects.get(action=AuditAction.CATALOGUE_EDIT)
    assert (audit.tenant_id, audit.user_id, audit.request_id) == (tenant.pk, admin.pk, "req-cat")
    assert audit.old_state["argument_mapping"] == {"label": "receipt.label"}
    assert audit.new_state["argument_mapping"] == own.argument_mapping
    assert (audit.old_state["default"], audit.new_state["entry"]) == (True, own.pk)
    # The audit page says it, with what changed.
    trail = _client(persona("team_lead", tenant)).get(reverse("handover:audit")).content.decode()
    assert "Changed a compensation catalogue entry" in trail
    assert "args.reason" in trail

    # A second save edits that same row (from the page drawn after the first).
    form = _form(client, own, loss="the pickup fee")
    assert client.post(_edit_url(own), form).status_code == 302
    assert CatalogueEntry.objects.filter(tool=TOOL).count() == 2
    assert CatalogueEntry.objects.get(pk=own.pk).loss == "the pickup fee"


def test_a_superuser_editing_the_default_changes_the_default(
    tenant: Any, persona: Any, default_entry: CatalogueEntry
) -> None:
    client = _client(persona("admin", tenant))
    form = _form(client, default_entry, until_condition="until the van leaves")
    assert client.post(_edit_url(default_entry), form).status_code == 302
    assert CatalogueEntry.objects.get(pk=default_entry.pk).until_condition == "until the van leaves"
    assert not CatalogueEntry.objects.filter(tenant=tenant).exists()


@pytest.mark.parametrize(
    ("changes", "field_words"),
    [
        ({"argument_mapping": '{"label": "reciept.label"}'}, "argument mapping"),
        ({"argument_mapping": "label = receipt.label"}, "argument mapping"),
        ({"argument_mapping": '["receipt.label"]'}, "argument mapping"),
        ({"compensating_tool": ""}, "undo tool"),
        ({"reversibility": "partial", "loss": ""}, "lost"),
        ({"reversibility": "sometimes"}, "reversibility"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_nothing_is_saved(
    changes: dict[str, str], field_words: str, tenant: Any, persona: Any, default_entry: CatalogueEntry
) -> None:
    client = _client(persona("tenant_admin", tenant))
    history_before = _history_rows()
    form = _form(client, default_entry, **changes)
    for url in (_edit_url(default_entry), _preview_url(default_entry)):
        answer = client.post(url, form, headers=HTMX)
        assert answer.status_code == 400
        assert field_words in answer.content.decode().lower()
    assert not CatalogueEntry.objects.filter(tenant=tenant).exists()
    assert _history_rows() == history_before
    assert not AuditEntry.objects.exists()


def test_a_mapping_to_a_field_the_receipt_never_carries_is_refused(
    tenant: Any, persona: Any, default_entry: CatalogueEntry
) -> None:
    client = _client(persona("tenant_admin", tenant))
    # The sandbox's tools declared: start_return's receipt is declared, so the system check's
    # rule (compensations.checks) applies before anything is saved.
    with override_settings(SEAM_SANDBOX_URL="http://127.0.0.1:8100"):
        form = _form(client, default_entry, argument_mapping=json.dumps({"label": "receipt.never_stored"}))
        answer = client.post(_edit_url(default_entry), form)
    assert answer.status_code == 400
    assert "never_stored" in answer.content.decode()
    assert not CatalogueEntry.objects.filter(tenant=tenant).exists()


def test_a_save_from_a_page_older_than_the_entry_is_refused(
    tenant: Any, persona: Any, default_entry: CatalogueEntry
) -> None:
    first, second = persona("tenant_admin", tenant), persona("tenant_admin", tenant, "second-admin")
    mine = _form(_client(first), default_entry, until_condition="mine")
    theirs = _form(_client(second), default_entry, until_condition="theirs")
    assert _client(second).post(_edit_url(default_entry), theirs).status_code == 302
    history_before, audit_before = _history_rows(), AuditEntry.objects.count()
    answer = _client(first).post(_edit_url(default_entry), mine)
    assert answer.status_code == 409
    assert "changed since you opened it" in answer.content.decode()
    assert CatalogueEntry.objects.get(tenant=tenant, tool=TOOL).until_condition == "theirs"
    assert (_history_rows(), AuditEntry.objects.count()) == (history_before, audit_before)
