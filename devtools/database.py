"""Which PostgreSQL to use: DATABASE_URL when set, otherwise an embedded one under ./var/.

`python -m devtools.database COMMAND...` runs COMMAND with DATABASE_URL set to the chosen server.
"""

import os
import subprocess
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PGDATA = ROOT / "var" / "pgdata"
EMBEDDED_DATABASE = "pauta"


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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pgserver

        PGDATA.parent.mkdir(parents=True, exist_ok=True)
        server = pgserver.get_server(PGDATA, cleanup_mode="stop")
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
    """Run ``command`` with DATABASE_URL pointing at the chosen server."""
    if not command:
        print("usage: python -m devtools.database COMMAND [ARGS...]", file=sys.stderr)
        return 2
    with database_url() as (url, description):
        print(description, file=sys.stderr, flush=True)
        return subprocess.call(command, env={**os.environ, "DATABASE_URL": url})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
