"""Which PostgreSQL to use: DATABASE_URL when set, otherwise an embedded one under ./var/.

`python -m devtools.database COMMAND...` runs COMMAND with DATABASE_URL set to the chosen server.
The web app's commands (`flask --app app ...`) and `worker.py` find the same embedded server
through :func:`embedded_database` when DATABASE_URL is unset.
"""

import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg

if TYPE_CHECKING:
    from pgserver.postgres_server import PostgresServer

ROOT = Path(__file__).resolve().parent.parent
# Where the embedded server keeps its data (another directory keeps another server).
PGDATA = Path(os.environ.get("PAUTA_EMBEDDED_PGDATA", ROOT / "var" / "pgdata")).resolve()
EMBEDDED_DATABASE = "pauta"


_held: list["PostgresServer"] = []  # the embedded server this process uses, kept until it exits


def embedded_database() -> tuple[str, str] | None:
    """(url, a sentence saying which server it is) of the embedded PostgreSQL that `make run`
    created in this checkout, or None if there is none (no var/pgdata yet).

    The server is started if need be and kept for as long as this process runs: pgserver counts
    the processes using it and stops it when the last one exits.
    """
    if not (PGDATA / "PG_VERSION").exists():
        return None
    server = _embedded_server()
    _held.append(server)
    return server.get_uri(EMBEDDED_DATABASE), (
        f"DATABASE_URL is unset: using the embedded PostgreSQL (pgserver) of `make run`, with "
        f"its data in {PGDATA}."
    )


def _embedded_server() -> "PostgresServer":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        from pgserver.postgres_server import get_server

        PGDATA.parent.mkdir(parents=True, exist_ok=True)
        return get_server(PGDATA, cleanup_mode="stop")


@contextmanager
def database_url() -> Iterator[tuple[str, str]]:
    """Yield (url, a sentence saying which server it is).

    The embedded server is started if need be and stopped when the last process using it
    leaves the block (pgserver counts its users).
    """
    url = os.environ.get("DATABASE_URL")
    if url:
        yield url, "Using the PostgreSQL named by DATABASE_URL."
        return
    server = _embedded_server()
    try:
        with psycopg.connect(server.get_uri(), autocommit=True) as connection:
            exists = connection.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (EMBEDDED_DATABASE,)
            ).fetchone()
            if not exists:
                connection.execute(f"CREATE DATABASE {EMBEDDED_DATABASE}")
        yield (
            server.get_uri(EMBEDDED_DATABASE),
            f"Using the embedded PostgreSQL (pgserver) with its data in {PGDATA}.",
        )
    finally:
        server.cleanup()


def main(command: list[str]) -> int:
    """Run ``command`` with DATABASE_URL pointing at the chosen server; with ``--url``, print
    that URL (for `export DATABASE_URL=$(python -m devtools.database --url)` while `make run`
    runs: the embedded server stays up as long as make run does)."""
    if not command:
        print("usage: python -m devtools.database --url | COMMAND [ARGS...]", file=sys.stderr)
        return 2
    if command == ["--url"]:
        if os.environ.get("DATABASE_URL"):
            print(os.environ["DATABASE_URL"])
            return 0
        found = embedded_database()
        if found is None:
            print("no embedded PostgreSQL yet: run `make run` first", file=sys.stderr)
            return 1
        print(found[0])
        return 0
    with database_url() as (url, description):
        print(description, file=sys.stderr, flush=True)
        return subprocess.call(command, env={**os.environ, "DATABASE_URL": url})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
