"""An agent runtime in a process of its own, for tests that take the database away under it:
it performs journaled calls in a loop (journal.services.perform, in process) and writes, as
JSON lines,
- `dispatched.jsonl`: every call its dispatch made (the key), flushed and fsynced before the
  dispatch returns — the world's record of what left;
- `agent.jsonl`: every attempt's result: ok, or the error the agent was given.

    python -m tests.reliability.agent_loop OUT_DIR

It stops when OUT_DIR/stop exists. DATABASE_URL and DJANGO_SETTINGS_MODULE come from the
environment."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO


def _write(out: TextIO, **line: Any) -> None:
    out.write(json.dumps({"t": time.time(), **line}) + "\n")
    out.flush()
    os.fsync(out.fileno())


def main(out_dir: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from journal import services
    from journal.models import Tenant
    from journal.tool_errors import DispatchResult

    stop = out_dir / "stop"
    actor = services.Actor.agent("chaos-agent")
    with (out_dir / "dispatched.jsonl").open("a") as dispatched, (out_dir / "agent.jsonl").open("a") as log:

        def dispatch(args: dict[str, Any], key: str) -> DispatchResult:
            _write(dispatched, key=key, n=args["n"])
            return DispatchResult(receipt={"note": f"sent {args['n']}"})

        tenant, _ = Tenant.objects.get_or_create(slug="chaos", defaults={"name": "Chaos"})
        run = services.run_create(
            tenant=tenant,
            task_type="chaos",
            versions={"schema": "1", "flow": "1", "policy": "1", "capability": "1"},
            actor=actor,
        ).run
        _write(log, ready=True, run=str(run.pk))
        n = 0
        while not stop.exists():
            try:
                performed = services.perform(
                    run=run, tool="send_note", args={"n": n}, dispatch=dispatch, turn=n, actor=actor
                )
                _write(log, n=n, ok=True, key=performed.intent.idempotency_key)
            except Exception as exc:
                _write(log, n=n, ok=False, error=type(exc).__name__, message=str(exc)[:500])
                time.sleep(0.05)
            n += 1
            time.sleep(0.01)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
