"""Fenced results, lease renewal, the sweeper and release at shutdown, checked in the rows.

Each fence test changes one conjunct of the fence at a time (the attempt, or the owner), so a
fence with either half removed lets a stale write through and fails the test; each says which
mutant of ``make mutants`` it kills.
"""

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from jobqueue import JobStore, RetryPolicy, TaskRegistry, enqueue
from jobqueue.execution import run_job
from jobqueue.store import AttemptResult, ClaimedJob
from tests.support.db import attempt_rows, job_row, scalar
from tests.support.processes import wait_until

pytestmark = pytest.mark.pooled  # also through PgBouncer (tests/conftest.py)

Conn = psycopg.Connection[Any]
FENCED = ("state", "attempt", "locked_by", "lease_expires_at", "available_at", "last_error")


def claimed(job_id: int, attempt: int) -> ClaimedJob:
    moment = datetime(2026, 11, 30, tzinfo=UTC)
    return ClaimedJob(job_id, 1, "default", "noop", {}, 0, attempt, 5, moment, moment)


def success(job_id: int, attempt: int = 1, duration: float = 0.01) -> AttemptResult:
    return AttemptResult(claimed(job_id, attempt), "succeeded", None, None, 0.0, duration)


def failure(job_id: int, attempt: int = 1, outcome: str = "failed") -> AttemptResult:
    return AttemptResult(
        claimed(job_id, attempt), outcome, "OSError: down", "Traceback...", 60.0, 0.02
    )


def fenced_columns(conn: Conn, job_id: int) -> tuple[Any, ...]:
    row = job_row(conn, job_id)
    return tuple(row[column] for column in FENCED)


def stats(conn: Conn) -> dict[str, float]:
    """Every counter of job_stats_minute, summed over its rows."""
    row = conn.execute(
        "SELECT coalesce(sum(succeeded), 0), coalesce(sum(failed), 0), coalesce(sum(dead), 0),"
        " coalesce(sum(released), 0), coalesce(sum(runtime_sum), 0),"
        " coalesce(max(runtime_max), 0) FROM job_stats_minute"
    ).fetchone()
    assert row is not None
    names = ("succeeded", "failed", "dead", "released", "runtime_sum", "runtime_max")
    return dict(zip(names, (float(value) for value in row), strict=True))


def expire(conn: Conn, job_id: int) -> None:
    conn.execute(
        "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id = %s", (job_id,)
    )


# -- writing results ---------------------------------------------------------------------------


def test_finish_writes_the_result_one_attempt_row_and_its_count(conn: Conn) -> None:
    store = JobStore(conn)
    job_id = enqueue(conn, "noop")
    conn.execute(
        "UPDATE jobs SET available_at = now() - interval '3 seconds' WHERE id = %s", (job_id,)
    )
    store.claim("default", 1, "w1", 30)
    written = store.finish([success(job_id, duration=0.25)], "w1")
    assert {key: (w.state, w.how) for key, w in written.items()} == {
        (job_id, 1): ("succeeded", "written")
    }
    row = job_row(conn, job_id)
    assert (row["state"], row["locked_by"], row["lease_expires_at"]) == ("succeeded", None, None)
    assert row["finished_at"] is not None
    [attempt] = attempt_rows(conn, job_id)
    assert (attempt["attempt"], attempt["worker"], attempt["outcome"]) == (1, "w1", "succeeded")
    assert stats(conn) == {
        "succeeded": 1, "failed": 0, "dead": 0, "released": 0, "runtime_sum": 0.25,
        "runtime_max": 0.25,
    }  # fmt: skip
    wait = scalar(conn, "SELECT wait_sum FROM job_stats_minute")
    assert 3 <= wait < 13  # claimed three seconds after it became visible (database time)
    assert scalar(conn, "SELECT minute = date_trunc('minute', %s::timestamptz) FROM"
                  " job_stats_minute", attempt["finished_at"])  # fmt: skip


def test_a_batch_of_mixed_results_is_written_whole(conn: Conn) -> None:
    """The batch goes as binary arrays, one type each: a whole-number delay or run time beside
    fractional ones, text beside NULLs, all written as given. kills: finish-delays-as-given"""
    store = JobStore(conn)
    ids = [enqueue(conn, "noop") for _ in range(3)]
    store.claim("default", 3, "w1", 30)
    results = [
        AttemptResult(claimed(ids[0], 1), "succeeded", None, None, 0, 1),
        AttemptResult(claimed(ids[1], 1), "failed", "OSError: é", "Traceback ✓", 60, 0.5),
        AttemptResult(claimed(ids[2], 1), "failed", "", None, 1.5, 0.25),
    ]
    written = store.finish(results, "w1")
    assert {key: w.how for key, w in written.items()} == {(i, 1): "written" for i in ids}
    rows = conn.execute(
        "SELECT a.outcome, a.error, a.traceback, extract(epoch FROM a.duration)::float8,"
        " extract(epoch FROM j.available_at - a.finished_at)::int"
        " FROM job_attempts a JOIN jobs j ON j.id = a.job_id ORDER BY a.job_id"
    ).fetchall()
    assert [row[:4] for row in rows] == [
        ("succeeded", None, None, 1.0),
        ("failed", "OSError: é", "Traceback ✓", 0.5),
        ("failed", "", None, 0.25),
    ]
    assert [row[4] for row in rows[1:]] == [60, 2]  # retried after the delays given (1.5 s: 2)


def test_the_retry_schedule_grows_and_caps_through_the_real_path(conn: Conn) -> None:
    """A task that always fails, run by run_job and written by job_finish: after each attempt,
    jobs.available_at minus that attempt's finished_at is exactly the policy's ceiling.
    kills: backoff-no-growth, backoff-no-cap, finish-retry-delay-ignored"""
    tasks = TaskRegistry()
    policy = RetryPolicy(
        max_attempts=8, base_seconds=10, factor=2, cap_seconds=300, rng=lambda: 1.0
    )

    @tasks.task("broken", retry=policy)
    def broken() -> None:
        raise ConnectionError("still down")

    store = JobStore(conn)
    job_id = enqueue(conn, "broken", tasks=tasks)
    delays = []
    for _ in range(7):
        conn.execute("UPDATE jobs SET available_at = now() WHERE id = %s", (job_id,))
        [job] = store.claim("default", 1, "w1", 30)
        result = run_job(job, tasks, "w1", lambda: None)  # type: ignore[arg-type, return-value]
        assert store.finish([result], "w1")[job.id, job.attempt].state == "available"
        delays.append(
            scalar(
                conn,
                "SELECT extract(epoch FROM j.available_at - a.finished_at)::float8 FROM jobs j"
                " JOIN job_attempts a ON a.job_id = j.id AND a.attempt = j.attempt"
                " WHERE j.id = %s",
                job_id,
            )
        )
    assert delays == [10, 20, 40, 80, 160, 300, 300]
    conn.execute("UPDATE jobs SET available_at = now() WHERE id = %s", (job_id,))
    [job] = store.claim("default", 1, "w1", 30)
    result = run_job(job, tasks, "w1", lambda: None)  # type: ignore[arg-type, return-value]
    assert store.finish([result], "w1")[job.id, 8].state == "dead"
    assert job_row(conn, job_id)["last_error"] == "ConnectionError: still down"
    assert stats(conn)["failed"] == 7 and stats(conn)["dead"] == 1


def test_permanent_failure_dies_with_attempts_left(conn: Conn) -> None:
    store = JobStore(conn)
    job_id = enqueue(conn, "noop", max_attempts=5)
    store.claim("default", 1, "w1", 30)
    assert store.finish([failure(job_id, outcome="dead")], "w1")[job_id, 1].state == "dead"
    assert stats(conn)["dead"] == 1


def test_a_result_whose_reply_was_lost_is_known_when_sent_again_and_counted_once(
    conn: Conn,
) -> None:
    """The completer's retry after a commit whose reply was lost: the same batch again."""
    store = JobStore(conn)
    job_id = enqueue(conn, "noop")
    store.claim("default", 1, "w1", 30)
    assert store.finish([success(job_id)], "w1")[job_id, 1].how == "written"
    again = store.finish([success(job_id)], "w1")[job_id, 1]
    assert (again.state, again.how) == ("succeeded", "written_before")
    assert len(attempt_rows(conn, job_id)) == 1
    assert stats(conn)["succeeded"] == 1


# -- the fence, one conjunct at a time ---------------------------------------------------------


def stale_attempt(conn: Conn, store: JobStore) -> int:
    """w1 held attempt 1; its lease expired, the sweeper returned the job and w1 claimed it
    again: the row is (attempt 2, w1). Only the attempt tells w1's attempt-1 writes apart."""
    job_id = enqueue(conn, "noop")
    store.claim("default", 1, "w1", 30)
    expire(conn, job_id)
    assert [job.id for job in store.rescue_expired()] == [job_id]
    [again] = store.claim("default", 1, "w1", 30)
    assert (again.id, again.attempt) == (job_id, 2)
    return job_id


def stale_owner(conn: Conn, store: JobStore) -> int:
    """w1 claimed attempt 1 and gave it back unstarted (attempt back to 0); w2 claimed it: the
    row is (attempt 1, w2). Only the owner tells w1's attempt-1 writes apart."""
    job_id = enqueue(conn, "noop")
    store.claim("default", 1, "w1", 30)
    assert store.release([(job_id, 1, False, 0.0)], "w1") == []
    [again] = store.claim("default", 1, "w2", 30)
    assert (again.id, again.attempt) == (job_id, 1)
    return job_id


STALE_WRITES: dict[str, Callable[[JobStore, int], object]] = {
    "finish": lambda store, job_id: store.finish([success(job_id, attempt=1)], "w1"),
    "fail": lambda store, job_id: store.finish([failure(job_id, attempt=1)], "w1"),
    "release": lambda store, job_id: store.release([(job_id, 1, True, 1.0)], "w1"),
    "extend": lambda store, job_id: store.extend_leases([(job_id, 1)], "w1", 3600),
}


@pytest.mark.parametrize("write", sorted(STALE_WRITES))
@pytest.mark.parametrize("setup", [stale_attempt, stale_owner], ids=["attempt", "owner"])
def test_a_stale_write_changes_nothing(
    conn: Conn, setup: Callable[[Conn, JobStore], int], write: str
) -> None:
    """kills: finish-fence-no-attempt, finish-fence-no-owner, release-fence-no-attempt,
    release-fence-no-owner, extend-fence-no-attempt, extend-fence-no-owner"""
    store = JobStore(conn)
    job_id = setup(conn, store)
    before = fenced_columns(conn, job_id)
    attempts_before = attempt_rows(conn, job_id)
    stats_before = stats(conn)
    answer = STALE_WRITES[write](store, job_id)
    assert fenced_columns(conn, job_id) == before
    assert attempt_rows(conn, job_id) == attempts_before
    assert stats(conn) == stats_before
    if write in ("finish", "fail"):
        assert {key: fate.how for key, fate in answer.items()} == {(job_id, 1): "lost"}  # type: ignore[attr-defined]
    elif write == "release":
        assert answer == []
    else:
        assert answer == {(job_id, 1): "lost"}


def test_the_current_owner_still_writes_after_a_stale_write(conn: Conn) -> None:
    store = JobStore(conn)
    job_id = stale_owner(conn, store)
    store.finish([failure(job_id, attempt=1)], "w1")
    assert store.finish([success(job_id, attempt=1)], "w2")[job_id, 1].how == "written"
    assert [(a["attempt"], a["worker"], a["outcome"]) for a in attempt_rows(conn, job_id)] == [
        (1, "w2", "succeeded")
    ]


# -- the heartbeat -------------------------------------------------------------------------------


def test_the_heartbeat_says_what_became_of_each_job_it_held(conn: Conn) -> None:
    """Only a job whose attempt or owner really changed is 'lost': one finished or given back
    by this worker a moment before is 'done' (it used to be reported lost, thousands of times
    in a clean run). kills: extend-lost-when-finished"""
    store = JobStore(conn)
    ids = [enqueue(conn, "noop") for _ in range(5)]
    held, finished, rescued, taken, given_back = ids
    store.claim("default", 5, "w1", 5)
    store.finish([success(finished)], "w1")
    expire(conn, rescued)
    store.rescue_expired()
    conn.execute("UPDATE jobs SET locked_by = 'w2' WHERE id = %s", (taken,))
    store.release([(given_back, 1, False, 0.0)], "w1")
    fates = store.extend_leases([(job_id, 1) for job_id in ids], "w1", 120)
    assert fates == {
        (held, 1): "extended",
        (finished, 1): "done",
        (rescued, 1): "lost",
        (taken, 1): "lost",
        (given_back, 1): "done",
    }
    remaining = scalar(
        conn, "SELECT extract(epoch FROM lease_expires_at - now()) FROM jobs WHERE id = %s", held
    )
    assert 119 < float(remaining) <= 120
    assert job_row(conn, taken)["lease_expires_at"] < job_row(conn, held)["lease_expires_at"]


def test_the_heartbeat_skips_a_row_another_transaction_holds(database_url: str) -> None:
    """The completer holds a row while it moves it to its finished partition; a heartbeat that
    waited for it got 40001 ("already moved to another partition") when the completer
    committed, and again at every retry while the completer kept finishing. It skips the row:
    the others are extended at once, the held one is answered 'done' and keeps its lease.
    kills: extend-waits-for-held-rows"""
    with (
        psycopg.connect(database_url, autocommit=True) as setup,
        psycopg.connect(database_url) as completer,
    ):
        store = JobStore(setup)
        first, second, third = (enqueue(setup, "noop") for _ in range(3))
        store.claim("default", 3, "w1", 30)
        completer.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (second,))
        before = job_row(setup, second)["lease_expires_at"]
        setup.execute("SET lock_timeout = '2s'")  # waiting would end in an error, not a hang
        fates = store.extend_leases([(first, 1), (second, 1), (third, 1)], "w1", 120)
        assert fates == {(first, 1): "extended", (second, 1): "done", (third, 1): "extended"}
        completer.rollback()
        assert job_row(setup, second)["lease_expires_at"] == before
        assert job_row(setup, first)["lease_expires_at"] > before


# -- locking order -------------------------------------------------------------------------------


@pytest.mark.not_pooled("waits on a server backend by its pid")
@pytest.mark.parametrize("write", ["finish", "release"])
def test_multi_row_writes_lock_their_rows_in_id_order(database_url: str, write: str) -> None:
    """A write given ids 3, 1, 2 while another transaction holds row 2 must have locked row 1
    and not row 3: rows are taken in id order, so two such writes can never deadlock (the
    heartbeat never waits: test_the_heartbeat_skips_a_row_another_transaction_holds).
    kills: finish-lock-unordered, release-lock-unordered"""
    with (
        psycopg.connect(database_url, autocommit=True) as setup,
        psycopg.connect(database_url, autocommit=True) as writer,
        psycopg.connect(database_url) as blocker,
        psycopg.connect(database_url) as probe,
    ):
        store = JobStore(setup)
        first, second, third = (enqueue(setup, "noop") for _ in range(3))
        store.claim("default", 3, "w1", 30)
        blocker.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (second,))
        writer_pid = writer.info.backend_pid
        order = [third, first, second]
        calls: dict[str, Callable[[JobStore], object]] = {
            "finish": lambda s: s.finish([success(job_id) for job_id in order], "w1"),
            "release": lambda s: s.release([(job_id, 1, True, 0.1) for job_id in order], "w1"),
        }
        done = threading.Event()
        thread = threading.Thread(target=lambda: (calls[write](JobStore(writer)), done.set()))
        thread.start()
        wait_until(
            lambda: scalar(
                setup,
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                writer_pid,
            ),
            timeout=10,
            message="the write never waited for the blocked row",
        )
        probe.execute("SET lock_timeout = '100ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            probe.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (first,))
        probe.rollback()
        probe.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE NOWAIT", (third,))
        probe.rollback()
        assert not done.is_set()
        blocker.rollback()
        thread.join(10)
        assert done.is_set()


# -- the sweeper ---------------------------------------------------------------------------------


def test_the_sweeper_rescues_past_the_lease_only_and_counts_each_once(conn: Conn) -> None:
    """Boundary pairs: a lease one second past and one second from expiry; the last attempt
    and one before it; terminal rows untouched. kills: rescue-wrong-comparison"""
    store = JobStore(conn)
    retry = enqueue(conn, "noop")
    exhausted = enqueue(conn, "noop", max_attempts=1)
    healthy = enqueue(conn, "noop")
    done = enqueue(conn, "noop")
    store.claim("default", 4, "w1", 30)
    store.finish([success(done)], "w1")
    conn.execute(
        "UPDATE jobs SET lease_expires_at = now() - interval '1 second' WHERE id IN (%s, %s)",
        (retry, exhausted),
    )
    conn.execute(
        "UPDATE jobs SET lease_expires_at = now() + interval '1 second' WHERE id = %s", (healthy,)
    )
    finished_before = job_row(conn, done)
    rescued = {job.id: (job.state, job.worker) for job in store.rescue_expired()}
    assert rescued == {retry: ("available", "w1"), exhausted: ("dead", "w1")}
    assert store.rescue_expired() == []
    assert job_row(conn, healthy)["state"] == "running"
    assert job_row(conn, done) == finished_before
    row = job_row(conn, retry)
    assert (row["state"], row["locked_by"], row["attempt"]) == ("available", None, 1)
    assert row["last_error"].startswith("LeaseExpired: worker w1")
    [attempt] = attempt_rows(conn, retry)
    assert (attempt["outcome"], attempt["worker"]) == ("lease_expired", "w1")
    assert job_row(conn, exhausted)["finished_at"] is not None
    assert (stats(conn)["failed"], stats(conn)["dead"], stats(conn)["succeeded"]) == (1, 1, 1)


@pytest.mark.not_pooled("waits on a server backend by its pid")
def test_two_rescuers_at_once_rescue_each_job_once(database_url: str) -> None:
    """Every process may rescue: SKIP LOCKED gives each expired row to one of them. The second
    rescuer skips the rows the first holds, then waits for the first's count in the stats row
    (both add to the same minute), and each job ends with one rescue, counted once."""
    with (
        psycopg.connect(database_url, autocommit=True) as setup,
        psycopg.connect(database_url) as first,
        psycopg.connect(database_url, autocommit=True) as second,
    ):
        ids = [enqueue(setup, "noop") for _ in range(200)]
        JobStore(setup).claim("default", 200, "w1", 30)
        setup.execute("UPDATE jobs SET lease_expires_at = now() - interval '1 second'")
        one = JobStore(first).rescue_expired(limit=120)  # holds its rows until it commits
        two: list[Any] = []
        thread = threading.Thread(target=lambda: two.extend(JobStore(second).rescue_expired()))
        thread.start()
        wait_until(
            lambda: scalar(
                setup,
                "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s",
                second.info.backend_pid,
            ),
            timeout=10,
        )
        first.commit()
        thread.join(10)
        assert (len(one), len(two)) == (120, 80)
        assert sorted(job.id for job in one + two) == sorted(ids)
        assert stats(setup)["failed"] == 200
        assert scalar(setup, "SELECT count(*) FROM job_attempts") == 200


# -- release at shutdown -------------------------------------------------------------------------


def test_release_gives_back_unstarted_jobs_whole_and_started_ones_without_cost(
    conn: Conn,
) -> None:
    store = JobStore(conn)
    unstarted, started = enqueue(conn, "noop"), enqueue(conn, "noop")
    place_in_line = job_row(conn, unstarted)["available_at"]
    store.claim("default", 2, "w1", 30)
    assert store.release([(unstarted, 1, False, 0.0), (started, 1, True, 4.5)], "w1") == [started]
    first = job_row(conn, unstarted)
    assert (first["state"], first["attempt"], first["max_attempts"]) == ("available", 0, 5)
    assert first["available_at"] == place_in_line
    assert attempt_rows(conn, unstarted) == []
    second = job_row(conn, started)
    assert (second["state"], second["attempt"], second["max_attempts"]) == ("available", 1, 6)
    [attempt] = attempt_rows(conn, started)
    assert attempt["outcome"] == "released"
    assert attempt["duration"].total_seconds() == 4.5
    assert stats(conn)["released"] == 1
