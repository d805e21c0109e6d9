"""How a dead giftdesk run recovers (SEAM_POLICY_MODULES=examples.giftdesk.policies): the scripted
flow's goodwill_credit, and the framework agents' points_agent."""

from __future__ import annotations

from datetime import timedelta

from reconciliation.defaults import TaskPolicySpec


def policies() -> list[TaskPolicySpec]:
    return [
        TaskPolicySpec(
            "goodwill_credit",
            "resume_until_phase",
            phase="notify",
            max_resume_age=timedelta(hours=1),
            notes="Resume the money and the points, which the ticket fully decides; once the run "
            "reached the email, a person checks what the customer was told before anything more.",
        ),
        # docs/integrating.md's framework agents (points_langgraph.py, points_openai.py,
        # points_pydantic.py): the model decided each call, so Seam cannot resume the run.
        TaskPolicySpec(
            "points_agent",
            "compensate_and_escalate",
            undo_before_escalating=False,
            notes="An agent's points run: Seam settles its calls in doubt with the ledger's lookup, "
            "then a person reads the handover and finishes what the agent was doing.",
        ),
    ]
