"""A plain seam-client agent that tests/clients/test_resume_after_crash.py runs as a child
process, kills between a call's send and its record, and starts again: it refunds an order and
issues a credit memo, each through the sandbox's payments and accounting APIs (which keep every
effect by its Idempotency-Key, Stripe's rule), then completes its run.

    python -m tests.clients.resume_agent

Read from the environment: SEAM_URL, SEAM_TOKEN, SANDBOX_URL, TICKET (the run's external id),
ORDER_ID; DIE (`after_send`: SIGKILL once the sandbox answered the refund, before its outcome is
recorded; `before_send`: once its intent is committed, before the sandbox is asked);
HONOURS_KEY (the refund tool's key lifetime in seconds: it honours its key; unset: not
declared); WAIT (`wait_for_settle` seconds); SEND_CURRENCY (the currency the refund sends, when
the agent's configuration changed since its intent was recorded). Exit codes: 0 run completed,
3 IntentInDoubt, 4 IntentNotPerformed, 5 KeyRefused."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import httpx
from seam_client import (
    ErrorClass,
    HonoursKey,
    IntentInDoubt,
    IntentNotPerformed,
    KeyRefused,
    Outcome,
    SeamClient,
    ToolError,
)

VERSIONS = {"schema": "1", "flow": "agent", "policy": "1", "capability": "refunds"}


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
    if os.environ.get("DIE") == "before_send":
        os.kill(os.getpid(), signal.SIGKILL)
    body = {**args, "currency": os.environ.get("SEND_CURRENCY") or args["currency"]}
    answer = post("payments/refund", body, key)
    if os.environ.get("DIE") == "after_send":
        os.kill(os.getpid(), signal.SIGKILL)  # the refund is booked; its outcome never recorded
    return answer


def credit(args: dict[str, Any], key: str) -> Outcome:
    return post("accounting/credit", args, key)


def main() -> int:
    lifetime = os.environ.get("HONOURS_KEY")
    declared = {"issue_refund": HonoursKey(float(lifetime))} if lifetime else {}
    order = os.environ["ORDER_ID"]
    with SeamClient(
        os.environ["SEAM_URL"],
        os.environ["SEAM_TOKEN"],
        retries=2,
        backoff=0.05,
        honours_key=declared,
        wait_for_settle=float(os.environ.get("WAIT") or 0),
    ) as seam:
        run = seam.start_run(task_type="refund_agent", versions=VERSIONS, external_id=os.environ["TICKET"])
        try:
            run.perform(
                "issue_refund", {"order_id": order, "amount": "14.95", "currency": "USD"}, refund, turn=1
            )
            run.perform("issue_credit", {"order_id": order, "amount": "5.00"}, credit, turn=2)
        except KeyRefused as refused:
            print("key refused:", refused, flush=True)
            return 5
        except IntentInDoubt as doubt:
            print(f"in doubt (person decides: {doubt.person_decides}):", doubt, flush=True)
            return 3
        except IntentNotPerformed as never:
            print("not performed:", never, flush=True)
            return 4
        run.complete()
        print("completed", run.id, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
