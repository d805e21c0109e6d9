"""`python manage.py reconcile [--older-than SECONDS] [--run ID] [--decide]`: one sweep, now."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from journal.services import Actor
from reconciliation.decisions import dead_runs, run_decide
from reconciliation.services import ReconcileOutcome, SweepReport, reconcile_sweep


class Command(BaseCommand):
    help = "Settle stale open intents now by asking their downstream systems, and print what was settled."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than",
            type=float,
            default=None,
            metavar="SECONDS",
            help=(
                "Treat intents (and run heartbeats) older than this as stale; default: the settings. "
                "An intent whose call may still be in flight (younger than its tool's call timeout "
                "plus SEAM_IN_FLIGHT_MARGIN_SECONDS) is held back whatever this says."
            ),
        )
        parser.add_argument("--run", default=None, metavar="ID", help="Only this run's intents.")
        parser.add_argument("--limit", type=int, default=500)
        parser.add_argument(
            "--decide",
            action="store_true",
            help="Then give every dead run whose calls are all settled its policy's outcome (resume or escalate).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        older_than = _older_than(options["older_than"])
        run_id = _run_id(options["run"])
        actor = Actor.system("manage.py reconcile")
        report = reconcile_sweep(older_than=older_than, run_id=run_id, limit=options["limit"], actor=actor)
        self._print_sweep(report)
        if options["decide"]:
            self._decide(quiet_for=older_than, run_id=run_id, limit=options["limit"], actor=actor)

    def _print_sweep(self, report: SweepReport) -> None:
        """Each intent the sweep settled or failed to, a count per outcome, and what it held back."""
        for result in report.results:
            if result.outcome == ReconcileOutcome.SKIPPED:
                continue
            line = f"intent {result.intent_id}: {result.outcome}"
            self.stdout.write(f"{line} ({result.detail})" if result.detail else line)
        summary = ", ".join(f"{n} {outcome}" for outcome, n in report.counts.items() if n)
        self.stdout.write(f"reconciled {len(report.results)} stale intent(s): {summary or 'nothing to do'}")
        if report.held_back and report.held_until is not None:
            self.stdout.write(
                f"held back {report.held_back} intent(s) whose call may still be in flight "
                f"(younger than their tool's call timeout plus the margin, whatever --older-than says); "
                f"not asked about before {timezone.localtime(report.held_until):%Y-%m-%d %H:%M:%S %Z}"
            )

    def _decide(
        self, *, quiet_for: timedelta | None, run_id: uuid.UUID | None, limit: int, actor: Actor
    ) -> None:
        """Give each dead run whose calls are all settled its policy's outcome, and print it."""
        runs = dead_runs(quiet_for=quiet_for)
        if run_id is not None:
            runs = runs.filter(pk=run_id)
        for run in runs[:limit]:
            decision = run_decide(run=run, actor=actor, quiet_for=quiet_for)
            reason = f" {decision.reason}" if decision.reason else ""
            detail = f": {_facts(decision.why.as_json())}" if decision.why is not None else ""
            self.stdout.write(f"run {decision.run_id} ({run.ticket_id}): {decision.outcome}{reason}{detail}")


def _facts(why: dict[str, Any]) -> str:
    """A decision's Why on one line: its code, then each fact as name=value."""
    facts = " ".join(
        f"{name}={json.dumps(value, default=str)}" for name, value in why.items() if name != "code"
    )
    return f"{why['code']} {facts}".strip()


def _older_than(seconds: float | None) -> timedelta | None:
    if seconds is None:
        return None
    if seconds < 0:
        raise CommandError("--older-than must be 0 or more seconds")
    return timedelta(seconds=seconds)


def _run_id(value: Any) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError as exc:
        raise CommandError(f"--run must be a run id (a UUID); got {value!r}") from exc
