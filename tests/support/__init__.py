"""Helpers of the tests alone. The processes the tests and the benchmarks start live in
devtools/processes.py."""
