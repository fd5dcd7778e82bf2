"""Jobs in a chosen state, written straight into the engine's tables, for console tests that need
a dead, running or finished job without running a worker."""

from typing import Any

import psycopg

from jobqueue import enqueue
from jobqueue.store import JobStore, WorkerIdentity

Conn = psycopg.Connection[Any]


def make_job(
    conn: Conn,
    task: str = "noop",
    payload: dict[str, Any] | None = None,
    *,
    state: str = "available",
    queue: str = "default",
    tenant_id: int | None = None,
    error: str | None = None,
    attempt: int | None = None,
    max_attempts: int = 5,
    delay: float | None = None,
    unique_key: str | None = None,
    worker: str = "host:1:abcdef",
) -> int:
    """Enqueue a job, then move it to ``state`` as the engine would have left it (``dead`` and
    the other finished states with ``attempt`` 1 by default and ``error`` as its last error)."""
    job_id = enqueue(conn, task, payload, queue=queue, tenant_id=tenant_id, delay=delay,
                     max_attempts=max_attempts, unique_key=unique_key)  # fmt: skip
    if state == "running":
        conn.execute(
            "UPDATE jobs SET state = 'running', attempt = %s, locked_by = %s, started_at = now(),"
            " lease_expires_at = now() + interval '30 seconds' WHERE id = %s",
            (attempt or 1, worker, job_id),
        )
    elif state != "available":
        conn.execute(
            "UPDATE jobs SET state = %s, attempt = %s, started_at = now(), finished_at = now(),"
            " last_error = %s WHERE id = %s",
            (state, attempt if attempt is not None else 1, error, job_id),
        )
    elif attempt:
        conn.execute(
            "UPDATE jobs SET attempt = %s, last_error = %s WHERE id = %s", (attempt, error, job_id)
        )
    return job_id


def add_attempt(
    conn: Conn,
    job_id: int,
    attempt: int,
    outcome: str = "failed",
    error: str | None = None,
    traceback: str | None = None,
    worker: str = "host:1:abcdef",
    seconds: float = 0.25,
) -> None:
    conn.execute(
        "INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome,"
        " error, traceback, duration) VALUES (%s, %s, %s, now() - make_interval(secs => %s),"
        " now(), %s, %s, %s, make_interval(secs => %s))",
        (job_id, attempt, worker, seconds, outcome, error, traceback, seconds),
    )


def register_worker(
    conn: Conn, queue: str | None = "default", parent_id: int | None = None, pid: int = 4242
) -> int:
    """A row in the worker registry, as a running process would have written it."""
    name = f"host:{pid}:{'supervisor' if queue is None else 'abc123'}"
    identity = WorkerIdentity(name, "host", pid, parent_id, queue, 0 if queue is None else 2)
    return JobStore(conn).register_worker(identity)
