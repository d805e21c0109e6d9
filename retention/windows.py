"""How long a tenant must keep its ended runs: longer than any step of them can still be undone
completely. A compensation is recorded as a new intent on the ended run, so a run archived
while one of its steps could still be undone would lose that undo (its run page offers no
action once archived, and its month's rows may be dropped).

The catalogue grades such a step `reversible_until` with a `deadline_field`: the deadline is in
each call's receipt, so the catalogue itself holds no length. The length is the provider's, and
its tool declares it (tools.registry.ToolSpec.undo_window). Steps graded `reversible` with no
deadline can be undone at any time: archiving is what ends that, by design."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from compensations.models import Reversibility
from compensations.selectors import catalogue_for
from journal.models import Tenant
from tools.registry import find_tool

DAY = timedelta(days=1)


@dataclass(frozen=True)
class UndoWindow:
    """The longest time after a call that a tool's step can still be undone completely."""

    tool: str
    window: timedelta

    @property
    def days_needed(self) -> int:
        """The shortest retention, in whole days, that outlasts the window."""
        return int(self.window // DAY) + 1


def longest_undo_window(*, tenant: Tenant | None) -> UndoWindow | None:
    """The longest undo window among the catalogue entries governing `tenant`'s runs (the
    defaults when None): entries graded `reversible_until` with a receipt deadline, whose tool
    declares how far ahead that deadline lies. None when no entry has one."""
    windows = [
        UndoWindow(tool=tool, window=spec.undo_window)
        for tool, entry in catalogue_for(tenant_id=tenant.pk if tenant else None).items()
        if entry.reversibility == Reversibility.REVERSIBLE_UNTIL and entry.deadline_field
        for spec in [find_tool(tool)]
        if spec is not None and spec.undo_window is not None
    ]
    return max(windows, key=lambda found: found.window, default=None)


def retention_too_short(*, tenant: Tenant | None, retention_days: int) -> UndoWindow | None:
    """The undo window `retention_days` does not outlast for `tenant`'s runs, or None when it
    outlasts every one."""
    longest = longest_undo_window(tenant=tenant)
    if longest is None or retention_days * DAY > longest.window:
        return None
    return longest
