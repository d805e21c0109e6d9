"""Collect the benchmarks' JSON into docs/performance.md: a table per benchmark with its figures
and ratios, the machine, the date and the commit. `make bench` runs it:

    python -m bench.report snapshot var/bench/start.json      # the machine before the first benchmark
    python -m bench.report snapshot var/bench/NAME.before.json  # ... before each benchmark
    python -m bench.report snapshot var/bench/end.json        # ... after the last one
    python -m bench.report sample var/bench/probe.jsonl &    # the CPU probe, throughout
    python -m bench.report write var/bench docs/performance.md

`write` reads, for each benchmark NAME, `NAME.json` (its --json output), `NAME.rc` (its exit
status) and `NAME.log` (its stderr). A benchmark that failed (non-zero status, or no JSON) is
reported in the file with the end of its log, and `write` then exits 1 so that `make bench`
fails. Ratios are the benchmarks' own, each against a baseline measured in the same run;
absolute times are printed for context, never as a verdict.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from devtools.processes import ROOT

ORDER = ["journal", "reconcile", "pages", "flatness", "recovery", "load", "profiles"]

# What profiling showed and what was changed because of it is history, measured when each change
# was made: it lives in docs/performance-history.md, written by hand; this file is this run's only.
CHANGES = (
    "What each profile led to, with the before and after measured when the change was made, is in "
    "[performance-history.md](performance-history.md#what-profiling-changed)."
)


# How fast the machine ran each benchmark. On this project's virtual machines the same Python work
# takes from 17 to 27 ms from one second to the next on a quiet machine, and the pages, static
# file included, took 1.5 to 2.3 times as long as an hour before with the same code. A slower
# CPU inflates every absolute time, and each ratio of CPU work to time spent waiting (the
# journal's to its floor). A point probe says little of a benchmark of minutes, so while
# `make bench` runs, `sample` times the same fixed piece of Python work every PROBE_EVERY_S
# seconds (about 1 % of one CPU), and the report gives each benchmark the fastest of the samples
# taken during it: a benchmark that keeps both CPUs busy slows most samples, but not the machine.
# A run in which one benchmark's fastest sample is SLOWED_AT times another's is flagged.
PROBE_EVERY_S = 5.0
SLOWED_AT = 1.2


def _work() -> int:
    total = 0
    for i in range(200_000):
        total += i * i % 7
    return total


def cpu_probe_ms(repeats: int = 3) -> float:
    """Milliseconds the fixed piece of pure-Python work takes now: the fastest of `repeats`, as
    interruptions only ever add to it."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        _work()
        times.append(time.perf_counter() - began)
    return round(min(times) * 1000, 2)


def sample(out: Path, every: float = PROBE_EVERY_S, samples: int | None = None) -> None:
    """Append the probe's time, with when it was taken, to `out` (JSON lines) every `every`
    seconds, until killed (or `samples` were taken)."""
    taken = 0
    while samples is None or taken < samples:
        at, ms = time.time(), cpu_probe_ms()
        with out.open("a", encoding="utf-8") as lines:
            lines.write(json.dumps({"at": round(at, 3), "ms": ms}) + "\n")
        taken += 1
        time.sleep(every)


def head_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def snapshot() -> dict[str, Any]:
    load = os.getloadavg()
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "at": round(time.time(), 3),
        "loadavg": [round(x, 2) for x in load],
        "commit": head_commit(),
    }


def probe_by_benchmark(
    directory: Path, names: list[str], end: dict[str, Any]
) -> list[tuple[str, float, int]]:
    """Each benchmark's (name, fastest probe ms, samples) from `probe.jsonl`, of the samples taken
    between its start (`NAME.before.json`) and the next one's, or the run's end (`end.json`).
    A benchmark with no sample in its time is left out."""
    probes = directory / "probe.jsonl"
    if not probes.exists():
        return []
    samples = [json.loads(line) for line in probes.read_text().splitlines() if line.strip()]
    starts = []
    for name in names:
        before = directory / f"{name}.before.json"
        if before.exists():
            starts.append((name, float(json.loads(before.read_text())["at"])))
    ends = [at for _, at in starts[1:]] + [float(end.get("at", float("inf")))]
    measured = []
    for (name, began), ended in zip(starts, ends, strict=True):
        during = [s["ms"] for s in samples if began <= s["at"] < ended]
        if during:
            measured.append((name, min(during), len(during)))
    return measured


def machine(start: dict[str, Any], end: dict[str, Any]) -> dict[str, Any]:
    cpu = "?"
    with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    memory = "?"
    with open("/proc/meminfo", encoding="utf-8") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory": memory,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "postgresql": postgresql_version(),
        # The commit the run measured (its start's), not the one checked out when the report is
        # written again.
        "commit": start.get("commit") or head_commit(),
        "start": start,
        "end": end,
    }


def postgresql_version() -> str:
    try:
        import psycopg

        url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
        with psycopg.connect(url, connect_timeout=5) as conn:
            row = conn.execute("SHOW server_version").fetchone()
            return str(row[0]) if row else "?"
    except Exception as exc:
        return f"? ({type(exc).__name__})"


# --- one section per benchmark ----------------------------------------------------------------


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return [*out, ""]


def met(flag: Any) -> str:
    return "met" if flag else "**not met**"


def journal(r: dict[str, Any]) -> list[str]:
    lines = [
        f"PostgreSQL {r['postgresql']}, {r['rounds']} alternating rounds in process and "
        f"{r.get('rest_rounds', r['rounds'])} of REST, {r['calls_per_round']} calls each; medians over the "
        "rounds. Ratios between in-process measurements are paired by round.",
        "",
    ]
    lines += table(
        ["measurement", "mean ms", "p50 ms", "p99 ms", "calls/s", "own CPU ms"],
        [
            [
                r["labels"][name],
                f"{f['mean_ms']:.3f}",
                f"{f['p50_ms']:.3f}",
                f"{f['p99_ms']:.3f}",
                f"{f['calls_per_s']:.0f}",
                f"{f['own_cpu_ms']:.3f}",
            ]
            for name, f in r["figures"].items()
        ],
    )
    rows = [
        [
            "journal / the same two writes on journal_intent, raw psycopg (the floor)",
            f"{r['journal_over_floor']:.2f}",
            f"≤ {r['target']}: {met(r['target_met'])}",
        ],
        [
            "the journal's 2 statements, raw / the floor (the journal events)",
            f"{r['statements_over_floor']:.2f}",
            "",
        ],
        ["journal / its 2 statements, raw (Seam's Python)", f"{r['journal_over_statements']:.2f}", ""],
        [
            "reference: the floor / the same writes on a minimal table (journal_intent's indexes)",
            f"{r['floor_over_minimal_table']:.2f}",
            "",
        ],
        [
            "reference: journal / the same writes on a minimal table",
            f"{r['journal_over_minimal_table']:.2f}",
            "",
        ],
        [
            "REST, 1 client / the floor",
            f"{r['rest_1_over_floor']:.2f}",
            f"≤ {r['rest_1_target_over_floor']:.0f}: {met(r['rest_1_target_met'])}"
            if "rest_1_target_met" in r
            else "",
        ],
        *(
            [
                [
                    f"REST, {r['rest_clients']} clients: calls/s / {r['rest_many_baseline_calls_per_s']:.0f} "
                    f"(the calls/s before issue 21; {r['rest_many_calls_per_s']:.0f} calls/s now)",
                    f"{r['rest_many_over_baseline']:.2f}",
                    f"≥ {r['rest_many_target_over_baseline']:.0f}: {met(r['rest_many_target_met'])}",
                ]
            ]
            if "rest_many_target_met" in r
            else []
        ),
        ["REST, 1 client / journal in process", f"{r['rest_1_over_journal']:.2f}", ""],
    ]
    if r.get("dbos"):
        rows += [
            [
                f"journal / DBOS {r['dbos']['version']} per recorded call",
                f"{r['journal_over_dbos']:.2f}",
                f"< 1 (faster than DBOS): {met(r['journal_faster_than_dbos'])}",
            ],
            ["DBOS / the floor", f"{r['dbos_over_floor']:.2f}", ""],
        ]
    lines += table(["ratio", "value", "target"], rows)
    if r.get("dbos"):
        d = r["dbos"]
        lines += [
            f"DBOS: {d['unit']}, system database `{d['database']}` on the same server; it writes "
            f"{d['rows_per_call']:.1f} rows per call ("
            + ", ".join(f"{t} {n}" for t, n in d["rows"].items())
            + ") and updates the workflow's status row; the journal writes 3 (the intent and two "
            "journal events) and updates the intent.",
            "",
        ]
    return lines


def reconcile(r: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if "workers" in r:
        w = r["workers"]
        lines += [
            f"**Rows settled per second by `celery worker` processes** (prefork, concurrency 1 each; "
            f"{w['connector']}; {w['rows_per_round']} stale rows per round, medians over {w['rounds']} "
            "rounds). Rate = rows / (last settled_at - first settled_at).",
            "",
        ]
        lines += table(
            ["workers", "rows/s", "rows/s per worker", "incl. task pickup", "/ 1 worker", "/ in process"],
            [["in process, no Celery (baseline)", f"{w['in_process_rows_per_s']:.0f}", "", "", "", "1.00"]]
            + [
                [
                    k["workers"],
                    f"{k['rows_per_s']:.0f}",
                    f"{k['rows_per_s_per_worker']:.0f}",
                    f"{k['rows_per_s_wall']:.0f}",
                    f"{k['over_1_worker']:.2f}",
                    f"{k['over_in_process']:.2f}",
                ]
                for k in w["workers"].values()
            ],
        )
        if "latency" in w:
            lat = w["latency"]
            lines += [
                f"**The same at +{lat['lookup_latency_ms']:.0f} ms a lookup** ({lat['connector']}; "
                f"{lat['rows_per_round']} rows per round; the downstream declares "
                f"{lat['declared_concurrency']} lookups in flight per process and saw at most "
                f"{lat['peak_in_flight_per_process']}).",
                "",
            ]
            lines += table(
                [
                    "workers",
                    "rows/s",
                    "rows/s per worker",
                    "incl. task pickup",
                    "/ 1 worker",
                    "/ same at 0 ms",
                ],
                [
                    [
                        k["workers"],
                        f"{k['rows_per_s']:.0f}",
                        f"{k['rows_per_s_per_worker']:.0f}",
                        f"{k['rows_per_s_wall']:.0f}",
                        f"{k['over_1_worker']:.2f}",
                        f"{k['over_zero_latency']:.2f}",
                    ]
                    for k in lat["workers"].values()
                ],
            )
    if "recovery" in r:
        c = r["recovery"]
        against = (
            f", {c['over_zero_latency']:.2f} of the same workers' rate at 0 ms"
            if c["over_zero_latency"]
            else ""
        )
        lines += [
            f"**Recovery of {c['rows']:,} calls in doubt** over {c['runs']} dead runs by {c['workers']} "
            f"workers fed by `celery beat` every {c['sweep_interval_s']:.0f} s, +{c['lookup_latency_ms']:.0f} ms "
            f"a lookup: **{c['seconds']:.1f} s** from beat's start to the last settle "
            f"({c['rows_per_s']:.0f} rows/s{against}; at most {c['peak_in_flight_per_process']} lookups in "
            "flight per process).",
            "",
        ]
    if "settle" in r:
        lines += [
            "**Settle rate in process against the sandbox** (reconcile_sweep vs the same lookups made "
            "directly with the connector):",
            "",
        ]
        lines += table(
            ["lookup latency", "rows", "sweep rows/s", "lookups/s", "Seam ms/row", "sweep / lookups"],
            [
                [
                    f"+{s['lookup_latency_ms']} ms",
                    s["rows"],
                    f"{s['sweep_rows_per_s']:.0f}",
                    f"{s['baseline_lookups_per_s']:.0f}",
                    f"{s['seam_overhead_ms_per_row']:.2f}",
                    f"{s['sweep_over_baseline']:.2f}",
                ]
                for s in r["settle"]
            ],
        )
    if "query" in r:
        q = r["query"]
        seeded = "reused from an earlier run" if q["reused_seed"] else f"seeded in {q['seed_s']:.0f} s"
        lines += [
            f"**The sweep's query** (`stale_intents(...)` as a list of ids) with {q['rows_in_table']:,} "
            f"intent rows of which {q['stale_rows']} stale ({seeded}); {q['repetitions']} repetitions, "
            "alternating with the baselines.",
            "",
        ]
        lines += table(
            ["query", "median ms", "ratio"],
            [
                [f"stale_intents, {q['rows_in_table']:,} rows", f"{q['query_ms_median']:.3f}", "1.00"],
                [
                    f"baseline: the same query, {q['rows_in_small_table']:,} rows",
                    f"{q['small_journal_query_ms_median']:.3f}",
                    f"large / small {q['large_over_small_journal']:.2f}",
                ],
                [
                    "baseline: primary-key read, large table",
                    f"{q['pk_read_ms_median']:.3f}",
                    f"query / pk read {q['large_over_pk_read']:.2f}",
                ],
                [
                    "the query without intent_open_idx",
                    f"{q['query_ms_without_partial_index']:.1f}",
                    f"{q['without_over_with']:.0f}x slower",
                ],
            ],
        )
        lines += ["```", q["plan"], "```", ""]
    return lines


def pages(r: dict[str, Any]) -> list[str]:
    from bench.pages import queue_target_line

    v = r["volume"]
    seeding = r["seeding"]
    lines = [
        f"{v['runs']:,} runs, {v['intents']:,} intents, {v['journal_events']:,} journal events, "
        f"{v['awaiting_person']:,} runs awaiting a person and {v['running']:,} running (the queue's "
        f"rows); gunicorn {r['server']['workers']} sync workers; {r['requests_per_page']} requests per "
        f"page in {r['rounds']} alternating rounds, one client; "
        + (
            "the seeded database was reused."
            if seeding["reused"]
            else f"seeded in {seeding['seconds']:.0f} s ("
            + ", ".join(f"{k} {t:.0f} s" for k, t in seeding["steps"].items())
            + ")."
        ),
        "",
        f"**{queue_target_line(r.get('queue_target'))}**",
        "",
    ]
    lines += table(
        ["page", "median ms", "p95 ms", "median / static", "p95 / static", "median / login", "SQL queries"],
        [
            [
                r["labels"][name],
                f"{f['median_ms']:.2f}",
                f"{f['p95_ms']:.2f}",
                f"{r['ratios'][name]['median_over_static']:.2f}",
                f"{r['ratios'][name]['p95_over_static']:.2f}",
                f"{r['ratios'][name]['median_over_login']:.2f}",
                r["sql"][name]["queries"] if name in r["sql"] else "—",
            ]
            for name, f in r["figures"].items()
        ],
    )
    plan = r.get("queue_plan") or {}
    if plan.get("queries"):
        lines += [
            "Every query of the queue page, `EXPLAIN (ANALYZE, BUFFERS)` at this volume (scans | execution time):",
            "",
        ]
        lines += table(
            ["query", "plan"],
            [
                [f"`{q['sql'][:90]}…`".replace("|", "\\|"), q["summary"].replace("|", "\\|")]
                for q in plan["queries"]
            ],
        )
        for q in plan["queries"]:
            if q.get("reads_runs", True):
                lines += ["```sql", q["sql"], "```", "```", q["plan"], "```", ""]
    return lines


def recovery(r: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    if "results" in r:
        lines += [
            f"Escalate: {r['ticket']} replayed in a child process SIGKILLed ({r['kill']}); a real worker and "
            f"beat; the queue's selector polled every {r['poll_s'] * 1e3:.0f} ms from the child's death. "
            "Budget = stale threshold + sweep interval.",
            "",
        ]
        lines += table(
            [
                "settings",
                "stale after s",
                "sweep every s",
                "rounds",
                "stuck in queue s",
                "escalated s (median)",
                "max s",
                "median / budget",
                "max / budget",
            ],
            [
                [
                    x["settings"],
                    f"{x['stale_after_s']:g}",
                    f"{x['sweep_interval_s']:g}",
                    len(x["rounds"]),
                    f"{x['stuck_s_median']:.1f}",
                    f"{x['escalated_s_median']:.1f}",
                    f"{x['escalated_s_max']:.1f}",
                    f"{x['escalated_over_budget']:.2f}",
                    f"{x['max_escalated_over_budget']:.2f}",
                ]
                for x in r["results"]
            ],
        )
    if "finish" in r:
        lines += recovery_finish(r["finish"])
    return lines


def recovery_finish(f: dict[str, Any]) -> list[str]:
    """Issue 30's time to finish without a person: from the death to the run completed."""
    parts = [
        (f"{f[p].get('ticket', f[p].get('agent'))} killed {f[p]['kill']}; {how}", f[p])
        for p, how in (
            ("resume", "reconciliation resumes it"),
            ("restart", "the agent is started again at once and resends under its key"),
        )
        if p in f
    ]
    lines = [
        "Finish without a person: from the death to the run `completed`, with "
        + ", ".join(f"{k}={v:g}" for k, v in f["settings"].items())
        + f"; budget = stale threshold + sweep interval = {f['budget_s']:g} s. The in-flight margin is 0 "
        "so that the threshold is what decides: an open call is also left alone until its tool's call "
        "timeout (the sandbox's 7 s) plus SEAM_IN_FLIGHT_MARGIN_SECONDS (10 s by default) have passed "
        "since its intent, which is why escalate's short settings take about 18 s, not 6.",
        "",
    ]
    lines += table(
        [
            "scenario",
            "rounds",
            "each s",
            "median s",
            "max s",
            "median / budget",
            "max / budget",
            "stages (medians, s)",
        ],
        [
            [
                name,
                len(x["rounds"]),
                ", ".join(f"{y['completed_s']:.2f}" for y in x["rounds"]),
                f"{x['completed_s_median']:.2f}",
                f"{x['completed_s_max']:.2f}",
                f"{x['completed_over_budget']:.2f} (≤ {f['target']}: {met(x['targets'][0]['met'])})",
                f"{x['max_completed_over_budget']:.2f}",
                ", ".join(f"{k.removesuffix('_s')} {v:.2f}" for k, v in x["stages_s_median"].items()),
            ]
            for name, x in parts
        ],
    )
    return lines


def profiles(r: dict[str, Any]) -> list[str]:
    lines = [f"pyinstrument, sampling every {r['interval_ms']:g} ms (bench/profiles.py).", ""]
    sections = []
    if "perform" in r:
        sections.append(("`services.perform`, in process", r["perform"]))
    if "queue" in r:
        sections.append(("queue page `GET /`", r["queue"]["queue"]))
        sections.append(("queue partial (HX-Request)", r["queue"]["queue_partial"]))
    for title, p in sections:
        lines += [
            f"**{title}**: {p['unprofiled_ms_per_call']:.2f} ms per call unprofiled, "
            f"{p['profiled_ms_per_call']:.2f} ms under the profiler ({p['calls']} calls).",
            "",
        ]
        named = [
            [k, f"{v['ms_per_call']:.2f}", f"{v['share']:.1%}"] for k, v in p["named"].items() if v["share"]
        ]
        top = [
            [f"`{x['function']}`", f"{x['ms_per_call']:.2f}", f"{x['share']:.1%}"]
            for x in p["self_time_top"][:8]
        ]
        lines += table(["named cost (outermost frames)", "ms per call", "share"], named)
        lines += table(["most self time", "ms per call", "share"], top)
    return lines


def generic(r: dict[str, Any]) -> list[str]:
    """A benchmark this report has no layout for (bench/load.py): its scalar figures."""
    rows: list[list[Any]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(value, bool | int | float | str) and len(str(value)) < 80:
            rows.append([prefix, f"{value:.3f}" if isinstance(value, float) else value])

    walk("", r)
    return table(["figure", "value"], rows[:60])


def flatness(r: dict[str, Any]) -> list[str]:
    seeded = r["seeded"]
    lines = [
        "The journal's hot path, the sweep's read and the queue's first page on 10,000,000 intents in "
        "one monthly partition (`seam_bench_flat_one`) against 30,000,000 across twelve "
        f"(`seam_bench_flat_twelve`), at scale {r['scale']}, in {len(r['rounds'])} alternating rounds, "
        "each a fresh process; each figure a round's median, the ratio paired by round. Seeding: "
        + ", ".join(
            f"{layout} {'reused' if s['reused'] else f'{s["seconds"]:.0f} s'}" for layout, s in seeded.items()
        )
        + ".",
        "",
    ]
    rows = [
        [label, f"{r[figure]['one']:.2f}", f"{r[figure]['twelve']:.2f}", f"**{r[figure + '_ratio']:.2f}**"]
        for figure, label in (
            ("hot_path_ms", "hot path (`services.perform`), ms per call"),
            ("sweep_ms", "the sweep's read (`stale_intents`, first batch), ms"),
            ("queue_ms", "the queue's first page (`queue_runs`, 50 runs), ms"),
        )
    ]
    lines += table(["", "one month", "twelve months", "twelve / one"], rows)
    drop = r["drop"]
    lines += [
        f"The oldest month ({drop['month']}, {drop['runs']:,} runs): {drop['archive_sample_runs']:,} of its runs "
        f"archived by the retention job's batches in {drop['archive_seconds']:.0f} s "
        f"({drop['archive_runs_per_s']:.0f} runs/s), the others marked archived directly; the archive holds "
        f"{drop['archive_bytes_per_run']:.0f} bytes per run, against {drop['live_bytes_per_run']:.0f} bytes "
        f"per run of its two partitions ({drop['archive_over_live']:.1%}); its partitions detached in "
        f"**{drop['detach_seconds'] * 1e3:.0f} ms** (the time the journal's tables are held), and their files "
        f"freed {drop['drop_seconds'] * 1e3:.0f} ms after the start, holding only the month's tables.",
        "",
    ]
    return lines


SECTIONS = {
    "journal": ("Journal overhead per call", journal),
    "reconcile": ("Reconciliation", reconcile),
    "pages": ("Pages", pages),
    "flatness": ("Flat from one month to twelve", flatness),
    "recovery": ("Recovery latency", recovery),
    "load": ("Load", generic),
    "profiles": ("Profiles", profiles),
}


def targets_of(value: Any) -> list[dict[str, Any]]:
    """Every target a benchmark's JSON states, wherever it nests them: each a dict with the
    measured `value`, the `bound` it is held to and whether it was `met`."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "targets" and isinstance(item, list):
                found += [
                    t for t in item if isinstance(t, dict) and {"name", "value", "bound", "met"} <= t.keys()
                ]
            else:
                found += targets_of(item)
    elif isinstance(value, list):
        for item in value:
            found += targets_of(item)
    return found


def targets_section(targets: list[tuple[str, dict[str, Any]]]) -> list[str]:
    if not targets:
        return []
    unmet = sum(not t["met"] for _, t in targets)
    verdict = f"all {len(targets)} met" if not unmet else f"{unmet} of {len(targets)} **not met**"
    lines = ["## Targets", "", f"Each measured in this run against its bound: {verdict}.", ""]
    return lines + table(
        ["benchmark", "target", "value", "bound", ""],
        [
            [f"`bench/{name}.py`", t["name"], f"{t['value']:.2f}", t["bound"], met(t["met"])]
            for name, t in targets
        ],
    )


def write(directory: Path, out: Path) -> int:
    start = json.loads((directory / "start.json").read_text()) if (directory / "start.json").exists() else {}
    # The machine when the last benchmark ended (make bench's end.json), so that the report written
    # again later from the same directory says the same; measured now when there is none.
    end = (
        json.loads((directory / "end.json").read_text()) if (directory / "end.json").exists() else snapshot()
    )
    info = machine(start, end)
    names = [n for n in ORDER if (directory / f"{n}.rc").exists()]
    names += sorted(p.stem for p in directory.glob("*.rc") if p.stem not in names)
    failed: list[str] = []
    body: list[str] = []
    targets: list[tuple[str, dict[str, Any]]] = []
    for name in names:
        title, render = SECTIONS.get(name, (name, generic))
        rc = (directory / f"{name}.rc").read_text().strip()
        body += [f"## {title} (`bench/{name}.py`)", ""]
        result: dict[str, Any] | None = None
        try:
            result = json.loads((directory / f"{name}.json").read_text())
        except (OSError, ValueError):
            result = None
        if rc != "0" or result is None:
            failed.append(name)
            log = (
                (directory / f"{name}.log").read_text(errors="replace")
                if (directory / f"{name}.log").exists()
                else ""
            )
            body += [
                f"**FAILED** (exit status {rc}{', no JSON' if result is None else ''}). End of its log:",
                "",
                "```",
                log[-3000:].rstrip(),
                "```",
                "",
            ]
            continue
        targets += [(name, t) for t in targets_of(result)]
        try:
            body += render(result)
        except (KeyError, TypeError, ValueError) as exc:
            failed.append(name)
            body += [f"**Could not render the result** ({type(exc).__name__}: {exc}).", ""]
        if name == "profiles":
            body += ["### What profiling changed", "", CHANGES, ""]
    s, e = info["start"], info["end"]
    lines = [
        "# Performance",
        "",
        "Generated by `make bench` (bench/report.py) from each benchmark's `--json` output. Every figure "
        "that says pass or fail is a ratio against a baseline measured in the same run; absolute times "
        "depend on the machine and are there for context. What earlier runs measured, and what was "
        "changed because of it, is in [performance-history.md](performance-history.md), written by hand.",
        "",
    ]
    # Only the load before the first benchmark tells of other work: the load at the end is mostly
    # the benchmarks' own (the last ones keep both CPUs busy).
    busy = s.get("loadavg", [0])[0]
    if busy > (info["cpus"] or 1) / 2:
        lines += [
            f"> The machine was busy when this started (load average {busy} on {info['cpus']} CPUs, "
            "other work running before the benchmarks): absolute times are inflated and ratios noisier "
            "than on a quiet machine.",
            "",
        ]
    probes = probe_by_benchmark(directory, names, e)
    if probes and max(ms for _, ms, _ in probes) >= SLOWED_AT * min(ms for _, ms, _ in probes):
        slowest = max(probes, key=lambda probe: probe[1])
        fastest = min(probes, key=lambda probe: probe[1])
        lines += [
            f"> The machine was slower during some benchmarks than others: the same piece of Python "
            f"work took at best {fastest[1]:.1f} ms during {fastest[0]} and {slowest[1]:.1f} ms during "
            f"{slowest[0]}, {slowest[1] / fastest[1]:.2f} x. That inflates the absolute times measured "
            "then, and each ratio of CPU work to time spent waiting (the journal's to its floor).",
            "",
        ]
    lines += table(
        ["", ""],
        [
            ["date", f"{s.get('date', '?')} → {e['date']}"],
            ["commit", f"`{info['commit']}`"],
            ["CPU", f"{info['cpus']} x {info['cpu_model']}"],
            ["memory", info["memory"]],
            ["PostgreSQL", info["postgresql"]],
            ["Python", f"{info['python']} ({info['platform']})"],
            [
                "load average (1, 5, 15 min)",
                f"start {', '.join(map(str, s.get('loadavg', ['?'])))}; end {', '.join(map(str, e.get('loadavg', ['?'])))}",
            ],
            [
                f"CPU probe during each benchmark (fastest ms of the same Python work, every {PROBE_EVERY_S:.0f} s; samples)",
                "; ".join(f"{name} {ms:.1f} ({count})" for name, ms, count in probes) or "not measured",
            ],
            ["benchmarks failed", ", ".join(failed) or "none"],
        ],
    )
    lines += targets_section(targets)
    lines += body
    out.write_text("\n".join(lines).rstrip() + "\n")
    print(f"wrote {out} ({len(names)} benchmarks, {len(failed)} failed)", file=sys.stderr)
    # What `make bench` ends with: every target, met or not, on standard output.
    for name, t in targets:
        print(
            f"{'met    ' if t['met'] else 'NOT MET'}  {t['name']}: {t['value']:.2f} ({t['bound']}; bench/{name}.py)"
        )
    unmet = [t for _, t in targets if not t["met"]]
    print(f"targets: {len(targets) - len(unmet)} of {len(targets)} met")
    return 1 if failed or unmet or not names else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    snap = sub.add_parser(
        "snapshot", help="record the date and load average before a benchmark, or after the last"
    )
    snap.add_argument("out", type=Path)
    probe = sub.add_parser("sample", help="time the CPU probe every few seconds into a file, until killed")
    probe.add_argument("out", type=Path)
    w = sub.add_parser("write", help="write docs/performance.md from the benchmarks' JSON")
    w.add_argument("directory", type=Path)
    w.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "snapshot":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(snapshot()))
        return 0
    if args.command == "sample":
        sample(args.out)
        return 0
    return write(args.directory, args.out)


if __name__ == "__main__":
    sys.exit(main())
