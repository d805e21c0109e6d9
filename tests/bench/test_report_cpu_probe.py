"""docs/performance.md says how fast the CPU was before each benchmark, and flags a run during
which it slowed (bench/report.py): absolute times after that point are inflated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import report


def bench_directory(tmp_path: Path, start: float, before: dict[str, float]) -> Path:
    (tmp_path / "start.json").write_text(
        json.dumps({"date": "2026-12-05T11:00:00+00:00", "loadavg": [0.1, 0.1, 0.1], "cpu_probe_ms": start})
    )
    for name, ms in before.items():
        (tmp_path / f"{name}.before.json").write_text(json.dumps({"cpu_probe_ms": ms}))
        (tmp_path / f"{name}.json").write_text(json.dumps({"figure": 1.0}))
        (tmp_path / f"{name}.rc").write_text("0\n")
    return tmp_path


def report_of(directory: Path) -> str:
    """docs/performance.md as bench.report writes it from `directory`."""
    out = directory / "performance.md"
    assert report.write(directory, out) == 0
    return out.read_text()


@pytest.fixture
def end_probe(monkeypatch):
    def at(ms: float) -> None:
        monkeypatch.setattr(report, "cpu_probe_ms", lambda: ms)

    return at


def test_a_run_whose_cpu_slowed_is_flagged_with_when(tmp_path, end_probe):
    end_probe(19.0)
    text = report_of(bench_directory(tmp_path, 18.0, {"alpha": 18.5, "beta": 27.0}))

    assert "> The CPU was slower at times during this run" in text
    assert "18.0 ms (start) and 27.0 ms (before beta), 1.50 x" in text
    assert (
        "| CPU probe (ms for the same Python work) | start 18.0; before alpha 18.5; before beta 27.0; end 19.0 |"
        in text
    )


def test_a_steady_cpu_is_not_flagged(tmp_path, end_probe):
    end_probe(18.9)
    text = report_of(bench_directory(tmp_path, 18.0, {"alpha": 18.5, "beta": 19.5}))

    assert "CPU was slower" not in text
    assert "start 18.0; before alpha 18.5; before beta 19.5; end 18.9" in text


def test_the_probe_times_real_work():
    assert 0.1 < report.cpu_probe_ms(repeats=3) < 5_000


def test_the_report_written_again_keeps_the_machine_as_it_was_at_the_end(tmp_path, end_probe):
    end_probe(99.0)  # what the machine would say now: not the run's
    directory = bench_directory(tmp_path, 18.0, {"alpha": 18.5})
    (directory / "end.json").write_text(
        json.dumps({"date": "2026-12-05T11:30:00+00:00", "loadavg": [0.9, 0.8, 0.7], "cpu_probe_ms": 18.2})
    )

    text = report_of(directory)

    assert "start 18.0; before alpha 18.5; end 18.2 |" in text
    assert "2026-12-05T11:00:00+00:00 → 2026-12-05T11:30:00+00:00" in text
    assert "end 0.9, 0.8, 0.7" in text
