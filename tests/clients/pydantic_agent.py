"""The Pydantic AI agent that docs/integrating.md shows (points_pydantic.py: Agent.run calls the
journaled toolset's tools), run with the page's own scripted model (pydantic-ai's FunctionModel:
the balance, then each of agent_support.AWARDS in turn, then its answer). Run by
tests/clients/test_framework_adapters.py in a child process that is killed mid-run and started
again.

    python -m tests.clients.pydantic_agent    (SEAM_URL, SEAM_TOKEN, RUN_EXTERNAL_ID, GIFTDESK_URL)"""

from __future__ import annotations

import asyncio
import os

from tests.clients.agent_support import doc_module


def main() -> None:
    agent = doc_module("points_pydantic.py")
    print(asyncio.run(agent.run_agent(agent.scripted_model(), os.environ["RUN_EXTERNAL_ID"])))


if __name__ == "__main__":
    main()
