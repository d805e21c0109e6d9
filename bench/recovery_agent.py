"""The agent bench/recovery.py kills and starts again: a plain seam-client agent, as an integrator
writes one, that refunds an order and issues a credit memo through the sandbox's payments and
accounting APIs (each keeps every effect by its Idempotency-Key, Stripe's rule, and the agent's
code declares both tools to honour their keys), then completes its run. It imports seam_client
and httpx only, so a restart costs what an agent's own restart costs, not Django's.

    python -m bench.recovery_agent

Read from the environment: SEAM_URL, SEAM_TOKEN, SANDBOX_URL, TICKET (the run's external id: a
restart opens the same run), ORDER_ID, and DIE=after_send to SIGKILL itself once the sandbox has
booked the refund, before its outcome is recorded. Exit codes: 0 run completed, 3 IntentInDoubt,
4 IntentNotPerformed."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import httpx
from seam_client import ErrorClass, IntentInDoubt, IntentNotPerformed, Outcome, SeamClient, ToolError

TASK_TYPE = "bench_refund_agent"
VERSIONS = {"schema": "1", "flow": "bench-agent", "policy": "1", "capability": "refunds"}
# Both sandbox APIs keep their keys for as long as they keep their records; a day is declared.
HONOURS_KEY = ("issue_refund", "issue_credit")


def post(path: str, body: dict[str, Any], key: str) -> Outcome:
    """One keyed write to the sandbox, its answer classified as the sandbox documents it."""
    try:
        response = httpx.post(
            f"{os.environ['SANDBOX_URL']}/sandbox/api/{path}",
            json=body,
            headers={"Idempotency-Key": key},
            timeout=10,
        )
    except httpx.TransportError as exc:
        raise ToolError(ErrorClass.AMBIGUOUS, f"no answer from the sandbox: {exc!r}") from exc
    if response.status_code == 409:
        raise ToolError(ErrorClass.CONFLICT, response.text)
    if response.status_code >= 400:
        raise ToolError(
            ErrorClass.PERMANENT if response.status_code < 500 else ErrorClass.AMBIGUOUS, response.text
        )
    return Outcome(summary=f"{path}: {response.status_code}", receipt=dict(response.json()))


def refund(args: dict[str, Any], key: str) -> Outcome:
    answer = post("payments/refund", args, key)
    if os.environ.get("DIE") == "after_send":
        os.kill(os.getpid(), signal.SIGKILL)  # the refund is booked; its outcome never recorded
    return answer


def credit(args: dict[str, Any], key: str) -> Outcome:
    return post("accounting/credit", args, key)


def main() -> int:
    order = os.environ["ORDER_ID"]
    with SeamClient(
        os.environ["SEAM_URL"], os.environ["SEAM_TOKEN"], retries=2, backoff=0.05, honours_key=HONOURS_KEY
    ) as seam:
        run = seam.start_run(task_type=TASK_TYPE, versions=VERSIONS, external_id=os.environ["TICKET"])
        try:
            run.perform(
                "issue_refund", {"order_id": order, "amount": "14.95", "currency": "USD"}, refund, turn=1
            )
            run.perform("issue_credit", {"order_id": order, "amount": "5.00"}, credit, turn=2)
        except IntentInDoubt as doubt:
            print(f"in doubt: {doubt}", file=sys.stderr, flush=True)
            return 3
        except IntentNotPerformed as never:
            print(f"not performed: {never}", file=sys.stderr, flush=True)
            return 4
        run.complete()
    return 0


if __name__ == "__main__":
    sys.exit(main())
