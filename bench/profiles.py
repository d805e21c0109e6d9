"""Where the slow paths spend their time: pyinstrument profiles of the in-process journal call
(`journal.services.perform`) and of the queue page (GET / as a logged-in support_staff user).

Each target runs in a process of its own, on the database its benchmark uses:
- `perform`: bench/journal.py's `seam_bench`, a run of its own with a no-op dispatch, N calls
  (the bench tables are emptied at the end, as bench/journal.py does);
- `queue`: bench/pages.py's `seam_bench_pages` (100,000 runs / 1,000,000 intents; seeded by
  bench/pages.py if it is missing), the full page and its htmx partial through Django's test
  client, in process (no server, so the profile is the view, the queries and the template).

For each, it reports the time per call, the functions with the most self time, and the share of
a few named costs (SQL round trips, template rendering, URL reversing, CSRF tokens) measured as
the time of the outermost frames of those functions. pyinstrument is a sampling profiler (1 ms
here), so shares under a few percent are noise.

    DJANGO_SETTINGS_MODULE=config.settings.test .venv/bin/python -m bench.profiles [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from typing import Any

from bench.journal import BenchError, progress
from devtools.processes import ROOT, ProcessFailed

TARGETS = ("perform", "queue")
# Named costs: (label, predicate on (function, file path)). The time of a frame counts once,
# at its outermost match, so recursion is not double-counted.
NAMED: list[tuple[str, Any]] = [
    ("waiting on PostgreSQL (psycopg wait)", lambda f, p: f == "wait" and "psycopg" in p),
    ("executing SQL (Django cursor.execute)", lambda f, p: f in ("execute", "_execute") and "django/db" in p),
    ("template rendering (Template.render)", lambda f, p: f == "render" and "django/template/base.py" in p),
    ("URL reversing (django.urls reverse)", lambda f, p: f == "reverse" and "django/urls/base.py" in p),
    ("CSRF tokens (get_token)", lambda f, p: f == "get_token" and "django/middleware/csrf.py" in p),
    ("timesince filter", lambda f, p: f in ("timesince_filter", "timesince") and "django" in p),
    ("journal SQL (journal.sql)", lambda f, p: "handover/journal_sql.py" in p),
]


def summarise(session: Any, calls: int, top: int = 15) -> dict[str, Any]:
    root = session.root_frame()
    self_time: dict[str, float] = defaultdict(float)
    named: dict[str, float] = defaultdict(float)

    def walk(frame: Any, inside: frozenset[str]) -> None:
        path = frame.file_path or ""
        key = f"{frame.function} ({frame.file_path_short}:{frame.line_no})"
        if not frame.is_synthetic:
            self_time[key] += frame.total_self_time
        now_inside = set(inside)
        for label, match in NAMED:
            if label not in inside and match(frame.function, path):
                named[label] += frame.time
                now_inside.add(label)
        for child in frame.children:
            walk(child, frozenset(now_inside))

    if root is not None:
        walk(root, frozenset())
    total = root.time if root is not None else 0.0
    busiest = sorted(self_time.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return {
        "calls": calls,
        "profiled_ms_per_call": total / calls * 1e3,
        "self_time_top": [
            {"function": name, "ms_per_call": t / calls * 1e3, "share": t / total if total else 0}
            for name, t in busiest
        ],
        "named": {
            label: {"ms_per_call": named[label] / calls * 1e3, "share": named[label] / total if total else 0}
            for label, _ in NAMED
        },
        "text": session_text(session),
    }


def session_text(session: Any) -> str:
    from pyinstrument.renderers import ConsoleRenderer

    renderer = ConsoleRenderer(unicode=False, color=False, short_mode=True, show_all=False)
    return renderer.render(session)


def profile(calls: int, call: Any, interval: float) -> Any:
    from pyinstrument import Profiler

    profiler = Profiler(interval=interval)
    profiler.start()
    for _ in range(calls):
        call()
    return profiler.stop()


def target_perform(args: argparse.Namespace) -> dict[str, Any]:
    from bench.journal import InProcess, setup_django, truncate_bench_tables

    # Every profiled call goes to one long run, as in bench.journal: no per-run intent limit.
    os.environ["SEAM_MAX_INTENTS_PER_RUN"] = "0"
    setup_django("seam_bench")
    from journal.models import Tenant

    slug = f"bench-profile-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    tenant = Tenant.objects.create(slug=slug, name="Benchmark profile")
    in_process = InProcess(tenant)
    try:
        in_process.run(max(20, args.calls // 4))  # warm: prepared statements, caches
        t0 = time.perf_counter()
        in_process.run(args.calls)
        unprofiled = (time.perf_counter() - t0) / args.calls * 1e3
        session = profile(args.calls, in_process.call, args.interval)
    finally:
        truncate_bench_tables("seam_bench")
    return {"target": "perform", "unprofiled_ms_per_call": unprofiled, **summarise(session, args.calls)}


def target_queue(args: argparse.Namespace) -> dict[str, Any]:
    from bench.journal import setup_django
    from bench.pages import RUNS, _tenant_and_counts, refresh_live_heartbeats, seed, staff_user

    setup_django("seam_bench_pages")
    from django.conf import settings
    from django.test import Client

    seed("seam_bench_pages", runs=RUNS, reseed=False)
    tenant, runs, intents = _tenant_and_counts()
    user = staff_user(tenant)
    refresh_live_heartbeats(tenant)
    if "testserver" not in settings.ALLOWED_HOSTS:
        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    client = Client()
    client.force_login(user)
    results = {}
    for name, headers in (("queue", {}), ("queue_partial", {"HX-Request": "true"})):

        def get(headers: dict[str, str] = headers) -> None:
            response = client.get("/", headers=headers)
            if response.status_code != 200:
                raise BenchError(f"GET / answered {response.status_code}")

        for _ in range(10):
            get()
        t0 = time.perf_counter()
        for _ in range(args.requests):
            get()
        unprofiled = (time.perf_counter() - t0) / args.requests * 1e3
        session = profile(args.requests, get, args.interval)
        results[name] = {"unprofiled_ms_per_call": unprofiled, **summarise(session, args.requests)}
    return {"target": "queue", "volume": {"runs": runs, "intents": intents}, **results}


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"interval_ms": args.interval * 1e3}
    for target in args.targets:
        progress(f"profiling {target}")
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.profiles",
                "--target",
                target,
                "--calls",
                str(args.calls),
                "--requests",
                str(args.requests),
                "--interval",
                str(args.interval),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        sys.stderr.write(child.stderr)
        if child.returncode != 0:
            raise BenchError(f"profiling {target} failed with {child.returncode}")
        out[target] = json.loads(child.stdout)
    return out


def render(result: dict[str, Any]) -> str:
    lines = [f"pyinstrument profiles (sampling every {result['interval_ms']:g} ms)"]

    def section(title: str, p: dict[str, Any]) -> None:
        lines.extend(
            [
                "",
                f"{title}: {p['unprofiled_ms_per_call']:.2f} ms per call unprofiled, "
                f"{p['profiled_ms_per_call']:.2f} ms profiled, {p['calls']} calls",
                "  named costs (ms per call, share):",
                *(
                    f"    {label:<42}{v['ms_per_call']:8.3f}  {v['share']:6.1%}"
                    for label, v in p["named"].items()
                    if v["ms_per_call"] > 0
                ),
                "  most self time:",
                *(
                    f"    {row['ms_per_call']:8.3f} ms  {row['share']:6.1%}  {row['function']}"
                    for row in p["self_time_top"]
                ),
            ]
        )

    if "perform" in result:
        section("services.perform, in process", result["perform"])
    if "queue" in result:
        section("queue page GET /", result["queue"]["queue"])
        section("queue partial (HX-Request)", result["queue"]["queue_partial"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=500, help="perform calls profiled (default 500)")
    parser.add_argument("--requests", type=int, default=60, help="queue requests profiled (default 60)")
    parser.add_argument(
        "--interval", type=float, default=0.001, help="sampling interval in s (default 0.001)"
    )
    parser.add_argument(
        "--targets",
        type=lambda v: [t for t in v.split(",") if t],
        default=list(TARGETS),
        help="perform,queue (default both)",
    )
    parser.add_argument("--target", choices=TARGETS, help=argparse.SUPPRESS)  # one target, in a child
    parser.add_argument("--json", action="store_true", help="print only a JSON object")
    parser.add_argument("--text", action="store_true", help="also print pyinstrument's call trees")
    args = parser.parse_args(argv)
    if args.calls < 10 or args.requests < 5 or set(args.targets) - set(TARGETS):
        parser.error("need --calls >= 10, --requests >= 5, --targets from perform,queue")
    try:
        if args.target:
            runner = target_perform if args.target == "perform" else target_queue
            print(json.dumps(runner(args)))
            return 0
        result = run_all(args)
    except (BenchError, ProcessFailed) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result))
        if args.text:
            for key in ("perform",):
                if key in result:
                    print(result[key]["text"])
            if "queue" in result:
                print(result["queue"]["queue"]["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
