"""Link: a statement the server rolled back is retried on the same connection; a broken
connection is reopened. Real errors from a real server, no mocks."""

import logging
import threading
from typing import Any

import psycopg
import pytest

from jobqueue import enqueue
from jobqueue.connections import Link, refused_for_good
from jobqueue.store import JobStore
from tests.support.db import job_row

RAISE = "DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = %s; END $$"


def failing_then_pid(sqlstate: str, failures: int) -> tuple[list[int], Any]:
    """An operation that the server fails with ``sqlstate`` ``failures`` times, then returns
    the backend's pid; the list holds the pid seen at each call."""
    seen: list[int] = []

    def operation(store: JobStore) -> int:
        connection = store.connection
        seen.append(connection.info.backend_pid)
        if len(seen) <= failures:
            connection.execute(RAISE.replace("%s", f"'{sqlstate}'"))
        return connection.info.backend_pid

    return seen, operation


@pytest.mark.parametrize("sqlstate", ["40P01", "40001", "55P03", "57014"])
def test_a_statement_the_server_rolled_back_is_retried_on_the_same_connection(
    database_url: str, sqlstate: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A deadlock, a serialization failure, a lock or statement timeout: the connection is fine,
    so it is kept, and nothing says it was lost. kills: link-rollback-as-lost"""
    link = Link(database_url, "test", threading.Event())
    seen, operation = failing_then_pid(sqlstate, failures=2)
    with caplog.at_level(logging.INFO, logger="jobqueue.connections"):
        pid = link.call(operation)
    assert seen == [pid, pid, pid]
    assert "connection lost" not in caplog.text
    assert caplog.text.count("rolled the statement back") == 2
    link.close()


def test_a_broken_connection_is_reopened(database_url: str) -> None:
    link = Link(database_url, "test", threading.Event())
    first = link.call(lambda store: store.connection.info.backend_pid)
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (first,))
    second = link.call(
        lambda store: store.connection.execute("SELECT pg_backend_pid()").fetchone()[0]
    )  # type: ignore[index]
    assert second is not None and second != first
    link.close()


def test_tries_bound_the_retries_and_any_other_error_is_raised(database_url: str) -> None:
    link = Link(database_url, "test", threading.Event())
    seen, operation = failing_then_pid("40P01", failures=5)
    assert link.call(operation, tries=2) is None
    assert len(seen) == 2
    with pytest.raises(psycopg.errors.DivisionByZero):
        link.call(lambda store: store.connection.execute("SELECT 1 / 0"))
    link.close()


@pytest.mark.parametrize(
    ("reason", "lasting"),
    [
        ('FATAL:  database "nope" does not exist', True),
        ('FATAL:  role "ghost" does not exist', True),
        ('FATAL:  password authentication failed for user "postgres"', True),
        ('FATAL:  no pg_hba.conf entry for host "10.0.0.9", user "app", database "app"', True),
        ('FATAL:  role "app" is not permitted to log in', True),
        ("FATAL:  the database system is starting up", False),
        ("FATAL:  the database system is not yet accepting connections", False),
        ("FATAL:  the database system is shutting down", False),
        ("FATAL:  the database system is in recovery mode", False),
        ("FATAL:  sorry, too many clients already", False),
        ("FATAL:  remaining connection slots are reserved for superusers", False),
        ("connection refused", False),
    ],
)
def test_only_refusals_that_last_stop_a_worker_at_start(reason: str, lasting: bool) -> None:
    """A worker starting while PostgreSQL restarts after a crash ("not yet accepting
    connections") must wait for it, not exit as misconfigured (the chaos run found it)."""
    assert refused_for_good(f"connection failed: {reason}") is lasting


def test_the_engines_direct_connections_compile_no_jit(database_url: str) -> None:
    """A batch's job_finish was JIT-compiled whenever its estimated cost passed
    jit_above_cost: 1.2 s of a 1.3 s statement, on every batch. On a direct connection the
    session turns JIT off; behind a transaction pooler nothing is set on the session."""
    with psycopg.connect(database_url) as conn:
        server_default = conn.execute("SHOW jit").fetchone()
    stop = threading.Event()
    direct, pooled = Link(database_url, "t", stop), Link(database_url, "t", stop, pooled=True)
    try:
        assert direct.connect().execute("SHOW jit").fetchone() == ("off",)
        assert pooled.connect().execute("SHOW jit").fetchone() == server_default
    finally:
        direct.close()
        pooled.close()


def test_only_a_claiming_link_not_pooled_forces_generic_plans(database_url: str) -> None:
    """``reuse_plans`` applies to every statement of the session, unprepared ones too, so only
    the links that claim ask for it; behind a transaction pooler the setting would land on
    whichever server connection served it, so nothing is set there."""
    stop = threading.Event()
    links = {
        "claiming": Link(database_url, "t", stop, reuse_plans=True),
        "other": Link(database_url, "t", stop),
        "claiming, pooled": Link(database_url, "t", stop, reuse_plans=True, pooled=True),
    }
    try:
        modes = {
            name: link.connect().execute("SHOW plan_cache_mode").fetchone()
            for name, link in links.items()
        }
    finally:
        for link in links.values():
            link.close()
    assert modes == {
        "claiming": ("force_generic_plan",),
        "other": ("auto",),
        "claiming, pooled": ("auto",),
    }


def test_a_links_store_and_its_sole_claim_cursor_last_as_long_as_its_connection(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """The listener's claims of an idle queue's one job go through one store and one cursor
    while the connection lasts (a new cursor a claim cost a pickup 0.07 ms at the median); a
    reopened connection gets a new store, so nothing runs on the closed one's cursor.
    kills: link-store-per-call, link-keeps-a-closed-connections-store,
    sole-claim-new-cursor-each-time"""
    link = Link(database_url, "listener", threading.Event(), reuse_plans=True)

    def claim_sole(store: JobStore) -> tuple[JobStore, list[int], Any]:
        jobs, _ = store.claim_measured("default", 10, "w1", 30, True, sole_first=True)
        return store, [job.id for job in jobs], store._sole_cursor

    try:
        first = enqueue(conn, "noop")
        store, claimed, cursor = link.call(claim_sole, tries=2) or (None, [], None)
        assert claimed == [first] and cursor is not None
        second = enqueue(conn, "noop")
        assert link.call(claim_sole, tries=2) == (store, [second], cursor)
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (store.connection.info.backend_pid,))
        third = enqueue(conn, "noop")
        reopened = link.call(claim_sole, tries=2)
        assert reopened is not None, "the claim after the connection was reopened failed"
        new_store, claimed, new_cursor = reopened
        assert claimed == [third]
        assert new_store is not store and new_cursor is not cursor
        assert new_store.connection is link.connection
    finally:
        link.close()
    assert [job_row(conn, job_id)["state"] for job_id in (first, second, third)] == ["running"] * 3
