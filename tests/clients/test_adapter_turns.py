"""How the framework adapters number an agent's calls (seam_client.adapters.Turns): by rank among
the calls of the same tool, so parallel calls of different tools keep their steps whichever
starts first."""

from __future__ import annotations

import threading

from seam_client.adapters import Turns


def test_each_tools_calls_are_ranked_on_their_own() -> None:
    turns = Turns()
    assert [turns.next("award_points"), turns.next("send_email"), turns.next("award_points")] == [1, 1, 2]


def test_calls_from_parallel_threads_get_distinct_ranks() -> None:
    turns = Turns()
    ranks: list[int] = []
    threads = [threading.Thread(target=lambda: ranks.append(turns.next("award_points"))) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(ranks) == list(range(1, 21))
