"""Leadership as a lease row: elected, renewed, taken over once expired, and every leader-only
write fenced by the term, checked in the rows.

Each fence case differs from a valid write in one conjunct only (the term, the holder, the
expiry), so dropping any one of them lets a stale leader's write through.
"""

from typing import Any

import psycopg
import pytest

from jobqueue import JobStore, enqueue
from jobqueue.store import Term
from tests.support.db import scalar

pytestmark = pytest.mark.pooled  # also through PgBouncer (tests/conftest.py)

Conn = psycopg.Connection[Any]
DUTY = "maintenance"


def expire_lease(conn: Conn) -> None:
    conn.execute(
        "UPDATE leaders SET expires_at = now() - interval '1 second' WHERE name = %s", (DUTY,)
    )


def old_finished_job(conn: Conn) -> int:
    """A job finished two days ago (prunable), beside a waiting one (for the depth sample)."""
    enqueue(conn, "noop")
    job_id = enqueue(conn, "noop")
    conn.execute(
        "UPDATE jobs SET state = 'succeeded', finished_at = now() - interval '2 days'"
        " WHERE id = %s",
        (job_id,),
    )
    return job_id


def leader_writes(store: JobStore, term: Term) -> tuple[int, int, int]:
    """Every leader-only write once; returns (finished jobs pruned, depth rows sampled, scheduled
    jobs enqueued) with one schedule due."""
    store.connection.execute(
        "INSERT INTO schedules (name, queue, tenant_id, every)"
        " SELECT 'noop', 'default', id, interval '1 hour' FROM tenants WHERE slug = 'system'"
    )
    pruned = store.prune(term, keep_succeeded_seconds=3600, keep_dead_seconds=3600, limit=100)
    sampled = store.sample_depth(term)
    store.prune_stats(term, keep_seconds=3600)
    scheduled = store.enqueue_due_schedules(term)
    return pruned, sampled, len(scheduled)


def test_one_holder_per_term_and_renewal_keeps_the_term(conn: Conn) -> None:
    store = JobStore(conn)
    first = store.elect(DUTY, "a", 30)
    assert first == Term(DUTY, "a", 1)
    assert store.elect(DUTY, "b", 30) is None  # a's lease lasts
    assert store.elect(DUTY, "a", 30) == first  # a bids again: the same term, renewed
    assert store.renew(first, 30) is True
    row = store.leader(DUTY)
    assert row is not None and (row["holder"], row["term"], row["live"]) == ("a", 1, True)


def test_an_expired_lease_is_taken_over_in_a_new_term_and_the_old_leader_steps_down(
    conn: Conn,
) -> None:
    """A leader frozen past its lease wakes up: its renewal fails, so it must step down."""
    store = JobStore(conn)
    first = store.elect(DUTY, "a", 30)
    assert first is not None
    expire_lease(conn)
    second = store.elect(DUTY, "b", 30)
    assert second == Term(DUTY, "b", 2)
    assert store.renew(first, 30) is False
    row = store.leader(DUTY)
    assert row is not None and (row["holder"], row["term"]) == ("b", 2)


def test_the_same_holder_after_expiry_gets_a_new_term(conn: Conn) -> None:
    store = JobStore(conn)
    first = store.elect(DUTY, "a", 30)
    expire_lease(conn)
    assert store.elect(DUTY, "a", 30) == Term(DUTY, "a", 2)
    assert first is not None and store.renew(first, 30) is False


def test_a_lapsed_term_is_over_even_when_nobody_took_over(conn: Conn) -> None:
    """A leader frozen past its lease cannot renew the term it held, even if no one took its
    place: it is elected again in a new term, so a term number counts one unbroken stretch of
    leadership. kills: leader-renew-after-expiry"""
    store = JobStore(conn)
    first = store.elect(DUTY, "a", 30)
    assert first is not None
    expire_lease(conn)
    assert store.renew(first, 30) is False
    assert store.elect(DUTY, "a", 30) == Term(DUTY, "a", 2)


def test_resigning_lets_another_lead_at_once(conn: Conn) -> None:
    store = JobStore(conn)
    first = store.elect(DUTY, "a", 30)
    assert first is not None
    store.resign(first)
    assert store.elect(DUTY, "b", 30) == Term(DUTY, "b", 2)


def test_the_current_leader_writes(conn: Conn) -> None:
    store = JobStore(conn)
    old_finished_job(conn)
    term = store.elect(DUTY, "a", 30)
    assert term is not None
    assert leader_writes(store, term) == (1, 1, 1)
    assert scalar(conn, "SELECT count(*) FROM queue_depth_minute") == 1


@pytest.mark.parametrize("stale", ["older-term", "other-holder", "expired"])
def test_a_stale_leader_writes_nothing(conn: Conn, stale: str) -> None:
    """older-term: a re-elected a in term 2 while its term-1 self still writes.
    other-holder: b holds term 2; a claims term 2 too. expired: a's term 1 lapsed, nobody
    took over yet. kills: leader-fence-no-term, leader-fence-no-holder, leader-fence-no-expiry"""
    store = JobStore(conn)
    job_id = old_finished_job(conn)
    first = store.elect(DUTY, "a", 30)
    assert first is not None
    expire_lease(conn)
    if stale == "older-term":
        assert store.elect(DUTY, "a", 30) == Term(DUTY, "a", 2)
        writer = first
    elif stale == "other-holder":
        assert store.elect(DUTY, "b", 30) == Term(DUTY, "b", 2)
        writer = Term(DUTY, "a", 2)
    else:
        writer = first
    assert leader_writes(store, writer) == (0, 0, 0)
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE id = %s", job_id) == 1
    assert scalar(conn, "SELECT count(*) FROM queue_depth_minute") == 0


def test_a_takeover_waits_for_the_leaders_write_in_flight(database_url: str) -> None:
    """The fence holds the leader's row while its write runs: a takeover cannot slip in
    between the check and the write."""
    with (
        psycopg.connect(database_url, autocommit=True) as setup,
        psycopg.connect(database_url) as leader,
        psycopg.connect(database_url) as rival,
    ):
        term = JobStore(setup).elect(DUTY, "a", 30)
        assert term is not None
        JobStore(leader).sample_depth(term)  # in an open transaction: the lease row is held
        rival.execute("SET lock_timeout = '200ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            JobStore(rival).elect(DUTY, "b", 30)
        rival.rollback()
        leader.commit()
        expire_lease(setup)
        assert JobStore(rival).elect(DUTY, "b", 30) == Term(DUTY, "b", 2)
