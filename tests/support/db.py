"""Small read helpers for asserting on the engine's tables."""

from typing import Any

import psycopg
from psycopg.rows import dict_row


def job_row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    with conn.cursor(row_factory=dict_row) as cursor:
        row = cursor.execute("SELECT * FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None, f"job {job_id} does not exist"
    return row


def attempt_rows(conn: psycopg.Connection[Any], job_id: int) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cursor:
        return cursor.execute(
            "SELECT * FROM job_attempts WHERE job_id = %s ORDER BY attempt", (job_id,)
        ).fetchall()


def scalar(conn: psycopg.Connection[Any], sql: str, *params: Any) -> Any:
    row = conn.execute(sql, params).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row[0]


def create_test_tables(conn: psycopg.Connection[Any]) -> None:
    """Tables the test tasks write to: a ledger of completed runs (one per job), a log of runs
    (duplicates allowed) and a log of starts."""
    conn.execute(
        "CREATE TABLE ledger (job_id bigint PRIMARY KEY, attempt int NOT NULL,"
        " worker text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
    )
    conn.execute(
        "CREATE TABLE runs (job_id bigint NOT NULL, attempt int NOT NULL, worker text NOT NULL,"
        " at timestamptz NOT NULL DEFAULT clock_timestamp())"
    )
    conn.execute(
        "CREATE TABLE started (job_id bigint, attempt int, worker text NOT NULL,"
        " at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (job_id, attempt))"
    )


def worker_processes(conn: psycopg.Connection[Any], supervisor: str) -> list[int]:
    """The pids of a live supervisor (by its workers.name) and of its live children."""
    rows = conn.execute(
        "SELECT pid FROM workers WHERE state IN ('running', 'draining') AND (name = %s"
        " OR parent_id = (SELECT id FROM workers WHERE name = %s)) ORDER BY parent_id NULLS FIRST",
        (supervisor, supervisor),
    ).fetchall()
    return [int(row[0]) for row in rows]


def table_digests(conn: psycopg.Connection[Any], skip: tuple[str, ...] = ()) -> dict[str, str]:
    """An md5 of every row of every table in the database (but ``skip``), by table name: two
    equal results mean nothing was written in between. Tables are listed from the catalog, so
    a table added by a later migration is covered too."""
    tables = [
        name
        for (name,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
        if name not in skip
    ]
    query = " UNION ALL ".join(
        f"SELECT '{name}', md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), ''))"
        f" FROM {name} t"
        for name in tables
    )
    return dict(conn.execute(query).fetchall())  # type: ignore[arg-type]
