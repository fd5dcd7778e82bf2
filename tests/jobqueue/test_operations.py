"""Operator actions: requeue, cancel, run now, counts and pruning."""

from typing import Any

import psycopg
import pytest

from jobqueue import JobStore, OperationRefused, enqueue
from jobqueue.store import AttemptResult
from tests.jobqueue.test_leases import failure
from tests.support.db import attempt_rows, job_row, scalar

pytestmark = pytest.mark.pooled  # also through PgBouncer (tests/conftest.py)

Conn = psycopg.Connection[Any]


def test_requeue_a_dead_job_keeps_history_and_gives_a_fresh_budget(conn: Conn) -> None:
    store = JobStore(conn)
    job_id = enqueue(conn, "noop", max_attempts=1)
    store.claim("default", 1, "w1", 30)
    store.finish([failure(job_id)], "w1")
    assert job_row(conn, job_id)["state"] == "dead"
    assert store.requeue(job_id, attempt_budget=3) is True
    row = job_row(conn, job_id)
    assert (row["state"], row["attempt"], row["max_attempts"], row["finished_at"]) == (
        "available",
        1,
        4,
        None,
    )
    assert len(attempt_rows(conn, job_id)) == 1
    [claimed] = store.claim("default", 1, "w1", 30)
    assert claimed.attempt == 2


def test_requeue_refuses_jobs_that_are_not_dead_or_cancelled(conn: Conn) -> None:
    job_id = enqueue(conn, "noop")
    assert JobStore(conn).requeue(job_id, 5) is False
    assert job_row(conn, job_id)["max_attempts"] == 5


def test_requeue_is_refused_while_a_live_job_holds_the_unique_key(conn: Conn) -> None:
    store = JobStore(conn)
    dead = enqueue(conn, "noop", unique_key="report:7")
    conn.execute("UPDATE jobs SET state = 'dead', finished_at = now() WHERE id = %s", (dead,))
    enqueue(conn, "noop", unique_key="report:7")
    with pytest.raises(OperationRefused, match="a waiting or running job holds its unique key"):
        store.requeue(dead, 5)
    assert job_row(conn, dead)["state"] == "dead"


def test_cancel_a_scheduled_job_at_once_and_ask_a_running_one_to_stop(conn: Conn) -> None:
    store = JobStore(conn)
    scheduled = enqueue(conn, "noop", delay=600)
    running = enqueue(conn, "noop")
    [claimed] = store.claim("default", 5, "w1", 30)
    assert store.cancel(scheduled) == "cancelled"
    assert store.cancel(running) == "running"
    assert job_row(conn, scheduled)["state"] == "cancelled"
    assert job_row(conn, scheduled)["cancel_requested_at"] is None
    asked_at = job_row(conn, running)["cancel_requested_at"]
    assert asked_at is not None
    assert store.cancel(running) == "running"
    assert job_row(conn, running)["cancel_requested_at"] == asked_at, "the first request holds"
    assert store.extend_leases([(running, claimed.attempt)], "w1", 30) == {
        (running, claimed.attempt): "cancel_requested"
    }
    assert store.requeue(scheduled, 5) is True
    store.finish([AttemptResult(claimed, "failed", "E: x", None, 1.0, 0.1)], "w1")
    assert job_row(conn, running)["state"] == "cancelled", "asked to cancel: no retry"
    assert store.cancel(running) is None
    assert store.requeue(running, 5) is True
    assert job_row(conn, running)["cancel_requested_at"] is None


def test_run_now_makes_a_scheduled_job_visible(conn: Conn) -> None:
    store = JobStore(conn)
    job_id = enqueue(conn, "noop", delay=600)
    assert store.claim("default", 5, "w1", 30) == []
    assert store.run_now(job_id) is True
    assert store.run_now(job_id) is False
    assert [job.id for job in store.claim("default", 5, "w1", 30)] == [job_id]


def test_state_counts_split_scheduled_from_waiting(conn: Conn) -> None:
    store = JobStore(conn)
    enqueue(conn, "noop")
    enqueue(conn, "noop")
    enqueue(conn, "noop", delay=600)
    enqueue(conn, "noop", queue="mail")
    store.claim("mail", 1, "w1", 30)
    assert store.state_counts() == {
        "default": {"available": 2, "scheduled": 1},
        "mail": {"running": 1},
    }


def test_prune_deletes_only_finished_jobs_past_their_age(conn: Conn) -> None:
    store = JobStore(conn)
    old_done, new_done, old_dead, waiting = (enqueue(conn, "noop") for _ in range(4))
    conn.execute(
        "UPDATE jobs SET state = 'succeeded', finished_at = now() - interval '2 days'"
        " WHERE id = %s",
        (old_done,),
    )
    conn.execute(
        "UPDATE jobs SET state = 'succeeded', finished_at = now() WHERE id = %s", (new_done,)
    )
    conn.execute(
        "UPDATE jobs SET state = 'dead', finished_at = now() - interval '2 days' WHERE id = %s",
        (old_dead,),
    )
    conn.execute(
        "INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome,"
        " duration) VALUES (%s, 1, 'w1', now(), now(), 'succeeded', '1s')",
        (old_done,),
    )
    term = store.elect("maintenance", "w1", 30)
    assert term is not None
    assert (
        store.prune(term, keep_succeeded_seconds=86400, keep_dead_seconds=14 * 86400, limit=100)
        == 1
    )
    remaining = {row[0] for row in conn.execute("SELECT id FROM jobs")}
    assert remaining == {new_done, old_dead, waiting}
    assert scalar(conn, "SELECT count(*) FROM job_attempts") == 0
