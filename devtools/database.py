"""Which PostgreSQL to use: DATABASE_URL when set, otherwise an embedded one under ./var/.

`python -m devtools.database` prints the URL on stdout and says which server it is on stderr.
"""

import os
import sys
import warnings
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PGDATA = ROOT / "var" / "pgdata"
EMBEDDED_DATABASE = "pauta"


def database_url() -> tuple[str, str]:
    """(url, a sentence saying which server it is)."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return url, "Using the PostgreSQL named by DATABASE_URL."
    return embedded_url(), f"Using the embedded PostgreSQL (pgserver) with its data in {PGDATA}."


def embedded_url() -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pgserver

        PGDATA.parent.mkdir(parents=True, exist_ok=True)
        server = pgserver.get_server(PGDATA, cleanup_mode=None)  # keeps running for later runs
    admin_url = server.get_uri()
    with psycopg.connect(admin_url, autocommit=True) as connection:
        exists = connection.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (EMBEDDED_DATABASE,)
        ).fetchone()
        if not exists:
            connection.execute(f"CREATE DATABASE {EMBEDDED_DATABASE}")
    return server.get_uri(EMBEDDED_DATABASE)


if __name__ == "__main__":
    url, description = database_url()
    print(description, file=sys.stderr)
    print(url)
