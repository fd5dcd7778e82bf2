"""Enqueue joins the caller's transaction: psycopg connections and SQLAlchemy sessions."""

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from app import sqlalchemy_url
from jobqueue import EnqueueError, JobRequest, PayloadTooLarge, enqueue, enqueue_many
from jobqueue.backoff import DEFAULT_MAX_ATTEMPTS
from jobqueue.registry import DEFAULT_QUEUE
from tests.support.db import job_row, scalar

Conn = psycopg.Connection[Any]


def test_rolled_back_enqueue_leaves_no_row(conn: Conn) -> None:
    with pytest.raises(RuntimeError), conn.transaction():
        enqueue(conn, "noop")
        raise RuntimeError("the caller's work failed")
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def test_committed_enqueue_is_a_waiting_job(conn: Conn) -> None:
    with conn.transaction():
        job_id = enqueue(conn, "sleep", {"seconds": 1}, queue="reports", priority=-3)
    row = job_row(conn, job_id)
    assert row["state"] == "available"
    assert (row["queue"], row["task"], row["payload"]) == ("reports", "sleep", {"seconds": 1})
    assert (row["priority"], row["attempt"], row["max_attempts"]) == (-3, 0, 5)
    assert row["tenant_id"] == scalar(conn, "SELECT id FROM tenants WHERE slug = 'system'")
    assert scalar(conn, "SELECT count(*) FROM queues WHERE name = 'reports'") == 1


def test_enqueue_through_a_sqlalchemy_session_commits_and_rolls_back_with_it(
    database_url: str,
) -> None:
    engine = create_engine(sqlalchemy_url(database_url))
    try:
        with Session(engine) as session:
            session.execute(text("CREATE TABLE scratch_rows (id int)"))
            session.execute(text("INSERT INTO scratch_rows VALUES (1)"))
            enqueue(session, "noop")
            session.rollback()
        with Session(engine) as session:
            job_id = enqueue(session, "noop")
            session.commit()
        with engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM jobs")).scalar() == 1
            assert connection.execute(text("SELECT id FROM jobs")).scalar() == job_id
            exists = connection.execute(text("SELECT to_regclass('scratch_rows')")).scalar()
            assert exists is None
    finally:
        engine.dispose()


def test_notification_is_delivered_at_commit_and_not_for_scheduled_jobs(
    conn: Conn, database_url: str
) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN pauta_jobs")
        with conn.transaction():
            enqueue(conn, "noop", queue="later", delay=60)
            enqueue(conn, "noop", queue="mail")
            enqueue(conn, "noop", queue="mail")
            before_commit = list(listener.notifies(timeout=0.2))
        after_commit = [n.payload for n in listener.notifies(timeout=1, stop_after=1)]
        rest = [n.payload for n in listener.notifies(timeout=0.2)]
    assert before_commit == []
    assert after_commit + rest == ["mail"]


def test_unique_key_returns_the_live_job_and_frees_up_when_it_finishes(conn: Conn) -> None:
    first = enqueue(conn, "noop", unique_key="digest:42")
    assert enqueue(conn, "noop", unique_key="digest:42") == first
    other_tenant = scalar(
        conn, "INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme') RETURNING id"
    )
    assert enqueue(conn, "noop", unique_key="digest:42", tenant_id=other_tenant) != first
    conn.execute("UPDATE jobs SET state = 'succeeded', finished_at = now() WHERE id = %s", (first,))
    assert enqueue(conn, "noop", unique_key="digest:42") != first


def test_delay_and_run_at_set_the_visibility_clock_from_database_time(conn: Conn) -> None:
    delayed = enqueue(conn, "noop", delay=90)
    at = datetime.now(UTC) + timedelta(days=2)
    scheduled = enqueue(conn, "noop", run_at=at)
    gap = scalar(
        conn,
        "SELECT extract(epoch FROM available_at - created_at) FROM jobs WHERE id = %s",
        delayed,
    )
    assert 89.9 < float(gap) < 90.1
    assert job_row(conn, scheduled)["available_at"] == at


def test_bulk_enqueue_returns_ids_in_order_in_one_statement(conn: Conn) -> None:
    requests = [JobRequest("sleep", {"seconds": n}, priority=n % 7) for n in range(5000)]
    with conn.transaction():
        ids = enqueue_many(conn, requests)
    assert len(ids) == len(set(ids)) == 5000
    rows = conn.execute("SELECT id, payload, priority FROM jobs ORDER BY id").fetchall()
    assert [row[0] for row in rows] == ids
    assert [row[1]["seconds"] for row in rows] == list(range(5000))
    assert [row[2] for row in rows] == [n % 7 for n in range(5000)]


def test_bulk_enqueue_answers_duplicates_with_the_existing_ids(conn: Conn) -> None:
    existing = enqueue(conn, "noop", unique_key="k1")
    ids = enqueue_many(
        conn,
        [
            JobRequest("noop", unique_key="k1"),
            JobRequest("noop", unique_key="k2"),
            JobRequest("noop", unique_key="k2"),
            JobRequest("noop"),
        ],
    )
    assert ids[0] == existing
    assert ids[1] == ids[2] != existing
    assert scalar(conn, "SELECT count(*) FROM jobs") == 3


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"payload": {"blob": "x" * 300_000}}, PayloadTooLarge, "the limit is 262,144 bytes"),
        ({"payload": {"when": datetime.now(UTC)}}, EnqueueError, "is not JSON"),
        ({"payload": {"ratio": float("nan")}}, EnqueueError, "is not JSON"),
        ({"payload": ["a", "list"]}, EnqueueError, "must be a JSON object"),
        ({"payload": {"text": "a\x00b"}}, EnqueueError, "NUL character"),
        ({"payload": {"key\x00": 1}}, EnqueueError, "NUL character"),
        ({"payload": {"text": "lone \ud800"}}, EnqueueError, "unpaired surrogate"),
        ({"delay": -1}, EnqueueError, "delay must be between 0 and"),
        ({"delay": float("inf")}, EnqueueError, "delay must be between 0 and"),
        ({"delay": float("nan")}, EnqueueError, "delay must be between 0 and"),
        ({"delay": 1e20}, EnqueueError, "delay must be between 0 and"),
        ({"delay": "5"}, EnqueueError, "delay must be a number"),
        ({"delay": 1, "run_at": datetime.now(UTC)}, EnqueueError, "either delay or run_at"),
        ({"run_at": datetime(2030, 1, 1)}, EnqueueError, "timezone-aware"),
        ({"run_at": datetime.fromisoformat("9999-12-31T23:59:59-14:00")}, EnqueueError, "run_at"),
        ({"run_at": datetime.fromisoformat("0001-01-01T00:00:00+14:00")}, EnqueueError, "run_at"),
        ({"queue": "Bad Queue!"}, EnqueueError, "queue name"),
        ({"queue": "mail\x00"}, EnqueueError, "queue name"),
        ({"priority": 40_000}, EnqueueError, "priority"),
        ({"priority": True}, EnqueueError, "priority"),
        ({"max_attempts": -2}, EnqueueError, "max_attempts"),
        ({"max_attempts": 99_999_999_999}, EnqueueError, "max_attempts"),
        ({"tenant_id": 2**70}, EnqueueError, "tenant_id"),
        ({"unique_key": "k\x00"}, EnqueueError, "unique_key holds a NUL"),
        ({"unique_key": "k" * 1001}, EnqueueError, "unique_key is 1,001 bytes"),
        ({"unique_key": "\U0001f600" * 300}, EnqueueError, "unique_key is 1,200 bytes"),
    ],
)
def test_bad_enqueues_are_refused_and_write_nothing(
    conn: Conn, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        enqueue(conn, "noop", **kwargs)
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def test_one_bad_request_refuses_the_whole_batch(conn: Conn) -> None:
    with pytest.raises(EnqueueError):
        enqueue_many(conn, [JobRequest("noop"), JobRequest("noop", delay=-5)])
    with pytest.raises(EnqueueError, match="task is 201 characters"):
        enqueue_many(conn, [JobRequest("t" * 201)])
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


@pytest.mark.parametrize(
    "payload",
    [
        {"text": "\x00"},
        {"key\x00": 1},
        {"text": "é \x00"},
        {"text": "lone \ud800"},
        {"text": "ascii", "other": "\udfff"},
    ],
)
def test_a_payload_postgresql_cannot_store_refuses_the_batch_naming_it(
    conn: Conn, payload: dict[str, Any]
) -> None:
    """The batch's payloads are encoded together and looked over once (enqueue._payloads_json),
    the quick tests first: a NUL, escaped by the encoder, in text all ASCII or not, and an
    unpaired surrogate, which only text that is not all ASCII holds.
    kills: payload-nul-quick-test-inverted, payload-surrogate-quick-test-inverted"""
    requests = [JobRequest("noop", {"n": 1}), JobRequest("noop", payload)]
    with pytest.raises(EnqueueError, match="payload of task 'noop' holds a NUL character"):
        enqueue_many(conn, requests)
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


@pytest.mark.parametrize(
    ("good", "bad", "message"),
    [
        ({"priority": 1}, {"priority": True}, "priority must be a whole number"),
        ({"max_attempts": 1}, {"max_attempts": True}, "max_attempts must be between"),
        ({"tenant_id": 1}, {"tenant_id": True}, "tenant_id must be a tenant's id"),
        ({"delay": 1}, {"delay": True}, "delay must be a number of seconds"),
        ({"timeout": 1}, {"timeout": True}, "timeout must be a number of seconds"),
        ({"unique_key": "k"}, {"unique_key": ["k"]}, "unique_key must be text, not list"),
        ({"queue": "a"}, {"queue": ["a"]}, "queue name \\['a'\\] is invalid"),
    ],
)
def test_a_bad_request_is_refused_after_a_good_one_equal_to_it(
    conn: Conn, good: dict[str, Any], bad: dict[str, Any], message: str
) -> None:
    """A batch checks a request once for the requests alike to it (enqueue._prepare_all):
    ``True == 1`` and hashes alike, yet a priority of True is refused where 1 is not, and an
    unhashable value is refused with its sentence, not a TypeError.
    kills: bulk-alike-ignores-types"""
    requests = [JobRequest("noop", {"n": 1}, **good), JobRequest("noop", {"n": 2}, **bad)]
    with pytest.raises(EnqueueError, match=message):
        enqueue_many(conn, requests)
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def test_text_that_only_looks_like_a_nul_escape_is_stored_as_given(conn: Conn) -> None:
    """A literal backslash followed by "u0000" is ordinary text; only a real NUL is refused,
    alone or in a batch."""
    job_id = enqueue(conn, "noop", {"text": "\\u0000 and \U0001f600"})
    [first, second] = enqueue_many(
        conn, [JobRequest("noop", {"text": "\\u0000"}), JobRequest("noop", {"text": "\\\\u0000"})]
    )
    stored = "SELECT payload ->> 'text' FROM jobs WHERE id = %s"
    assert scalar(conn, stored, job_id) == "\\u0000 and \U0001f600"
    assert scalar(conn, stored, first) == "\\u0000"
    assert scalar(conn, stored, second) == "\\\\u0000"


def test_unknown_tenant_is_refused_by_the_tenant_check(conn: Conn) -> None:
    """One statement, one check (tests/jobqueue/test_tenant_check.py): a batch with one unknown
    tenant among known ones is refused whole."""
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="there is no tenant 999999"):
        enqueue(conn, "noop", tenant_id=999_999)
    requests = [JobRequest("noop", tenant_id=1), JobRequest("noop", tenant_id=999_998)]
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="there is no tenant 999998"):
        enqueue_many(conn, requests)
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


AT = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
# (delay, run_at): neither, a delay, a time
WHENS = [(None, None), (30.0, None), (None, AT)]


@st.composite
def batches(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Requests as keyword arguments, ``tenant`` an index into the test's tenants; from small
    pools, so that a batch's column is often one value for every request and often not."""

    def request() -> dict[str, Any]:
        delay, run_at = draw(st.sampled_from(WHENS))
        return {
            "task": draw(st.sampled_from(["noop", "sleep"])),
            "queue": draw(st.sampled_from([None, "a", "b"])),
            "priority": draw(st.sampled_from([0, 3, -2])),
            "max_attempts": draw(st.sampled_from([None, 1, 7])),
            "tenant": draw(st.sampled_from([None, 0, 1])),
            "delay": delay,
            "run_at": run_at,
            "timeout": draw(st.sampled_from([None, 2.5])),
            "unique_key": draw(st.sampled_from([None, None, "k1", "k2"])),
        }

    first = request()
    if draw(st.booleans()):  # the same request again and again: every column is one value
        return [dict(first) for _ in range(draw(st.integers(1, 6)))]
    return [first, *(request() for _ in range(draw(st.integers(0, 7))))]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches())
def test_every_bulk_enqueued_row_holds_what_its_request_asked(
    conn: Conn, batch: list[dict[str, Any]]
) -> None:
    """enqueue_many sends a column that is one value for the whole batch once, any other as an
    array (JobStore.insert_jobs): each job's row holds its own request's values either way, and a
    request whose unique key an earlier one of the batch holds is answered with that job's id.
    kills: bulk-common-value-from-the-ends, bulk-common-value-ignored"""
    with conn.transaction(force_rollback=True):
        tenants = [
            scalar(conn, "INSERT INTO tenants (slug, name) VALUES (%s, %s) RETURNING id", s, s)
            for s in ("tenant-a", "tenant-b")
        ]
        system = scalar(conn, "SELECT id FROM tenants WHERE slug = 'system'")
        requests = [
            JobRequest(
                r["task"],
                {"position": position},
                queue=r["queue"],
                delay=r["delay"],
                run_at=r["run_at"],
                priority=r["priority"],
                max_attempts=r["max_attempts"],
                unique_key=r["unique_key"],
                tenant_id=None if r["tenant"] is None else tenants[r["tenant"]],
                timeout=r["timeout"],
            )
            for position, r in enumerate(batch)
        ]
        ids = enqueue_many(conn, requests)
        holders: dict[tuple[int, str], int] = {}
        for position, (request, job_id) in enumerate(zip(requests, ids, strict=True)):
            tenant = system if request.tenant_id is None else request.tenant_id
            if request.unique_key is not None:
                holder = holders.setdefault((tenant, request.unique_key), position)
                if holder != position:
                    assert job_id == ids[holder]
                    continue
            row = job_row(conn, job_id)
            assert row["payload"] == {"position": position}
            assert row["tenant_id"] == tenant
            assert row["task"] == request.task
            assert row["queue"] == (request.queue or DEFAULT_QUEUE)  # the two tasks name none
            assert row["priority"] == request.priority
            assert row["max_attempts"] == (request.max_attempts or DEFAULT_MAX_ATTEMPTS)
            assert row["timeout_seconds"] == request.timeout
            assert row["unique_key"] == request.unique_key
            if request.run_at is not None:
                assert row["available_at"] == request.run_at
            else:
                waits = (row["available_at"] - row["created_at"]).total_seconds()
                assert waits == (request.delay or 0.0)
        assert scalar(conn, "SELECT count(*) FROM jobs") == len(requests) - (
            sum(1 for r in requests if r.unique_key is not None) - len(holders)
        )
