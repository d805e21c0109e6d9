"""Running Seam's processes in development: what the tests and the benchmarks (bench/) start and
wait for (`manage.py` commands, the sandbox, gunicorn, Celery fleets). Neither product code nor a
test: both import it from the project root, `from devtools.processes import ...`, and the product
never does (pyproject.toml's import contracts)."""
