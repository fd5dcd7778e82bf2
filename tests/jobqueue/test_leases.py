"""Fenced results, lease renewal, the sweeper and release at shutdown."""

from datetime import UTC, datetime
from typing import Any

import psycopg

from jobqueue import JobStore, enqueue
from jobqueue.store import AttemptResult, ClaimedJob
from tests.support.db import attempt_rows, job_row, scalar

Conn = psycopg.Connection[Any]


def claimed(job_id: int, attempt: int) -> ClaimedJob:
    moment = datetime(2026, 11, 30, tzinfo=UTC)
    return ClaimedJob(job_id, 1, "default", "noop", {}, 0, attempt, 5, moment, moment)


def success(job_id: int, attempt: int = 1) -> AttemptResult:
    return AttemptResult(claimed(job_id, attempt), "succeeded", None, None, 0.0, 0.01)


def failure(job_id: int, attempt: int = 1, outcome: str = "failed") -> AttemptResult:
    return AttemptResult(
        claimed(job_id, attempt), outcome, "OSError: down", "Traceback...", 60.0, 0.02
    )


def test_finish_writes_the_result_and_one_attempt_row(conn: Conn) -> None:
    store = JobStore(conn)
    job_id = enqueue(conn, "noop")
    store.claim("default", 1, "w1", 30)
    assert store.finish([success(job_id)], "w1")[0] == {(job_id, 1): "succeeded"}
    row = job_row(conn, job_id)
    assert (row["state"], row["locked_by"], row["lease_expires_at"]) == ("succeeded", None, None)
    assert row["finished_at"] is not None
    [attempt] = attempt_rows(conn, job_id)
    assert (attempt["attempt"], attempt["worker"], attempt["outcome"]) == (1, "w1", "succeeded")


def test_failure_schedules_a_retry_from_database_time_then_dies_when_exhausted(conn: Conn) -> None:
    store = JobStore(conn)
    job_id = enqueue(conn, "noop", max_attempts=2)
    store.claim("default", 1, "w1", 30)
    assert store.finish([failure(job_id)], "w1")[0] == {(job_id, 1): "available"}
    backoff = scalar(
        conn,
        "SELECT extract(epoch FROM j.available_at - a.finished_at) FROM jobs j"
        " JOIN job_attempts a ON a.job_id = j.id WHERE j.id = %s",
        job_id,
    )
    assert float(backoff) == 60.0
    conn.execute("UPDATE jobs SET available_at = now() WHERE id = %s", (job_id,))
    store.claim("default", 1, "w1", 30)
    assert store.finish([failure(job_id, attempt=2)], "w1")[0] == {(job_id, 2): "dead"}
    row = job_row(conn, job_id)
    assert (row["state"], row["attempt"], row["last_error"]) == ("dead", 2, "OSError: down")
    assert [a["outcome"] for a in attempt_rows(conn, job_id)] == ["failed", "failed"]


def test_permanent_failure_dies_with_attempts_left(conn: Conn) -> None:
    store = JobStore(conn)
    job_id = enqueue(conn, "noop", max_attempts=5)
    store.claim("default", 1, "w1", 30)
    assert store.finish([failure(job_id, outcome="dead")], "w1")[0] == {(job_id, 1): "dead"}


def test_a_stale_owner_cannot_overwrite_the_new_owner(conn: Conn) -> None:
    """w1's lease is taken over by hand (as the sweeper plus w2 would); w1's late result and
    heartbeat are rejected and w2's result stands."""
    store = JobStore(conn)
    job_id = enqueue(conn, "noop")
    store.claim("default", 1, "w1", 30)
    conn.execute(
        "UPDATE jobs SET attempt = attempt + 1, locked_by = 'w2', lease_expires_at = now() + '30s'"
        " WHERE id = %s",
        (job_id,),
    )
    assert store.extend_leases([(job_id, 1)], "w1", 30) == set()
    assert store.finish([failure(job_id, attempt=1)], "w1")[0] == {}
    assert job_row(conn, job_id)["state"] == "running"
    assert store.finish([success(job_id, attempt=2)], "w2")[0] == {(job_id, 2): "succeeded"}
    assert store.finish([failure(job_id, attempt=1)], "w1")[0] == {}
    assert job_row(conn, job_id)["state"] == "succeeded"
    assert [(a["attempt"], a["worker"]) for a in attempt_rows(conn, job_id)] == [(2, "w2")]


def test_heartbeat_extends_only_the_leases_still_held(conn: Conn) -> None:
    store = JobStore(conn)
    held, lost = enqueue(conn, "noop"), enqueue(conn, "noop")
    store.claim("default", 2, "w1", 5)
    conn.execute("UPDATE jobs SET locked_by = 'w9' WHERE id = %s", (lost,))
    assert store.extend_leases([(held, 1), (lost, 1)], "w1", 120) == {(held, 1)}
    remaining = scalar(
        conn, "SELECT extract(epoch FROM lease_expires_at - now()) FROM jobs WHERE id = %s", held
    )
    assert 119 < float(remaining) <= 120


def test_sweeper_returns_expired_jobs_and_records_the_lost_attempt(conn: Conn) -> None:
    store = JobStore(conn)
    retry, exhausted, healthy = (
        enqueue(conn, "noop"),
        enqueue(conn, "noop", max_attempts=1),
        enqueue(conn, "noop"),
    )
    store.claim("default", 3, "w1", 30)
    conn.execute(
        "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id IN (%s, %s)",
        (retry, exhausted),
    )
    rescued = {job.id: job.state for job in store.rescue_expired()}
    assert rescued == {retry: "available", exhausted: "dead"}
    assert store.rescue_expired() == []
    assert job_row(conn, healthy)["state"] == "running"
    row = job_row(conn, retry)
    assert (row["state"], row["locked_by"], row["attempt"]) == ("available", None, 1)
    assert row["last_error"].startswith("LeaseExpired: worker w1")
    [attempt] = attempt_rows(conn, retry)
    assert (attempt["outcome"], attempt["worker"]) == ("lease_expired", "w1")
    assert job_row(conn, exhausted)["finished_at"] is not None


def test_release_gives_back_unstarted_jobs_whole_and_started_ones_without_cost(
    conn: Conn,
) -> None:
    store = JobStore(conn)
    unstarted, started = enqueue(conn, "noop"), enqueue(conn, "noop")
    place_in_line = job_row(conn, unstarted)["available_at"]
    store.claim("default", 2, "w1", 30)
    released, _ = store.release([(unstarted, 1, False, 0.0), (started, 1, True, 4.5)], "w1")
    assert released == [started]
    first = job_row(conn, unstarted)
    assert (first["state"], first["attempt"], first["max_attempts"]) == ("available", 0, 5)
    assert first["available_at"] == place_in_line
    assert attempt_rows(conn, unstarted) == []
    second = job_row(conn, started)
    assert (second["state"], second["attempt"], second["max_attempts"]) == ("available", 1, 6)
    [attempt] = attempt_rows(conn, started)
    assert attempt["outcome"] == "released"
    assert attempt["duration"].total_seconds() == 4.5
