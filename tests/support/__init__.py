"""Helpers shared by the tests and the benchmarks (bench/), importable by both from the project
root without any edit of sys.path: `from tests.support.processes import ...`."""
