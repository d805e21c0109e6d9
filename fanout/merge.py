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
        entitlement = next((r for r in readings if r.tool == "entitlement" and r.result is not None), None)
        if entitlement is None or entitlement.result is None:
            # The fan-out's outcome is then required_missing; a merge is never asked to guess.
            raise ValueError("the shortage merge needs the entitlement")
        terms = entitlement.result
        allowed = [str(r) for r in terms.get("remedies") or []]
        need_by = _day(terms.get("need_by"))
        stock = [r for r in readings if r.tool == "warehouse_stock"]
        checked = [r for r in stock if r.result is not None]
        unchecked = [r for r in stock if r.result is None]

        rests_on = [
            f"{entitlement.branch}: {', '.join(allowed) or 'no remedy'} allowed"
            + (f", needed by {need_by.isoformat()}" if need_by else "")
            + (f" ({terms['clause']})" if terms.get("clause") else "")
        ]
        for reading in checked:
            result = reading.result or {}
            restock = f", restock {result['restock_date']}" if result.get("restock_date") else ""
            rests_on.append(f"{reading.branch}: {result.get('available')} x {sku} free{restock}")
        for reading in unchecked:
            rests_on.append(f"{reading.branch}: not checked ({reading.why}); nothing promised from it")

        # 1. Entitlement decides which remedies are legal.
        forbidden = [remedy for remedy in requested if remedy not in allowed]
        if forbidden:
            return Decision(
                proceed=False,
                rule="entitlement_decides_legality",
                summary=f"the entitlement does not allow {', '.join(forbidden)}; "
                f"only {', '.join(allowed) or 'no remedy'} may be proposed, so the plan needs a person",
                rests_on=tuple(rests_on),
                promise={"remedies": [r for r in requested if r in allowed]},
            )
        if "reship" not in requested:
            return Decision(
                proceed=True,
                rule="entitlement_decides_legality",
                summary=f"{', '.join(requested)} allowed",
                rests_on=tuple(rests_on),
            )

        # 2. Availability decides what may be promised: only from what was checked.
        enough = sorted(
            (r for r in checked if int((r.result or {}).get("available") or 0) >= qty),
            key=lambda r: (-int((r.result or {}).get("available") or 0), r.branch),
        )
        if enough:
            source = enough[0]
            return Decision(
                proceed=True,
                rule="availability_decides_promise",
                summary=f"reship {qty} x {sku} may be promised from {source.branch}",
                rests_on=tuple(rests_on),
                promise={"reship": {"sku": sku, "qty": qty, "from": source.branch, "when": "now"}},
            )

        # 3. A promise date is compared with the need-by date, as data.
        restocks = [d for r in checked if (d := _day((r.result or {}).get("restock_date"))) is not None]
        earliest = min(restocks) if restocks else None
        if earliest is not None and (need_by is None or earliest <= need_by):
            return Decision(
                proceed=False,
                rule="promise_date_against_need_by",
                summary=f"no checked warehouse has {qty} x {sku} now; restock on {earliest.isoformat()} "
                + (f"meets the need-by date {need_by.isoformat()}" if need_by else "(no need-by date)")
                + ": a person may promise that date instead of reshipping now",
                rests_on=tuple(rests_on),
                promise={"reship": {"sku": sku, "qty": qty, "when": earliest.isoformat()}},
            )
        available = sum(int((r.result or {}).get("available") or 0) for r in checked)
        availability_says = (
            f"{len(checked)} of {len(stock)} warehouses checked: {available} x {sku} free in all, "
            + (f"earliest restock {earliest.isoformat()}" if earliest else "no restock date")
        )
        if unchecked:
            availability_says += f"; not checked: {', '.join(r.branch for r in unchecked)}"
        return Decision(
            proceed=False,
            rule="promise_date_against_need_by",
            summary="the rules cannot settle it: the entitlement calls for a reship by the need-by date "
            "and what was checked cannot supply it in time",
            rests_on=tuple(rests_on),
            conflict={
                "question": f"reship {qty} x {sku}"
                + (f" by {need_by.isoformat()}" if need_by else "")
                + ", or another remedy?",
                "sides": [
                    {
                        "source": entitlement.branch,
                        "says": f"reship allowed; {qty} x {sku} needed"
                        + (f" by {need_by.isoformat()}" if need_by else ""),
                    },
                    {"source": "availability", "says": availability_says},
                ],
            },
        )

    return merge


# Merges by the name a flow's fan-out declares. Each factory takes the ticket's facts.
MERGES: dict[str, Callable[[dict[str, Any]], Merge]] = {
    "shortage_remedy": lambda facts: shortage_remedy(sku=str(facts["sku"]), qty=int(facts["qty"])),
}
