"""The closing summary of the security tests' figures (docs/reliability.md, "Bad input and
access"): a plugin of the root conftest, so the process that prints the summary has it when
pytest-xdist runs the tests elsewhere (tests/support/worker_figures.py brings their figures)."""

from __future__ import annotations

from typing import Any

from tests.security import figures


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if figures.FUZZ_TRIED:
        terminalreporter.section("API fuzzing: requests per operation (of which refused, >= 400)")
        for label in sorted(figures.FUZZ_TRIED):
            terminalreporter.write_line(
                f"{figures.FUZZ_TRIED[label]:5d} ({figures.FUZZ_REFUSED[label]:5d})  {label}"
            )
        terminalreporter.write_line(
            f"{sum(figures.FUZZ_TRIED.values()):5d} ({sum(figures.FUZZ_REFUSED.values()):5d})  in all"
        )
    if figures.MATRIX:
        terminalreporter.section("Access matrix")
        terminalreporter.write_line(
            f"{figures.MATRIX['urls']} URL patterns x {figures.MATRIX['personas']} personas: "
            f"{figures.MATRIX['requests']} requests"
        )
    if figures.PAGE_FUZZ:
        fuzz = figures.PAGE_FUZZ
        terminalreporter.section("Staff console fuzzing")
        terminalreporter.write_line(
            f"{fuzz['urls']} URLs ({fuzz['routes']} routes) x {fuzz['personas']} personas x GET/POST, "
            f"{fuzz['parameters']} parameters x {fuzz['values']} hostile values and seeded mixes: "
            f"{fuzz['requests']} requests"
        )
        terminalreporter.write_line(
            "responses by status: " + ", ".join(f"{code}: {n}" for code, n in fuzz["statuses"].items())
        )
    if figures.ADMIN_FUZZ:
        fuzz = figures.ADMIN_FUZZ
        terminalreporter.section("Django admin fuzzing")
        terminalreporter.write_line(f"{fuzz['models']} models' admins: {fuzz['requests']} requests")
        terminalreporter.write_line(
            "responses by status: " + ", ".join(f"{code}: {n}" for code, n in fuzz["statuses"].items())
        )
    if figures.OUTBOUND_FUZZ:
        fuzz = figures.OUTBOUND_FUZZ
        terminalreporter.section("Outbound guard fuzzing")
        terminalreporter.write_line(
            f"{fuzz['spellings']} spellings of addresses inside the network: {fuzz['saved']} saved by "
            f"the admin form, {fuzz['sent']} sent by the worker, {fuzz['heard']} heard by the listener"
        )
