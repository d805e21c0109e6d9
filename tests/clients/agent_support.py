"""What the framework agents under test share: plain tools on the giftdesk's keyless points ledger
(written with no thought of Seam), the script their fake models follow, and the run they
journal in. The agents run in child processes (`python -m tests.clients.langgraph_agent`, …)
that a test kills."""

from __future__ import annotations

import os
import time
from typing import Any

import requests
from seam_client import Run, SeamClient

# The model's script: two points awards, then a final answer.
AWARDS = [
    {"customer": "C-7", "points": 100, "reference": "GD-AG-1"},
    {"customer": "C-7", "points": 250, "reference": "GD-AG-2"},
]
FINAL_ANSWER = "Both awards are booked."
VERSIONS = {"schema": "1", "flow": "agent", "policy": "1", "capability": "points"}


def award_points(customer: str, points: int, reference: str) -> dict[str, Any]:
    """Award loyalty points to a customer under a reference."""
    response = requests.post(
        f"{os.environ['GIFTDESK_URL']}/points",
        json={"customer": customer, "points": points, "reference": reference},
        timeout=5,
    )
    response.raise_for_status()
    entry: dict[str, Any] = response.json()
    # The test's crash point: the ledger booked the entry, and the answer goes no further.
    if os.environ.get("HOLD_AFTER_REFERENCE") == reference:
        time.sleep(3600)
    return entry


def points_balance(customer: str) -> str:
    """How many points a customer holds (reads only)."""
    state = requests.get(f"{os.environ['GIFTDESK_URL']}/state", timeout=5).json()
    return str(sum(entry["points"] for entry in state["points"] if entry["customer"] == customer))


def the_run() -> Run:
    """The agent's run: the same one again when the agent is started again on the same id."""
    seam = SeamClient(os.environ["SEAM_URL"], os.environ["SEAM_TOKEN"])
    return seam.start_run(
        task_type="points_agent", versions=VERSIONS, plan=[], external_id=os.environ["RUN_EXTERNAL_ID"]
    )
