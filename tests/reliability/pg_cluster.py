"""A private PostgreSQL cluster for tests that stop and start the server: initdb into a temporary
directory, a free port on 127.0.0.1, its own socket directory. The machine's shared server is
never touched. As root (initdb refuses root) the binaries run as the `postgres` OS user.

    with private_cluster(tmp_path) as cluster:
        cluster.create_database("seam")
        ...
        cluster.stop()   # pg_ctl stop -m immediate: every backend dies, as in a crash
        cluster.start()
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from devtools.processes import free_port

PG_BIN_ROOT = Path("/usr/lib/postgresql")


class ClusterUnavailable(RuntimeError):
    """The binaries a private cluster needs are not installed (or cannot run here)."""


def pg_bin_dir() -> Path:
    """The newest installed server's bin directory (Debian's layout), else initdb on PATH."""
    versions = sorted(
        (p for p in PG_BIN_ROOT.glob("*/bin") if (p / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if versions:
        return versions[-1]
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise ClusterUnavailable(
        "initdb is not installed (looked in /usr/lib/postgresql/*/bin and on PATH). "
        "Install it with: apt-get install -y postgresql"
    )


def _as_server_user() -> list[str]:
    """initdb and postgres refuse to run as root: run them as the `postgres` OS user then."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError as exc:
        raise ClusterUnavailable(
            "running as root, and there is no `postgres` OS user to run initdb as"
        ) from exc
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", "postgres", "--"]
    raise ClusterUnavailable("running as root, and runuser is missing (util-linux)")


@dataclass
class PrivateCluster:
    root: Path
    port: int
    bin_dir: Path

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "sock"

    @property
    def log_path(self) -> Path:
        return self.root / "server.log"

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*_as_server_user(), str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=60,
        )

    def init(self) -> None:
        owner = _as_server_user()
        self.root.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(exist_ok=True)
        if owner:
            postgres = pwd.getpwnam("postgres")
            for path in (self.root, self.socket_dir):
                os.chown(path, postgres.pw_uid, postgres.pw_gid)
        done = subprocess.run(
            [
                *owner,
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        if done.returncode != 0:
            raise ClusterUnavailable(f"initdb failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")

    def start(self) -> float:
        """Start the server and wait until it accepts connections; returns the seconds taken."""
        started = time.monotonic()
        # fsync=off: `stop -m immediate` kills the server's processes, not the machine, so what
        # was written to the OS survives it either way; the disk is shared with other suites.
        options = (
            f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=60"
        )
        done = self._ctl("-l", str(self.log_path), "-o", options, "-w", "-t", "60", "start", check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed:\n{done.stdout}\n{done.stderr}\n{self.log()}")
        return time.monotonic() - started

    def stop(self, mode: str = "immediate") -> None:
        """`immediate`: every server process quits at once without a checkpoint, as in a crash;
        the next start replays the WAL."""
        self._ctl("-m", mode, "-w", "stop", check=False)

    def is_running(self) -> bool:
        return self._ctl("status", check=False).returncode == 0

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@contextlib.contextmanager
def private_cluster() -> Iterator[PrivateCluster]:
    """A started private cluster in a new directory under the system's temporary directory (the
    `postgres` user must reach it, which pytest's per-user tmp_path does not allow), stopped
    immediately and removed afterwards."""
    bin_dir = pg_bin_dir()
    cluster = PrivateCluster(
        root=Path(tempfile.mkdtemp(prefix="seam-pg-")), port=free_port(), bin_dir=bin_dir
    )
    cluster.init()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)
