"""How long a call may still be acting downstream after its intent was recorded (a plain value,
free of models, so the tool registry can build it when settings load)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q


@dataclass(frozen=True)
class InFlightFloor:
    """How long after its intent was recorded a call may still be acting downstream, by tool
    (tools.registry.in_flight_floor builds it from each tool's call timeout). An open intent
    younger than that is not in doubt yet, whatever threshold a sweep was given: asking now could
    hear "no record" of a call a slow provider is still carrying out."""

    default: timedelta
    by_tool: Mapping[str, timedelta] = field(default_factory=dict)

    def of(self, tool: str) -> timedelta:
        return self.by_tool.get(tool, self.default)

    def past(self, now: datetime) -> Q:
        """Intents older than their tool's floor at `now`."""
        past = Q(intended_at__lt=now - self.default) & ~Q(tool__in=list(self.by_tool))
        for tool, floor in self.by_tool.items():
            past |= Q(tool=tool, intended_at__lt=now - floor)
        return past
