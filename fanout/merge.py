"""Merging a fan-out's results into one decision by declared rules, in code, in a stated order
of precedence — never by concatenating the results for a model to weigh.

A merge receives one `Reading` per branch: its result, or why it has none. A missing branch is
never read as "nothing there": it is named in what the decision rests on, and nothing is
promised from it. When the rules settle the question the decision names the rule that did; when
they cannot, the decision is a conflict with both sides shown, and a person decides.

Importable without Django."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any


@dataclass(frozen=True)
class Reading:
    branch: str
    tool: str
    required: bool
    result: dict[str, Any] | None  # None: no result by the deadline
    why: str = ""  # why there is no result: "deadline" or "<error_class>: <message>"

    @property
    def checked(self) -> bool:
        return self.result is not None


@dataclass(frozen=True)
class Decision:
    proceed: bool  # the run may go on with its plan as made
    rule: str  # the declared rule that decided (or failed to)
    summary: str
    rests_on: tuple[str, ...] = ()
    conflict: dict[str, Any] | None = None  # {"question": ..., "sides": [{"source", "says"}, ...]}
    promise: dict[str, Any] = field(default_factory=dict)  # what may be promised, from what was checked

    def as_json(self) -> dict[str, Any]:
        return {
            "proceed": self.proceed,
            "rule": self.rule,
            "summary": self.summary,
            "rests_on": list(self.rests_on),
            "conflict": self.conflict,
            "promise": self.promise,
        }


Merge = Callable[[Sequence[Reading]], Decision]


@dataclass(frozen=True)
class Rule:
    name: str
    says: str


# The shortage merge's rules, highest precedence first. The page and the docs show these.
SHORTAGE_RULES = (
    Rule(
        "entitlement_decides_legality",
        "A remedy the order's entitlement does not allow is never proposed, whatever else says so.",
    ),
    Rule(
        "availability_decides_promise",
        "Units are promised only from a warehouse that was checked and has them all free now; "
        "a warehouse that did not answer counts for nothing.",
    ),
    Rule(
        "promise_date_against_need_by",
        "Without units now, the earliest checked restock date is compared with the entitlement's "
        "need-by date: on or before it, a person may promise that date; after it (or no date), "
        "the need and the availability conflict and a person decides.",
    ),
)


def _day(value: Any) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        return None


def shortage_remedy(*, sku: str, qty: int, remedies: Sequence[str] = ("credit", "reship")) -> Merge:
    """The shortage flow's merge: may the run credit the buyer and reship `qty` x `sku` now?"""
    requested = tuple(remedies)

    def merge(readings: Sequence[Reading]) -> Decision:
        shortage = _Shortage.read(readings, sku=sku, qty=qty, requested=requested)
        for rule in _SHORTAGE_RULES_IN_ORDER:
            decision = rule(shortage)
            if decision is not None:
                return decision
        return _need_and_availability_conflict(shortage)

    return merge


@dataclass(frozen=True)
class _Shortage:
    """What the shortage merge's rules read: the question asked and the branches' readings."""

    sku: str
    qty: int
    requested: tuple[str, ...]
    entitlement: Reading
    terms: dict[str, Any]
    allowed: list[str]
    need_by: date | None
    stock: list[Reading]
    checked: list[Reading]
    unchecked: list[Reading]

    @classmethod
    def read(
        cls, readings: Sequence[Reading], *, sku: str, qty: int, requested: tuple[str, ...]
    ) -> _Shortage:
        entitlement = next((r for r in readings if r.tool == "entitlement" and r.result is not None), None)
        if entitlement is None or entitlement.result is None:
            # The fan-out's outcome is then required_missing; a merge is never asked to guess.
            raise ValueError("the shortage merge needs the entitlement")
        terms = entitlement.result
        stock = [r for r in readings if r.tool == "warehouse_stock"]
        return cls(
            sku=sku,
            qty=qty,
            requested=requested,
            entitlement=entitlement,
            terms=terms,
            allowed=[str(r) for r in terms.get("remedies") or []],
            need_by=_day(terms.get("need_by")),
            stock=stock,
            checked=[r for r in stock if r.result is not None],
            unchecked=[r for r in stock if r.result is None],
        )

    @property
    def rests_on(self) -> tuple[str, ...]:
        """One line per branch: what it said, or that it was not checked and promises nothing."""
        lines = [_entitlement_says(self)]
        for reading in self.checked:
            result = reading.result or {}
            restock = f", restock {result['restock_date']}" if result.get("restock_date") else ""
            lines.append(f"{reading.branch}: {result.get('available')} x {self.sku} free{restock}")
        for reading in self.unchecked:
            lines.append(f"{reading.branch}: not checked ({reading.why}); nothing promised from it")
        return tuple(lines)


def _entitlement_says(shortage: _Shortage) -> str:
    need_by, clause = shortage.need_by, shortage.terms.get("clause")
    return (
        f"{shortage.entitlement.branch}: {', '.join(shortage.allowed) or 'no remedy'} allowed"
        + (f", needed by {need_by.isoformat()}" if need_by else "")
        + (f" ({shortage.terms['clause']})" if clause else "")
    )


def _available(reading: Reading) -> int:
    return int((reading.result or {}).get("available") or 0)


def _earliest_restock(checked: Sequence[Reading]) -> date | None:
    restocks = [d for r in checked if (d := _day((r.result or {}).get("restock_date"))) is not None]
    return min(restocks) if restocks else None


def _by_need_by(need_by: date | None) -> str:
    return f" by {need_by.isoformat()}" if need_by else ""


def _entitlement_decides_legality(shortage: _Shortage) -> Decision | None:
    """Rule 1: the entitlement decides which remedies are legal; without a reship it settles all."""
    requested, allowed = shortage.requested, shortage.allowed
    forbidden = [remedy for remedy in requested if remedy not in allowed]
    if forbidden:
        return Decision(
            proceed=False,
            rule="entitlement_decides_legality",
            summary=f"the entitlement does not allow {', '.join(forbidden)}; "
            f"only {', '.join(allowed) or 'no remedy'} may be proposed, so the plan needs a person",
            rests_on=shortage.rests_on,
            promise={"remedies": [r for r in requested if r in allowed]},
        )
    if "reship" not in requested:
        return Decision(
            proceed=True,
            rule="entitlement_decides_legality",
            summary=f"{', '.join(requested)} allowed",
            rests_on=shortage.rests_on,
        )
    return None


def _availability_decides_promise(shortage: _Shortage) -> Decision | None:
    """Rule 2: promise units now only from a checked warehouse that has them all free."""
    qty, sku = shortage.qty, shortage.sku
    enough = sorted(
        (r for r in shortage.checked if _available(r) >= qty),
        key=lambda r: (-_available(r), r.branch),
    )
    if not enough:
        return None
    source = enough[0]
    return Decision(
        proceed=True,
        rule="availability_decides_promise",
        summary=f"reship {qty} x {sku} may be promised from {source.branch}",
        rests_on=shortage.rests_on,
        promise={"reship": {"sku": sku, "qty": qty, "from": source.branch, "when": "now"}},
    )


def _promise_date_meets_need_by(shortage: _Shortage) -> Decision | None:
    """Rule 3, first half: a checked restock on or before the need-by date may be promised."""
    qty, sku, need_by = shortage.qty, shortage.sku, shortage.need_by
    earliest = _earliest_restock(shortage.checked)
    if earliest is None or (need_by is not None and earliest > need_by):
        return None
    return Decision(
        proceed=False,
        rule="promise_date_against_need_by",
        summary=f"no checked warehouse has {qty} x {sku} now; restock on {earliest.isoformat()} "
        + (f"meets the need-by date {need_by.isoformat()}" if need_by else "(no need-by date)")
        + ": a person may promise that date instead of reshipping now",
        rests_on=shortage.rests_on,
        promise={"reship": {"sku": sku, "qty": qty, "when": earliest.isoformat()}},
    )


def _need_and_availability_conflict(shortage: _Shortage) -> Decision:
    """Rule 3, second half: when no rule settles it, show both sides and let a person decide."""
    qty, sku, need_by = shortage.qty, shortage.sku, shortage.need_by
    return Decision(
        proceed=False,
        rule="promise_date_against_need_by",
        summary="the rules cannot settle it: the entitlement calls for a reship by the need-by date "
        "and what was checked cannot supply it in time",
        rests_on=shortage.rests_on,
        conflict={
            "question": f"reship {qty} x {sku}" + _by_need_by(need_by) + ", or another remedy?",
            "sides": [
                {
                    "source": shortage.entitlement.branch,
                    "says": f"reship allowed; {qty} x {sku} needed" + _by_need_by(need_by),
                },
                {"source": "availability", "says": _availability_says(shortage)},
            ],
        },
    )


def _availability_says(shortage: _Shortage) -> str:
    checked, unchecked, earliest = shortage.checked, shortage.unchecked, _earliest_restock(shortage.checked)
    available = sum(_available(r) for r in checked)
    says = (
        f"{len(checked)} of {len(shortage.stock)} warehouses checked: {available} x {shortage.sku} free in all, "
        + (f"earliest restock {earliest.isoformat()}" if earliest else "no restock date")
    )
    if unchecked:
        says += f"; not checked: {', '.join(r.branch for r in unchecked)}"
    return says


# The rules that may settle the question, in SHORTAGE_RULES' order of precedence; when none
# does, the need and the availability conflict.
_SHORTAGE_RULES_IN_ORDER: tuple[Callable[[_Shortage], Decision | None], ...] = (
    _entitlement_decides_legality,
    _availability_decides_promise,
    _promise_date_meets_need_by,
)


# Merges by the name a flow's fan-out declares. Each factory takes the ticket's facts.
MERGES: dict[str, Callable[[dict[str, Any]], Merge]] = {
    "shortage_remedy": lambda facts: shortage_remedy(sku=str(facts["sku"]), qty=int(facts["qty"])),
}
