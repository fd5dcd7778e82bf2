"""Cancelling a running job: the heartbeat carries the request to the worker, a task that checks
``ctx.cancel_requested`` ends ``cancelled`` within a heartbeat, one that does not ends at its
timeout; neither is retried. Real worker.py processes and PostgreSQL."""

from typing import Any

import psycopg
import pytest

from jobqueue import cancel, enqueue
from tests.support.db import attempt_rows, create_test_tables, job_row, scalar
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]

HEARTBEAT = 1.0
LEASES = ("--lease", "4", "--heartbeat", str(HEARTBEAT), "--sweep", "0.2", "--poll", "0.1")


@pytest.fixture(autouse=True)
def test_tables(conn: Conn) -> None:
    create_test_tables(conn)


def started(conn: Conn, job_id: int) -> bool:
    return bool(scalar(conn, "SELECT count(*) FROM started WHERE job_id = %s", job_id))


def test_a_cooperative_task_ends_cancelled_within_one_heartbeat(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    worker = start_worker(workers, database_url, "--single", "--queues", "default=2", *LEASES)
    job_id = enqueue(conn, "stops_when_asked", max_attempts=5)
    neighbour = enqueue(conn, "stops_when_asked", max_attempts=5)
    wait_until(lambda: started(conn, job_id) and started(conn, neighbour), timeout=20)
    assert cancel(conn, job_id) == "running"  # conn is in autocommit: the request is committed
    wait_until(lambda: job_row(conn, job_id)["state"] == "cancelled", timeout=10)
    row = job_row(conn, job_id)
    took = (row["finished_at"] - row["cancel_requested_at"]).total_seconds()
    print(f"\ncancel requested -> cancelled in {took:.3f}s (heartbeat {HEARTBEAT}s)")
    assert took < HEARTBEAT + 0.5
    [attempt] = attempt_rows(conn, job_id)
    assert attempt["outcome"] == "cancelled"
    assert attempt["error"] == "Cancelled: the task stopped at a request to cancel the job"
    worker.wait_for_line(rf"job {job_id} attempt 1 cancelled")
    assert job_row(conn, neighbour)["state"] == "running", "only the job asked to stop stops"
    assert cancel(conn, job_id) is None, "a finished job cannot be cancelled again"
    assert cancel(conn, neighbour) == "running"
    wait_until(lambda: job_row(conn, neighbour)["state"] == "cancelled", timeout=10)


def test_a_task_that_ignores_the_request_ends_at_its_timeout_and_is_not_retried(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    worker = start_worker(workers, database_url, "--single", "--queues", "default=2", *LEASES)
    job_id = enqueue(conn, "ignores_cancel", max_attempts=5)  # @task(timeout=2)
    wait_until(lambda: started(conn, job_id), timeout=20)
    assert cancel(conn, job_id) == "running"
    wait_until(lambda: job_row(conn, job_id)["state"] != "running", timeout=10)
    row = job_row(conn, job_id)
    assert row["state"] == "cancelled"
    [attempt] = attempt_rows(conn, job_id)
    assert attempt["outcome"] == "timed_out"
    assert 2.0 <= attempt["duration"].total_seconds() < 3.0
    assert row["attempt"] == 1 and row["finished_at"] is not None
    assert worker.wait(30) == 75, "it gave a thread up: drained to be replaced"
