"""Audit entries as a team lead reads them: field by field, before → after, not two raw
dictionaries; the raw states stay on the page behind a disclosure."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from console import actions
from console.audit_reading import AuditChange, audit_changes
from handover import run_state_token
from handover.words import SAID_LIMIT
from journal.services import Actor


def test_each_field_reads_before_and_after_in_the_order_it_was_written() -> None:
    changes = audit_changes(
        {"status": "escalated", "reason": "run_died_mid_sequence", "open_escalations": 1},
        {"status": "running", "open_escalations": 1, "assignee": "ana"},
    )

    assert changes == [
        AuditChange("status", "escalated", "running"),
        AuditChange("reason", "run_died_mid_sequence", None),
        AuditChange("open escalations", "1", "1"),
        AuditChange("assignee", None, "ana"),
    ]
    assert [c.changed for c in changes] == [True, True, False, True]


def test_values_are_said_in_words() -> None:
    steps = [
        {"tool": "start_return", "action": "skip", "key": "k1", "why": "already performed"},
        {"tool": "issue_refund", "action": "send", "key": "k2", "why": "never attempted"},
    ]
    [resume] = audit_changes({}, {"steps": steps})
    assert resume.after == "skip “Start return”, send “Issue refund”"  # no tool declares a label here

    said = {
        c.field: c.after
        for c in audit_changes({}, {"a": None, "b": "", "c": True, "d": [1, "x"], "e": [[1]]})
    }
    assert said == {"a": "—", "b": "—", "c": "yes", "d": "1, x", "e": "1 items"}

    [long] = audit_changes({}, {"body": "x" * 500})
    assert long.after is not None and len(long.after) == SAID_LIMIT and long.after.endswith("…")


@pytest.mark.django_db(transaction=True)
def test_the_run_and_audit_pages_show_the_change_not_the_dictionaries(
    make_run: Any, persona: Any, agent_actor: Actor
) -> None:
    run = make_run(ticket_id="T-audit")
    support_user = persona("support_staff", run.tenant, "support")
    ctx = actions.StaffContext(user=support_user, tenant=run.tenant)
    actions.run_assign(ctx, run_id=run.pk, state=run_state_token(run))
    client = Client()
    client.force_login(persona("team_lead", run.tenant, "lead"))  # the audit page is a lead's

    for url in (reverse("handover:run_detail", args=[run.pk]), reverse("handover:audit")):
        body = client.get(url).content.decode()
        changes = re.search(r'<ul class="audit-changes">(.*?)</ul>', body, re.S)
        assert changes is not None, url
        assert " ".join(re.sub(r"<[^>]+>", " ", changes.group(1)).split()) == "assignee : — → support", url
        # The row says it as a sentence; the fields and the raw states are behind its Details.
        assert '<p class="audit-sentence">support took the run</p>' in body, url
        assert "<summary>Details</summary>" in body, url
        assert "raw: <code>{&quot;assignee&quot;: null}</code>" in body, url
