"""What a fan-out is, declared at design time and importable without Django (flows are data):
a group of read branches dispatched together against one shared deadline, each branch either
`required` (no decision without it) or best-effort (the group may proceed, labelled partial,
without it)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class BranchSpec:
    name: str  # as people read it: "warehouse BRS-3"
    tool: str  # a registered read tool
    args: dict[str, Any]
    required: bool = False

    def bind(self, facts: dict[str, Any]) -> BranchSpec:
        """Arguments starting with "$" name a ticket fact; the name is formatted with the facts."""
        args = {
            key: facts[value[1:]] if isinstance(value, str) and value.startswith("$") else value
            for key, value in self.args.items()
        }
        return replace(self, name=self.name.format(**facts), args=args)


@dataclass(frozen=True)
class GroupSpec:
    name: str  # "shortage.stock_and_entitlement"
    branches: tuple[BranchSpec, ...]
    deadline_ms: int
    # The merge that turns the branches' results into one decision (fanout.merge.MERGES), or
    # blank for a fan-out whose results are only gathered.
    merge: str = ""

    def __post_init__(self) -> None:
        names = [branch.name for branch in self.branches]
        if not names:
            raise ValueError(f"fan-out {self.name} has no branches")
        if len(set(names)) != len(names):
            raise ValueError(f"fan-out {self.name} names a branch twice")
        if self.deadline_ms <= 0:
            raise ValueError(f"fan-out {self.name} needs a positive deadline")

    def bind(self, facts: dict[str, Any]) -> GroupSpec:
        return replace(self, branches=tuple(branch.bind(facts) for branch in self.branches))
