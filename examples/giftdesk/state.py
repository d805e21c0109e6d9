"""Print what the giftdesk provider holds (its /state), waiting for it to answer if asked:

    python -m examples.giftdesk.state --wait 30

Standard library only, so a reader needs no HTTP client to follow docs/integrating.md."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

from .provider import DEFAULT_URL


def fetch_state(url: str, *, wait: float = 0.0) -> dict[str, object]:
    """The provider's state; retried until `wait` seconds have passed while nothing listens."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{url!r} is not an http(s) URL")
    deadline = time.monotonic() + wait
    while True:
        try:
            # The scheme is checked above: http(s) only, never file: or a custom one.
            with urllib.request.urlopen(url.rstrip("/") + "/state", timeout=2) as response:  # noqa: S310
                state: dict[str, object] = json.load(response)
                return state
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Print the giftdesk provider's state.")
    parser.add_argument("--url", default=os.environ.get("GIFTDESK_URL", DEFAULT_URL))
    parser.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the provider to answer")
    options = parser.parse_args(argv)
    try:
        state = fetch_state(options.url, wait=options.wait)
    except (urllib.error.URLError, ConnectionError) as exc:
        sys.exit(f"the giftdesk provider at {options.url} does not answer: {exc}")
    print(json.dumps(state, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
