"""The one-statement claim: order, visibility, pausing, SKIP LOCKED and its index."""

import threading
from typing import Any

import psycopg
import pytest

from jobqueue import JobRequest, JobStore, enqueue, enqueue_many
from tests.support.db import job_row, scalar

pytestmark = pytest.mark.pooled  # also through PgBouncer (tests/conftest.py)

Conn = psycopg.Connection[Any]


def test_claim_takes_visible_jobs_by_priority_then_age_and_marks_them_running(conn: Conn) -> None:
    store = JobStore(conn)
    low = enqueue(conn, "noop", priority=5)
    first = enqueue(conn, "noop", priority=0)
    second = enqueue(conn, "noop", priority=0)
    enqueue(conn, "noop", delay=3600)  # scheduled: invisible
    enqueue(conn, "noop", queue="other")
    claimed = store.claim("default", 10, "w1", lease_seconds=30)
    assert [job.id for job in claimed] == [first, second, low]
    row = job_row(conn, first)
    assert (row["state"], row["attempt"], row["locked_by"]) == ("running", 1, "w1")
    lease = scalar(
        conn,
        "SELECT extract(epoch FROM lease_expires_at - started_at) FROM jobs WHERE id = %s",
        first,
    )
    assert float(lease) == 30
    assert store.claim("default", 10, "w1", lease_seconds=30) == []


def test_claim_respects_its_limit(conn: Conn) -> None:
    enqueue_many(conn, [JobRequest("noop")] * 10)
    assert len(JobStore(conn).claim("default", 3, "w1", 30)) == 3
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE state = 'available'") == 7


def test_concurrent_claims_never_share_a_job(database_url: str, conn: Conn) -> None:
    enqueue_many(conn, [JobRequest("noop")] * 2000)
    claimed: dict[str, list[int]] = {}
    barrier = threading.Barrier(4)

    def claimer(name: str) -> None:
        ids: list[int] = []
        with psycopg.connect(database_url, autocommit=True) as connection:
            store = JobStore(connection)
            barrier.wait()
            while batch := store.claim("default", 7, name, 30):
                ids.extend(job.id for job in batch)
        claimed[name] = ids

    threads = [threading.Thread(target=claimer, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every_claim = [job_id for ids in claimed.values() for job_id in ids]
    assert len(every_claim) == len(set(every_claim)) == 2000
    assert all(claimed.values()), "every claimer should have won some jobs"


def test_a_claim_skips_a_row_locked_elsewhere_instead_of_waiting(
    database_url: str, conn: Conn
) -> None:
    """Another transaction holds the oldest job: the claim takes the next one at once.
    kills: claim-waits-instead-of-skipping"""
    oldest, younger = enqueue(conn, "noop"), enqueue(conn, "noop")
    with (
        psycopg.connect(database_url) as holder,
        psycopg.connect(database_url, autocommit=True) as claimer,
    ):
        holder.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (oldest,))
        claimer.execute("SET lock_timeout = '500ms'")
        assert [job.id for job in JobStore(claimer).claim("default", 1, "w1", 30)] == [younger]
        holder.rollback()
    assert job_row(conn, oldest)["state"] == "available"


def test_paused_queue_yields_nothing_until_resumed(conn: Conn) -> None:
    store = JobStore(conn)
    enqueue(conn, "noop")
    store.pause_queue("default", paused_by="test")
    assert store.claim("default", 10, "w1", 30) == []
    assert store.queues()[0]["paused_by"] == "test"
    assert store.resume_queue("default") is True
    assert len(store.claim("default", 10, "w1", 30)) == 1


def test_claim_uses_the_partial_index_beside_many_finished_jobs(conn: Conn) -> None:
    conn.execute(
        """
        INSERT INTO jobs (tenant_id, queue, task, state, attempt, finished_at)
        SELECT 1, 'default', 'noop', 'succeeded', 1, now() FROM generate_series(1, 100000)
        """
    )
    enqueue_many(conn, [JobRequest("noop")] * 50)
    conn.execute("ANALYZE jobs")
    sql = JobStore(conn)._queries["job_claim"].sql
    params = {"queue": "default", "limit": 10, "worker": "w1", "lease_seconds": 30}
    with conn.transaction():
        plan = "\n".join(
            row[0]
            for row in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)  # type: ignore[operator]
        )
        conn.execute("ROLLBACK")  # EXPLAIN ANALYZE ran the update; undo it
    assert "Index Scan using jobs_claim_idx on jobs" in plan, plan
    assert "Seq Scan on jobs" not in plan, plan
    assert "Sort" not in plan.split("Index Scan using jobs_claim_idx")[0].split("LockRows")[-1], (
        plan
    )
