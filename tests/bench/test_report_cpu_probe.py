"""docs/performance.md says how fast the machine ran each benchmark, from the CPU probe sampled
throughout `make bench`, and flags a run in which it ran some benchmarks slower than others
(bench/report.py): absolute times measured then are inflated."""

from __future__ import annotations

import json
from pathlib import Path

from bench import report

START = 1_000.0


def bench_directory(tmp_path: Path, samples: dict[str, list[float]], *, end: bool = True) -> Path:
    """A make bench directory of benchmarks each 60 s long, in order, with `samples` (probe ms)
    taken during each, the run's start and, with `end`, its end."""
    (tmp_path / "start.json").write_text(
        json.dumps(
            {
                "date": "2026-12-05T11:00:00+00:00",
                "at": START,
                "loadavg": [0.1, 0.1, 0.1],
                "commit": "c0ffee1",
            }
        )
    )
    lines = []
    for position, (name, during) in enumerate(samples.items()):
        began = START + 60 * position
        (tmp_path / f"{name}.before.json").write_text(json.dumps({"at": began}))
        (tmp_path / f"{name}.json").write_text(json.dumps({"figure": 1.0}))
        (tmp_path / f"{name}.rc").write_text("0\n")
        lines += [json.dumps({"at": began + 5 + 10 * i, "ms": ms}) for i, ms in enumerate(during)]
    (tmp_path / "probe.jsonl").write_text("\n".join(lines) + "\n")
    if end:
        (tmp_path / "end.json").write_text(
            json.dumps(
                {
                    "date": "2026-12-05T11:30:00+00:00",
                    "at": START + 60 * len(samples),
                    "loadavg": [0.9, 0.8, 0.7],
                }
            )
        )
    return tmp_path


def report_of(directory: Path) -> str:
    """docs/performance.md as bench.report writes it from `directory`."""
    out = directory / "performance.md"
    assert report.write(directory, out) == 0
    return out.read_text()


def test_each_benchmark_gets_the_fastest_of_the_samples_taken_during_it(tmp_path):
    text = report_of(bench_directory(tmp_path, {"alpha": [18.0, 30.0, 19.0], "beta": [18.5, 18.0]}))

    assert "every 5 s; samples) | alpha 18.0 (3); beta 18.0 (2) |" in text
    assert "slower during some benchmarks" not in text


def test_a_run_that_ran_one_benchmark_slower_is_flagged_with_which(tmp_path):
    text = report_of(bench_directory(tmp_path, {"alpha": [18.0, 18.4], "beta": [26.0, 27.0, 28.0]}))

    assert "> The machine was slower during some benchmarks than others" in text
    assert "at best 18.0 ms during alpha and 26.0 ms during beta, 1.44 x" in text


def test_the_report_written_again_keeps_the_machine_as_it_was_at_the_end(tmp_path):
    text = report_of(bench_directory(tmp_path, {"alpha": [18.0]}))

    assert "2026-12-05T11:00:00+00:00 → 2026-12-05T11:30:00+00:00" in text
    assert "end 0.9, 0.8, 0.7" in text
    assert "| commit | `c0ffee1` |" in text  # the run's, not the checkout's


def test_samples_after_the_last_benchmark_ended_are_not_its(tmp_path):
    directory = bench_directory(tmp_path, {"alpha": [18.0]})
    with (directory / "probe.jsonl").open("a") as lines:
        lines.write(json.dumps({"at": START + 61, "ms": 90.0}) + "\n")

    assert report.probe_by_benchmark(directory, ["alpha"], {"at": START + 60}) == [("alpha", 18.0, 1)]


def test_the_sampler_times_real_work_into_its_file(tmp_path):
    out = tmp_path / "probe.jsonl"

    report.sample(out, every=0.0, samples=2)

    taken = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(taken) == 2
    assert all(0.1 < s["ms"] < 5_000 and s["at"] > START for s in taken)
