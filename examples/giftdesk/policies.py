"""How a dead giftdesk run recovers (SEAM_POLICY_MODULES=examples.giftdesk.policies)."""

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
        )
    ]
