"""How a dead MCP session's run recovers (SEAM_POLICY_MODULES=examples.mcpdesk.policies): an
agent's session cannot be resumed by Seam (the agent decided each call), so once its calls in
doubt are settled it goes to a person with the handover, nothing undone."""

from __future__ import annotations

from datetime import timedelta

from reconciliation.defaults import TaskPolicySpec

TASK_TYPE = "desk_session"


def policies() -> list[TaskPolicySpec]:
    return [
        TaskPolicySpec(
            TASK_TYPE,
            "compensate_and_escalate",
            undo_before_escalating=False,
            max_resume_age=timedelta(hours=1),
            notes="An agent's MCP session: Seam settles its calls in doubt with the desk, then a "
            "person reads the handover and finishes what the agent was doing.",
        )
    ]
