"""tools.discovery: Seam's plug-ins are the installed apps' seam.py modules, found as the admin
finds admin.py; installing an app turns its declarations on, and uninstalling it turns them off."""

from __future__ import annotations

import pytest
from django.test import modify_settings

from compensations.defaults import catalogue_declared
from reconciliation.defaults import policies_declared
from scenarios.registry import all_flows, all_tickets
from tools.discovery import declared, seam_modules
from tools.registry import ToolSpec, all_tools

GIFTDESK = "examples.giftdesk"


def _names() -> list[str]:
    return [module.__name__ for module in seam_modules()]


def test_the_suites_installed_apps_declare_the_demo() -> None:
    assert _names() == ["sandbox.seam", "scenarios.seam"]
    assert "returns" in all_flows()
    assert {entry.tool for entry in catalogue_declared()} >= {"start_return", "issue_refund"}


def test_installing_an_app_turns_on_everything_its_seam_module_declares_and_no_more() -> None:
    before = (set(all_tools()), set(all_flows()), {p.task_type for p in policies_declared()})

    with modify_settings(INSTALLED_APPS={"append": GIFTDESK}):
        assert _names() == ["sandbox.seam", "scenarios.seam", f"{GIFTDESK}.seam"]
        assert set(all_tools()) == before[0] | {"load_gift_card", "award_points", "send_goodwill_email"}
        assert "goodwill_credit" in all_flows() and "GD-100" in all_tickets()
        assert {p.task_type for p in policies_declared()} == before[2] | {"goodwill_credit", "points_agent"}
        assert {e.tool for e in catalogue_declared()} >= {"load_gift_card", "award_points"}

    assert (set(all_tools()), set(all_flows()), {p.task_type for p in policies_declared()}) == before


def test_only_the_five_declarations_are_read() -> None:
    with pytest.raises(ValueError, match="not one of tools, catalogue, policies, flows, tickets"):
        list(declared("connectors", ToolSpec))
