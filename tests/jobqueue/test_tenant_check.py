"""The tenant of a job, checked once per statement (migrations 0021_tenant_check and
0023_insert_trigger_passes): what the
foreign key guaranteed, row by row, still holds: a job's tenant exists when the job commits,
and a tenant goes only when no job references it, whatever runs at the same time."""

import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from jobqueue import JobRequest, JobStore, enqueue, enqueue_many
from jobqueue.store import AttemptResult
from tests.jobqueue.test_leases import claimed
from tests.support.db import scalar

Conn = psycopg.Connection[Any]


def new_tenant(conn: Conn, slug: str) -> int:
    return int(
        scalar(conn, "INSERT INTO tenants (slug, name) VALUES (%s, %s) RETURNING id", slug, slug)
    )


def jobs_of(conn: Conn, tenant: int) -> int:
    return int(scalar(conn, "SELECT count(*) FROM jobs WHERE tenant_id = %s", tenant))


def test_a_tenant_goes_only_when_no_job_of_any_state_references_it(conn: Conn) -> None:
    """Live and finished jobs alike (finished ones live in history partitions) hold their
    tenant; once its jobs are gone, the tenant can go."""
    tenant = new_tenant(conn, "acme")
    [job_id] = enqueue_many(conn, [JobRequest("noop", tenant_id=tenant)])
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="jobs still reference"):
        conn.execute("DELETE FROM tenants WHERE id = %s", (tenant,))
    store = JobStore(conn)
    store.claim("default", 1, "w1", 30)
    store.finish([AttemptResult(claimed(job_id, 1), "succeeded", None, None, 0.0, 0.01)], "w1")
    assert scalar(conn, "SELECT tableoid::regclass::text FROM jobs WHERE id = %s", job_id) != (
        "jobs_live"
    )
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="jobs still reference"):
        conn.execute("DELETE FROM tenants WHERE id = %s", (tenant,))
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="cannot truncate"):
        conn.execute("TRUNCATE tenants CASCADE")
    conn.execute("DELETE FROM jobs WHERE tenant_id = %s", (tenant,))
    conn.execute("DELETE FROM tenants WHERE id = %s", (tenant,))
    assert scalar(conn, "SELECT count(*) FROM tenants WHERE id = %s", tenant) == 0


def test_a_statement_of_several_tenants_and_queues_is_checked_as_a_whole(
    conn: Conn, database_url: str
) -> None:
    """Each tenant counts once however many queues its jobs go to; one missing tenant among
    them refuses the statement, naming it, and leaves no job, queue row or wake-up behind.
    kills: insert-trigger-first-pair-only, tenant-check-never-refuses"""
    acme, other = new_tenant(conn, "acme"), new_tenant(conn, "other")
    requests = [
        JobRequest("noop", tenant_id=tenant, queue=queue)
        for tenant in (acme, other)
        for queue in ("mail", "reports", "mail")
    ]
    assert len(enqueue_many(conn, requests)) == 6
    assert (jobs_of(conn, acme), jobs_of(conn, other)) == (3, 3)
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN pauta_jobs")
        with pytest.raises(psycopg.errors.ForeignKeyViolation, match="there is no tenant 424242"):
            enqueue_many(
                conn,
                [*requests, JobRequest("noop", tenant_id=424242, queue="exports")],
            )
        assert list(listener.notifies(timeout=0.3)) == []
    assert (jobs_of(conn, acme), jobs_of(conn, other)) == (3, 3)
    assert scalar(conn, "SELECT count(*) FROM queues WHERE name = 'exports'") == 0


def test_a_job_cannot_be_moved_to_a_tenant_that_does_not_exist(conn: Conn) -> None:
    job_id = enqueue(conn, "noop")
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="there is no tenant 424242"):
        conn.execute("UPDATE jobs SET tenant_id = 424242 WHERE id = %s", (job_id,))
    other = new_tenant(conn, "other")
    conn.execute("UPDATE jobs SET tenant_id = %s WHERE id = %s", (other, job_id))
    assert jobs_of(conn, other) == 1


def test_a_tenant_is_deleted_only_under_read_committed(conn: Conn) -> None:
    """Under REPEATABLE READ the check would read the jobs of its snapshot, older than the
    enqueue it waited for: refused, with the way to do it."""
    tenant = new_tenant(conn, "acme")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="READ COMMITTED"):
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            conn.execute("DELETE FROM tenants WHERE id = %s", (tenant,))
    assert scalar(conn, "SELECT count(*) FROM tenants WHERE id = %s", tenant) == 1


def blocked(conn: Conn, pid: int) -> bool:
    row = conn.execute(
        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)
    ).fetchone()
    return row is not None and row[0] == "Lock"


def race(
    database_url: str, conn: Conn, first: Callable[[Conn], Any], second: Callable[[Conn], Any]
) -> BaseException | None:
    """Run ``first`` in an open transaction, then ``second`` in another thread until it waits
    for a lock ``first`` holds; commit ``first``; return what ``second`` raised (or None)."""
    outcome: list[BaseException | None] = []
    with psycopg.connect(database_url) as one, psycopg.connect(database_url) as two:
        first(one)
        pid = two.info.backend_pid

        def run_second() -> None:
            try:
                with two.transaction():
                    second(two)
                outcome.append(None)
            except psycopg.Error as error:
                outcome.append(error)

        thread = threading.Thread(target=run_second)
        thread.start()
        for _ in range(500):
            if blocked(conn, pid) or not thread.is_alive():
                break
            threading.Event().wait(0.01)
        assert blocked(conn, pid), "the second transaction never waited for the first"
        one.commit()
        thread.join(10)
    assert len(outcome) == 1
    return outcome[0]


def test_a_tenant_deleted_while_an_enqueue_holds_it_is_refused_once_the_jobs_commit(
    database_url: str, conn: Conn
) -> None:
    """The enqueue's statement locked the tenant (FOR KEY SHARE); the delete waits for it and
    then sees its jobs. kills: tenant-check-no-lock"""
    tenant = new_tenant(conn, "acme")
    error = race(
        database_url,
        conn,
        lambda one: enqueue(one, "noop", tenant_id=tenant),
        lambda two: two.execute("DELETE FROM tenants WHERE id = %s", (tenant,)),
    )
    assert isinstance(error, psycopg.errors.ForeignKeyViolation), error
    assert (
        jobs_of(conn, tenant),
        scalar(conn, "SELECT count(*) FROM tenants WHERE id = %s", tenant),
    ) == (1, 1)


def test_an_enqueue_for_a_tenant_being_deleted_is_refused_once_the_delete_commits(
    database_url: str, conn: Conn
) -> None:
    """The delete holds the tenant's row; the enqueue's lock waits for it, finds the row gone,
    and refuses the whole statement: no job of a tenant that no longer exists."""
    tenant = new_tenant(conn, "acme")
    error = race(
        database_url,
        conn,
        lambda one: one.execute("DELETE FROM tenants WHERE id = %s", (tenant,)),
        lambda two: enqueue_many(two, [JobRequest("noop", tenant_id=tenant)] * 3),
    )
    assert isinstance(error, psycopg.errors.ForeignKeyViolation), error
    assert "there is no tenant" in str(error)
    assert jobs_of(conn, tenant) == 0
