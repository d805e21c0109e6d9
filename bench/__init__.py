"""Benchmarks, each runnable alone from the project root as `python -m bench.<name>` (`make bench`
runs them all). What they share with the tests (the sandbox, gunicorn and Celery processes, and
waiting for them) lives in devtools/processes.py."""
