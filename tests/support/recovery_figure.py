"""The recovery figure (issue 30 item 4): of the runs the kill matrices killed and recovery then
decided, how many ended with a person NEEDLESSLY — although every call in doubt was knowable and
the policy said resume. The target is 0, with 0 effects doubled or lost and 0 false statements in
the handover.

Each kill matrix (the built-in flows, the giftdesk example, the three framework adapters, the MCP
proxy) calls `record(matrix, run, ...)` once per kill point, after recovery decided the run and
before the test's own assertions (so a failing point is counted too). The session's terminal
summary prints the table (`pytest_terminal_summary`, re-exported by tests/conftest.py, so any
pytest run that recorded a point prints it, `make chaos` included).

How a recorded run ended:

- with a person: `run.awaiting_person`, or the run has an Escalation (open or resolved);
- by machine: otherwise, once the run has ended (completed, compensated, cancelled);
- left open: still `running` (a matrix that reconciles but does not decide, e.g. a git commit
  nobody can ask about, stays open with its call `unknown`).

NEEDLESS — a run handed to a person for a reason a machine could have avoided — is a run that
ended with a person while the policy said resume (`policy_says_resume`: its policy, from
reconciliation.selectors.policy_for, exists and reconciliation.decisions._policy_refusal, the
decision's own rules, finds nothing against resuming the phase the run reached), unless the reason
is a call no machine could settle: `outcome_why.code == "calls_unknown"` naming a call whose tool is
not knowable. A tool is knowable (`tool_knowable`) when its ToolSpec has a connector whose lookup
can be asked (`offers_lookup`: HttpConnector's own lookup without a lookup_path answers "no
lookup" without asking, so it is not one), or it declares `honours_key` and its key is inside
`key_lifetime` (ToolSpec.may_resend: sent again under its key, by reconciliation through its
connector, or by its agent started again). So, under a resume policy:

- calls_unknown, every unknown call's tool knowable → needless (a lookup or a resend could have
  settled it: in a kill matrix, which injects no faults, it should have);
- calls_unknown with a call of a tool nobody can ask or send again → not needless;
- any other reason (a resume that failed, a version problem, ...) → needless: a kill alone must not
  make a resumable run fail;

and under a policy that compensates, escalates, or stops at the phase reached (or no policy) → not
needless: the person was the policy's choice.

Doubled or lost effects and false statements come from the checks the matrices already make. For
the sandbox's world the default is scenarios.invariants.check_recovered: a violation about the
handover (`the handover lists ...`, `... does not list it as completed`) is a false statement;
every other one (orphan write, effect performed twice, recorded as performed but not so, an undo
there N times, a call settled twice or left intended, a stray event) counts as doubled or lost —
the figure errs towards showing a fault. `expected_effects`, where given, compares
check_run's count with what the policy's outcome should have left. A matrix whose world is another
provider's (giftdesk, an MCP server) passes what its own checks of that provider found instead.

Beside each matrix's "by machine", `before` is how many of the same kill points (by pytest node
id) finished by machine at the commit before issue 30's work, as tests/support/recovery_baseline.json
holds it (measured by devtools/measure_recovery_baseline.py, by `how_ended`'s rule): a plain number
when the baseline measured every point of the row, `n of m` when only m of them. A second table
sums issue 35's attempt counts over each matrix's runs (handover.attempts.run_attempts, read when
the run is recorded, before the test's database is flushed).

Under CI (CI=1/true/yes, as .ci/run sets it) a needless run makes the session fail (exit status
1, set in `pytest_sessionfinish`) and the summary says so in capitals; elsewhere it is printed just
as loudly and the exit status is left to the tests."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from handover.attempts import run_attempts
from handover.objects import AttemptCounts
from handover.rows import handover_rows
from journal.models import Escalation, Intent, Run, RunStatus
from journal.why import RunWhy
from tools.connectors import HttpConnector
from tools.registry import ToolSpec, UnknownTool, find_tool

PERSON, MACHINE, OPEN = "person", "machine", "open"
HANDOVER_VIOLATIONS = ("the handover lists ", "but the handover does not list it as completed")
CI_VALUES = {"1", "true", "TRUE", "True", "yes"}
# How each kill point's run ended at the commit before issue 30's work, measured by
# devtools/measure_recovery_baseline.py: the figure's "before" column.
BASELINE = Path(__file__).with_name("recovery_baseline.json")


@dataclass(frozen=True)
class AttemptTotals:
    """What the attempts table sums of a run's AttemptCounts (handover.objects): few and plain, so
    a row travels from a pytest-xdist worker to the process that prints the summary."""

    retries: int = 0
    repairs: int = 0
    replans: int = 0
    reflections: int = 0
    escalations: int = 0
    looping: bool = False

    @classmethod
    def of(cls, counts: AttemptCounts) -> AttemptTotals:
        return cls(**{name: getattr(counts, name) for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Row:
    """One kill point's recorded run."""

    matrix: str
    point: str
    ended: str  # PERSON, MACHINE or OPEN
    why: str = ""  # the run's outcome_why code, when it has one
    needless: bool = False
    doubled_or_lost: tuple[str, ...] = ()
    false_statements: tuple[str, ...] = ()
    test: str = ""  # the pytest node id, the baseline's key for the same kill point
    attempts: AttemptTotals | None = None  # issue 35's counts of the run, read before the flush

    def as_plain(self) -> dict[str, Any]:
        """The row as plain values (pytest-xdist sends a worker's rows to the summary's process)."""
        return asdict(self)

    @classmethod
    def from_plain(cls, plain: Mapping[str, Any]) -> Row:
        attempts = plain.get("attempts")
        return cls(
            **{
                **plain,
                "doubled_or_lost": tuple(plain.get("doubled_or_lost", ())),
                "false_statements": tuple(plain.get("false_statements", ())),
                "attempts": AttemptTotals(**attempts) if attempts is not None else None,
            }
        )


@dataclass
class Figure:
    rows: list[Row] = field(default_factory=list)

    def by_matrix(self) -> dict[str, list[Row]]:
        matrices: dict[str, list[Row]] = {}
        for row in self.rows:
            matrices.setdefault(row.matrix, []).append(row)
        return matrices

    def needless(self) -> list[Row]:
        return [row for row in self.rows if row.needless]


FIGURE = Figure()


# --- the classification (pure: the unit tests hand it made-up rows) ---------------------------


def tool_knowable(spec: ToolSpec | None, *, intended_at: datetime, now: datetime) -> bool:
    """Whether a call of `spec`'s tool, recorded at `intended_at`, could be settled by a machine at
    `now`: its connector's lookup can be asked, or it may be sent again under its key."""
    if spec is None:
        return False
    if spec.may_resend(intended_at=intended_at, now=now):
        return True  # sent again under its key: by reconciliation, or by its agent started again
    try:
        connector = spec.get_connector()
    except UnknownTool:
        return False  # no connector, no key honoured: a tool its agent runs, nobody can ask
    return offers_lookup(connector)


def offers_lookup(connector: Any) -> bool:
    """Whether asking the connector's lookup can settle anything: every connector's can, except
    HttpConnector's own lookup without a lookup_path, which answers Unknown without asking (a
    subclass that writes its own lookup, by business id or an object's state, is asked)."""
    own_lookup = getattr(type(connector), "lookup", None) is HttpConnector.lookup
    return not (own_lookup and not connector.lookup_path)


def is_needless(
    why: Mapping[str, Any],
    *,
    ended: str,
    policy_says_resume: bool,
    knowable: Callable[[Mapping[str, Any]], bool],
) -> bool:
    """The module's NEEDLESS: `why` is the run's outcome_why; `knowable` answers for one of a
    calls_unknown why's `calls` entries ({tool, key, verdict})."""
    if ended != PERSON or not policy_says_resume:
        return False
    if why.get("code") == RunWhy.CALLS_UNKNOWN:
        return all(knowable(call) for call in why.get("calls", []))
    return True


def split_violations(violations: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """check_recovered's violations as (doubled or lost, false statements in the handover)."""
    doubled: list[str] = []
    false: list[str] = []
    for violation in violations:
        (false if any(mark in violation for mark in HANDOVER_VIOLATIONS) else doubled).append(violation)
    return tuple(doubled), tuple(false)


# --- reading a run -----------------------------------------------------------------------------


def how_ended(run: Run) -> str:
    if run.awaiting_person or Escalation.objects.filter(run=run).exists():
        return PERSON
    return OPEN if run.status == RunStatus.RUNNING else MACHINE


def policy_says_resume(run: Run) -> bool:
    """Whether the run's policy, by the decision's own rules, lets it resume from where it is."""
    from reconciliation.decisions import _policy_refusal
    from reconciliation.selectors import policy_for

    policy = policy_for(tenant_id=run.tenant_id, task_type=run.task_type)
    if policy is None:
        return False
    return _policy_refusal(run, policy, list(run.intents.all())) is None


def _knowable_in(run: Run) -> Callable[[Mapping[str, Any]], bool]:
    now = timezone.now()

    def knowable(call: Mapping[str, Any]) -> bool:
        intent = Intent.objects.filter(run=run, idempotency_key=call.get("key", "")).first()
        intended_at = intent.intended_at if intent is not None else now
        return tool_knowable(find_tool(str(call.get("tool", ""))), intended_at=intended_at, now=now)

    return knowable


def _current_test() -> str:
    """The running test's node id (`tests/x.py::test_y[T-41518-after-2]`)."""
    return os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]


def _current_point() -> str:
    """The running test's parameters (`T-41518-after-2`), else its name."""
    name = _current_test().rsplit("::", 1)[-1]
    return name[name.index("[") + 1 : -1] if "[" in name else name


def record(
    matrix: str,
    run: Run,
    *,
    point: str = "",
    doubled_or_lost: Iterable[str] | None = None,
    false_statements: Iterable[str] | None = None,
    expected_effects: int | None = None,
    person_asked: bool = False,
) -> Row:
    """Record one kill point's run, once recovery decided it. Without `doubled_or_lost` and
    `false_statements`, both come from check_recovered (the sandbox's world); `point` defaults to
    the running test's parameters. `person_asked`: the outcome was a person's own request (e.g.
    "compensate the run"), so a hand-over it led to is never needless."""
    from scenarios.invariants import check_recovered, check_run

    run = Run.objects.get(pk=run.pk)
    if doubled_or_lost is None and false_statements is None:
        doubled, false = split_violations(check_recovered(run))
    else:
        doubled, false = tuple(doubled_or_lost or ()), tuple(false_statements or ())
    if expected_effects is not None and (found := check_run(run).effects) != expected_effects:
        kind = "doubled" if found > expected_effects else "lost"
        doubled = (*doubled, f"{found} effects where the outcome leaves {expected_effects} ({kind})")
    ended = how_ended(run)
    why = dict(run.outcome_why or {})
    row = Row(
        matrix=matrix,
        point=point or _current_point(),
        ended=ended,
        why=str(why.get("code", "")),
        needless=ended == PERSON
        and not person_asked
        and is_needless(
            why, ended=ended, policy_says_resume=policy_says_resume(run), knowable=_knowable_in(run)
        ),
        doubled_or_lost=doubled,
        false_statements=false,
        test=_current_test(),
        attempts=AttemptTotals.of(run_attempts(handover_rows(run))),
    )
    FIGURE.rows.append(row)
    return row


def handover_against(run: Run, confirmed: Iterable[str]) -> list[str]:
    """False statements of the run's handover about its completed work, against the step ids of
    the run's own (non-undo) calls whose effect the provider confirms."""
    from handover import handover_for
    from journal.selectors import compensation_intent_ids

    undo_steps = set(
        Intent.objects.filter(pk__in=compensation_intent_ids(run=run)).values_list("step_id", flat=True)
    )
    listed = {item.step_id for item in handover_for(run).completed}
    world = set(confirmed) - undo_steps
    return [
        *(
            f"the handover lists {step} as completed but the provider has no such effect"
            for step in sorted(listed - world)
        ),
        *(
            f"{step} happened in the world but the handover does not list it as completed"
            for step in sorted(world - listed)
        ),
    ]


def counted_once(found: Mapping[str, int], expected: Mapping[str, int] | None = None) -> list[str]:
    """Doubled or lost effects: each name's count in the provider's own records against what it
    should be (1 unless `expected` says otherwise)."""
    want = dict(expected or {})
    return [
        f"{name}: {count} effects in the provider, {want.get(name, 1)} expected"
        for name, count in sorted(found.items())
        if count != want.get(name, 1)
    ]


# --- the session's summary ----------------------------------------------------------------------

COLUMNS = (
    "matrix",
    "kill points",
    "by machine",
    "before",
    "to a person",
    "needless (target 0)",
    "doubled/lost",
    "false statements",
    "left open",
)
ATTEMPT_COLUMNS = (
    "matrix",
    "runs",
    "retries",
    "repairs",
    "replans",
    "reflections",
    "escalations",
    "loops caught",
)


@dataclass(frozen=True)
class Baseline:
    """How each kill point's run ended at `commit` (tests/support/recovery_baseline.json), by
    node id: MACHINE, PERSON or OPEN."""

    commit: str = ""
    points: Mapping[str, str] = field(default_factory=dict)

    def before(self, rows: list[Row]) -> str:
        """The "before" cell: of these rows' kill points, how many the commit finished by machine;
        `n of m` when it measured only m of them, `-` when none."""
        measured = [self.points[row.test] for row in rows if row.test in self.points]
        if not measured:
            return "-"
        by_machine = str(sum(ended == MACHINE for ended in measured))
        return by_machine if len(measured) == len(rows) else f"{by_machine} of {len(measured)}"


def load_baseline(path: Path = BASELINE) -> Baseline:
    if not path.exists():
        return Baseline()
    stored = json.loads(path.read_text())
    return Baseline(commit=stored["commit"], points=stored["points"])


def _aligned(lines: list[tuple[str, ...]]) -> list[str]:
    """Rows of cells as text, the first column left-aligned, a rule under the header and above
    the last (total) row."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in lines
    ]
    return [text[0], "-" * len(text[0]), *text[1:-1], "-" * len(text[0]), text[-1]]


def table(figure: Figure, baseline: Baseline | None = None) -> list[str]:
    """The figure as text lines: one row per matrix, then the total. `before`: how many of the
    same kill points finished by machine at the baseline's commit."""
    baseline = baseline or Baseline()
    header = tuple(f"before ({baseline.commit[:7]})" if c == "before" else c for c in COLUMNS)
    lines: list[tuple[str, ...]] = [header]
    matrices = figure.by_matrix()
    for name, rows in [*matrices.items(), ("total", figure.rows)]:
        lines.append(
            (
                name,
                str(len(rows)),
                str(sum(r.ended == MACHINE for r in rows)),
                baseline.before(rows),
                str(sum(r.ended == PERSON for r in rows)),
                str(sum(r.needless for r in rows)),
                str(sum(len(r.doubled_or_lost) for r in rows)),
                str(sum(len(r.false_statements) for r in rows)),
                str(sum(r.ended == OPEN for r in rows)),
            )
        )
    return _aligned(lines)


def attempts_table(figure: Figure) -> list[str]:
    """Issue 35's counts over each matrix's runs (handover.attempts.run_attempts, read when the
    run was recorded): retries, repairs, replans, reflections, escalations, and the runs stopped
    for looping."""
    lines: list[tuple[str, ...]] = [ATTEMPT_COLUMNS]
    for name, rows in [*figure.by_matrix().items(), ("total", figure.rows)]:
        counted = [r.attempts for r in rows if r.attempts is not None]
        lines.append(
            (
                name,
                str(len(counted)),
                *(str(sum(getattr(a, column) for a in counted)) for column in ATTEMPT_COLUMNS[2:-1]),
                str(sum(a.looping for a in counted)),
            )
        )
    return _aligned(lines)


def under_ci() -> bool:
    return os.environ.get("CI", "") in CI_VALUES


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not FIGURE.rows:
        return
    write = terminalreporter.write_line
    terminalreporter.write_sep("=", "recovery figure (issue 30): runs handed to a person needlessly")
    baseline = load_baseline()
    for line in table(FIGURE, baseline):
        write(line)
    if baseline.commit:
        write(
            f"  before: of the same kill points, finished by machine at {baseline.commit[:7]} ({BASELINE.name})"
        )
    for name, rows in FIGURE.by_matrix().items():
        reasons = Counter(row.why or "no why" for row in rows if row.ended == PERSON)
        if reasons:
            write(f"  {name}, to a person: {', '.join(f'{why} x{n}' for why, n in sorted(reasons.items()))}")
    faults = [r for r in FIGURE.rows if r.needless or r.doubled_or_lost or r.false_statements]
    for row in faults:
        what = [
            *(["NEEDLESS: to a person with " + (row.why or "no why")] if row.needless else []),
            *row.doubled_or_lost,
            *row.false_statements,
        ]
        write(f"  {row.matrix} / {row.point}: {'; '.join(what)}", red=True)
    terminalreporter.write_sep("-", "attempts over the killed runs (issue 35)")
    for line in attempts_table(FIGURE):
        write(line)
    needless = len(FIGURE.needless())
    if needless:
        verdict = "THIS RUN FAILS (CI)" if under_ci() else "CI would fail this run"
        terminalreporter.write_sep(
            "!", f"{needless} RUN(S) HANDED TO A PERSON NEEDLESSLY (target 0): {verdict}", red=True, bold=True
        )


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under CI a needless hand-over fails the session, whatever the tests said."""
    if FIGURE.needless() and under_ci() and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
