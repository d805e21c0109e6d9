"""The processes the tests and the benchmarks start and wait for: `manage.py` commands in a child,
the sandbox (`manage.py runsandbox`), a gunicorn server, and fleets of `celery worker` and `celery
beat` processes on a Redis database of the caller's own. Each server or fleet is stopped on the
way out whatever happened; gunicorn and the Celery processes lead process groups of their own,
so what they started (gunicorn's workers, a worker's pool children) is stopped with them, and
only that.

What goes wrong is raised as ProcessFailed, with the end of the process's log: a test fails on it,
a benchmark prints it and exits 1."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis
import requests

ROOT = Path(__file__).resolve().parent.parent
SANDBOX_READY = re.compile(r"Sandbox listening on (http://\S+)")
SANDBOX_START_TIMEOUT = 30.0


class ProcessFailed(RuntimeError):
    """A process the caller started exited, or was not ready in time."""


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# The settings a guide page is run against (tests/clients/test_integrating_*.py): the demo's
# (`make demo`) and production's, each on the caller's database. A guide that works under the
# suite's own settings alone has not shown that it works where people follow it.
GUIDE_SETTINGS = ("demo", "production")


@functools.cache
def settings_environment(kind: str) -> dict[str, str]:
    """What a server, a worker or `manage.py` needs in its environment to run under the named
    settings (GUIDE_SETTINGS), beside DATABASE_URL: production's secrets are made up for the
    process (one set, so its servers and commands agree), its broker is the suite's Redis, TLS
    is left to a proxy that loopback has not, and its static files are collected, once, under
    var/ (as operations.md's steps do before a server starts; a folder for each pytest-xdist
    worker, which may collect at the same moment). Callers get a copy to extend."""
    from django.conf import settings  # the suite's; imported here, as this module loads before them

    if kind == "demo":
        return {"DJANGO_SETTINGS_MODULE": "config.settings.local", "DJANGO_DEBUG": "false"}
    if kind == "production":
        environment = {
            "DJANGO_SETTINGS_MODULE": "config.settings.production",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
            "SEAM_AUDIT_KEY": secrets.token_urlsafe(32),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "SEAM_METRICS_TOKEN": secrets.token_urlsafe(16),
            "SEAM_LOG_JSON": "0",
            # Plain HTTP on loopback: in a deployment a TLS proxy sets X-Forwarded-Proto.
            "DJANGO_SECURE_SSL_REDIRECT": "false",
            "DJANGO_STATIC_ROOT": str(
                ROOT / "var" / f"test-static{os.environ.get('PYTEST_XDIST_WORKER', '')}"
            ),
        }
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
            cwd=ROOT,
            env={**os.environ, **environment, "DATABASE_URL": "postgres://unused@127.0.0.1/unused"},
            check=True,
            timeout=300,
        )
        return environment
    raise ValueError(f"no settings named {kind!r}; expected one of {GUIDE_SETTINGS}")


def as_a_terminal_starts_it(argv: list[str]) -> list[str]:
    """`argv`, started with SIGINT at its default, as a terminal starts a foreground job, so that a
    test's Ctrl-C (SIGINT) reaches it. A command started in the background by a shell (the suite
    itself, say) inherits SIGINT ignored, and a shell cannot trap a signal ignored when it started."""
    reset = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", reset, *argv]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def database_url(settings_dict: Mapping[str, Any]) -> str:
    """A DATABASE_URL naming the same PostgreSQL database as a Django connection's settings."""
    if not settings_dict["ENGINE"].endswith("postgresql"):
        raise RuntimeError("the sandbox subprocess needs the suite's PostgreSQL database")
    user = quote(settings_dict.get("USER") or "", safe="")
    password = quote(settings_dict.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or "5432"
    return f"postgres://{auth}{host}:{port}/{quote(settings_dict['NAME'], safe='')}"


def manage_py(
    *args: str, env: Mapping[str, str], timeout: float | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """`manage.py <args>` in a child process of its own, from the project root, with `env` as its
    whole environment; its output is captured as text."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )


# --- the sandbox ------------------------------------------------------------------------------


@contextlib.contextmanager
def running_sandbox(db_url: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start `manage.py runsandbox` on a free port the OS picks, against `db_url`, wait until it
    listens, yield (base URL, process), then kill it (at interpreter exit too, should the block
    never get the chance)."""
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DJANGO_CONN_MAX_AGE": "0",
        "PYTHONUNBUFFERED": "1",
    }
    with tempfile.NamedTemporaryFile(prefix="runsandbox-", suffix=".log", delete=False) as log:
        log_path = Path(log.name)
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runsandbox", "--host", "127.0.0.1", "--port", "0"],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    stop = functools.partial(_terminate, process)
    atexit.register(stop)
    try:
        yield _wait_until_listening(process, log_path), process
    finally:
        stop()
        atexit.unregister(stop)
        log_path.unlink(missing_ok=True)


def _wait_until_listening(process: subprocess.Popen[bytes], log_path: Path) -> str:
    deadline = time.monotonic() + SANDBOX_START_TIMEOUT
    while time.monotonic() < deadline:
        output = log_path.read_text(errors="replace")
        match = SANDBOX_READY.search(output)
        if match:
            return match.group(1)
        if process.poll() is not None:
            raise ProcessFailed(f"runsandbox exited with {process.returncode}:\n{output}")
        time.sleep(0.05)
    raise ProcessFailed(
        f"runsandbox did not listen within {SANDBOX_START_TIMEOUT}s:\n{log_path.read_text(errors='replace')}"
    )


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


# --- gunicorn ---------------------------------------------------------------------------------


GUNICORN_CONF = ROOT / "config" / "gunicorn.conf.py"


@contextlib.contextmanager
def gunicorn_server(
    *,
    database_url: str,
    workers: int,
    conn_max_age: int,
    worker_class: str | None = None,
    threads: int | None = None,
    environment: Mapping[str, str] | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A real server process on loopback, started with production's gunicorn configuration
    (config/gunicorn.conf.py: worker class, threads, keep-alive, timeouts) and the caller's
    settings module, DEBUG off and a throwaway secret key, stopped on the way out whatever
    happened. `workers` is the caller's; `worker_class` and `threads`, when given, override the
    configuration's (each gthread thread keeps its own database connection); `environment`
    (settings_environment) runs it under other settings than the caller's. Yields (base URL,
    process); wait_until_serving says when it answers."""
    gunicorn = Path(sys.executable).with_name("gunicorn")
    if not gunicorn.exists():
        raise ProcessFailed(f"{gunicorn} not found: install the project into the venv first")
    port = free_port()
    env = _gunicorn_environment(
        database_url=database_url,
        port=port,
        workers=workers,
        conn_max_age=conn_max_age,
        worker_class=worker_class,
        threads=threads,
        environment=environment,
    )
    command = [str(gunicorn), "-c", str(GUNICORN_CONF), "config.wsgi:application"]
    described = f"{workers} {worker_class or 'configured'} workers x {threads or 'configured'} threads"
    with tempfile.TemporaryFile(mode="w+") as log:
        server = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        _say(
            f"started gunicorn (pid {server.pid}, {described}, "
            f"DJANGO_CONN_MAX_AGE={conn_max_age}) on 127.0.0.1:{port}"
        )
        try:
            yield f"http://127.0.0.1:{port}", server
        except BaseException:
            log.seek(0)
            tail = log.read()[-3000:]
            if tail.strip():
                _say("--- gunicorn log (tail) ---\n" + tail)
            raise
        finally:
            _stop_gunicorn(server)


def _gunicorn_environment(
    *,
    database_url: str,
    port: int,
    workers: int,
    conn_max_age: int,
    worker_class: str | None,
    threads: int | None,
    environment: Mapping[str, str] | None,
) -> dict[str, str]:
    """The server's environment: the caller's, production-like settings, and what
    config/gunicorn.conf.py reads; `environment` last, so that it decides."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"],
        "DATABASE_URL": database_url,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "DJANGO_DEBUG": "false",
        "DJANGO_LOG_LEVEL": "WARNING",
        # Read by config/settings/test.py (its own default is 0, for the suite).
        "DJANGO_CONN_MAX_AGE": str(conn_max_age),
        # Read by config/gunicorn.conf.py.
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "GUNICORN_WORKERS": str(workers),
        "GUNICORN_LOGLEVEL": "warning",
        **({"GUNICORN_WORKER_CLASS": worker_class} if worker_class else {}),
        **({"GUNICORN_THREADS": str(threads)} if threads else {}),
        # Another settings module's (settings_environment), last so that it decides.
        **(environment or {}),
    }


def _stop_gunicorn(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.terminate()  # the master stops its workers before it exits
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)  # its own session: only what it started
            server.wait()
    _say(f"stopped gunicorn (pid {server.pid})")


@contextlib.contextmanager
def serving_seam(database_url: str, *, environment: Mapping[str, str] | None = None) -> Iterator[str]:
    """A Seam for agents to call: gunicorn (one gthread worker, four threads, a connection per
    request) on `database_url`, under the caller's settings or `environment`'s
    (settings_environment), answering its health check; yields its base URL."""
    with gunicorn_server(
        database_url=database_url,
        workers=1,
        worker_class="gthread",
        threads=4,
        conn_max_age=0,
        environment=environment,
    ) as (base, server):
        wait_until_serving(base, server, "/healthz", what="answer its health check")
        yield base


def wait_until_serving(
    base: str,
    server: subprocess.Popen[bytes],
    path: str,
    *,
    what: str,
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
    request_timeout: float = 5.0,
) -> None:
    """Until GET `base + path` answers 200: proof that the server is up and, with the right path
    and headers, that it sees the caller's database and accepts its credentials. `what` names
    that proof in the error ("serve the login page")."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise ProcessFailed(f"the server exited with code {server.returncode} before serving")
        try:
            answer = requests.get(base + path, headers=dict(headers or {}), timeout=request_timeout)
        except requests.RequestException as exc:
            last = str(exc)
        else:
            if answer.status_code == 200:
                return
            last = f"HTTP {answer.status_code}: {answer.text[:300]}"
        time.sleep(0.2)
    raise ProcessFailed(f"server at {base} did not {what} within {timeout:.0f}s ({last})")


# --- Redis ------------------------------------------------------------------------------------


@contextlib.contextmanager
def emptied_redis(url: str) -> Iterator[redis.Redis]:
    """A client of the Redis database at `url` (a broker of the caller's own), emptied before and
    after. No Redis is an error, never a skip: what uses this needs real Celery processes."""
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        raise ProcessFailed(
            f"Redis is not reachable at {url} ({exc}); real Celery workers need it. Start it with: "
            "redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no"
        ) from exc
    try:
        client.flushdb()
        yield client
        client.flushdb()
    finally:
        client.close()


# --- Celery workers and beats -----------------------------------------------------------------


@dataclass
class Fleet:
    """`celery worker` and `celery beat` processes of the project's app, by name, each the leader
    of its own process group (so a worker's pool children are signalled with it), each logging to
    `<logs_dir>/<name>.log`. The caller stops them (stop_all), in a `finally`."""

    env: dict[str, str]
    logs_dir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    stopped: set[str] = field(default_factory=set)

    def start(self, name: str, *args: str) -> None:
        """`celery -A config <args> --loglevel=INFO`, as `make worker` and `make beat` run it."""
        with (self.logs_dir / f"{name}.log").open("wb") as log:
            self.processes[name] = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", *args, "--loglevel=INFO"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def worker(self, name: str, *, concurrency: int = 2) -> None:
        """A prefork worker named `name@<host>`, talking to no other worker (no gossip, mingle or
        heartbeat), so it starts quickly and alone."""
        self.start(
            name,
            "worker",
            "--pool=prefork",
            f"--concurrency={concurrency}",
            f"--hostname={name}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        )

    def beat(self, name: str) -> None:
        """A beat with a schedule file of its own, waking at least every second."""
        self.start(name, "beat", f"--schedule={self.logs_dir / f'{name}-schedule'}", "--max-interval=1")

    def log(self, name: str) -> str:
        return (self.logs_dir / f"{name}.log").read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(f"--- {name} (last lines)\n{self.log(name)[-3000:]}" for name in self.processes)

    def check_alive(self) -> None:
        """Raise if a process exited that was not stopped on purpose (kill)."""
        for name, process in self.processes.items():
            if name not in self.stopped and process.poll() is not None:
                raise ProcessFailed(f"{name} exited with {process.returncode}\n{self.logs()}")

    def wait_for(
        self,
        condition: Callable[[], bool],
        *,
        timeout: float,
        what: str,
        detail: Callable[[], str] | None = None,
    ) -> float:
        """Poll `condition` until it holds, checking meanwhile that every process is alive.
        Returns the seconds it took. On a timeout the error says `what`, then `detail()` (the
        state of the world then), then the end of each log."""
        started = time.monotonic()
        while not condition():
            self.check_alive()
            if time.monotonic() - started > timeout:
                said = f" ({detail()})" if detail else ""
                raise ProcessFailed(f"{what}: not within {timeout:.0f}s{said}\n{self.logs()}")
            time.sleep(0.1)
        return time.monotonic() - started

    def wait_ready(self, *workers: str, timeout: float = 60.0) -> None:
        """Until each named worker has logged that it is ready (a beat never does)."""
        self.wait_for(
            lambda: all(" ready." in self.log(name) for name in workers),
            timeout=timeout,
            what=f"{', '.join(workers)} ready",
        )

    def kill(self, name: str) -> None:
        """SIGKILL the whole group: the worker and the pool children running its tasks."""
        process = self.processes[name]
        self.stopped.add(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def stop_all(self, *, grace: float = 5.0) -> None:
        """SIGTERM every group, give them `grace` seconds to finish, then SIGKILL whatever is
        left of each group (pool children may outlive their leader)."""
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError):  # only the groups this fleet started
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)
