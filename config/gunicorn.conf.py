"""gunicorn settings for the web nodes: `gunicorn -c config/gunicorn.conf.py config.wsgi`.

Every number comes from the environment so one image serves any machine size. The benchmarks and
the tests that start a real server (devtools/processes.gunicorn_server) start it with this
file too, so what they measure is this configuration."""

import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# Threaded workers, so that a client's connection is kept alive between its requests: an agent
# runtime sends an intent and an outcome per call, and a sync worker (which closes the
# connection after every response) made each of them pay a new TCP connection. Each thread
# holds its own database connection: PostgreSQL's max_connections must cover
# web nodes x workers x threads + worker nodes x concurrency (docs/operations.md).
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "gthread")
workers = int(os.environ.get("GUNICORN_WORKERS", multiprocessing.cpu_count() * 2 + 1))
threads = int(os.environ.get("GUNICORN_THREADS", "2"))
# A request taking longer than this is killed and its worker replaced; the journal's calls take
# milliseconds, the slowest page (the audit CSV export streams) well under it.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = int(os.environ.get("GUNICORN_GRACEFUL_TIMEOUT", "30"))
# Longer than the load balancer's idle timeout, so the balancer closes idle connections first.
# An idle kept-alive connection waits in the worker's poller, not in a thread.
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", "75"))
# Recycle workers now and then (with jitter, so not all at once) to bound slow memory growth.
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", "10000"))
max_requests_jitter = int(os.environ.get("GUNICORN_MAX_REQUESTS_JITTER", "1000"))
forwarded_allow_ips = os.environ.get("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1")

accesslog = os.environ.get("GUNICORN_ACCESSLOG", "-")
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOGLEVEL", "info")
# The request id is the response's X-Request-ID (observability.middleware echoes or makes one),
# the same id the application's JSON log lines and audit rows carry.
access_log_format = '%(h)s "%(r)s" %(s)s %(B)s %(M)sms request_id=%({x-request-id}o)s ua="%(a)s"'


def child_exit(server: object, worker: object) -> None:
    """With PROMETHEUS_MULTIPROC_DIR, a dead worker's gauges must stop counting as live."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]
