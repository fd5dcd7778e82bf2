"""The table layout (migration 0017_table_layout): live work alone in jobs_live, finished jobs in
partitions that retention drops whole, the dedup keys that outlive a job, requeue back to live."""

import threading
from typing import Any

import psycopg
import pytest

from jobqueue import JobRequest, JobStore, enqueue, enqueue_many
from jobqueue.store import AttemptResult, ClaimedJob, Term
from tests.support.db import scalar
from tests.support.processes import wait_until

Conn = psycopg.Connection[Any]
HOUR = 3600.0


def home(conn: Conn, job_id: int) -> str:
    """The partition that holds a job's row."""
    return str(scalar(conn, "SELECT tableoid::regclass::text FROM jobs WHERE id = %s", job_id))


def result(job: ClaimedJob, outcome: str) -> AttemptResult:
    return AttemptResult(job, outcome, None if outcome == "succeeded" else "E: x", None, 0.0, 0.01)


def run(store: JobStore, outcomes: dict[int, str]) -> None:
    """Claim the waiting jobs as worker w1 and finish each with its outcome."""
    claimed = store.claim("default", 100, "w1", 30)
    assert {job.id for job in claimed} == set(outcomes)
    written = store.finish([result(job, outcomes[job.id]) for job in claimed], "w1")
    assert {fate.how for fate in written.values()} == {"written"}


def test_finished_jobs_leave_jobs_live_for_their_partitions(conn: Conn) -> None:
    """kills: finished rows left in the claim's table"""
    store = JobStore(conn)
    succeeded, dead, retried, waiting, cancelled = (enqueue(conn, "noop") for _ in range(5))
    store.cancel(cancelled)
    conn.execute("UPDATE jobs SET available_at = now() + interval '1 hour' WHERE id = %s",
                 (waiting,))  # fmt: skip
    run(store, {succeeded: "succeeded", dead: "dead", retried: "failed"})
    assert home(conn, dead) == "jobs_dead"
    assert home(conn, retried) == home(conn, waiting) == "jobs_live"
    period = scalar(conn, "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD\"t\"HH24')")
    assert home(conn, succeeded) == home(conn, cancelled) == f"jobs_done_{period}0000"
    live = {row[0]: row[1] for row in conn.execute("SELECT id, state FROM ONLY jobs_live")}
    assert live == {retried: "available", waiting: "available"}
    # the attempts sit in the period's attempt partition, the dead job's among them
    attempts = "SELECT tableoid::regclass::text FROM job_attempts WHERE job_id = %s"
    assert scalar(conn, attempts, dead) == f"job_attempts_{period}0000"


def test_the_finish_reads_and_writes_only_jobs_live(conn: Conn) -> None:
    """kills: the answer for results not written folded back into job_finish"""
    store = JobStore(conn)
    ids = enqueue_many(conn, [JobRequest("noop")] * 3)
    claimed = store.claim("default", 3, "w1", 30)
    sql = store._queries["job_finish"].sql
    params = {"ids": ids, "attempts": [1] * 3, "outcomes": ["succeeded"] * 3,
              "errors": [None] * 3, "tracebacks": [None] * 3, "retry_delays": [0.0] * 3,
              "durations": [0.1] * 3, "trace_ids": [None] * 3, "worker": "w1"}  # fmt: skip
    plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params, prepare=False).fetchone()[0]  # type: ignore[index, operator]
    nodes, stack = [], [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.get("Plans", []))
    # nothing of the history is read: each of its partitions costs planning and start-up,
    # whether it has rows or not (the answer for results that were not written, which looks
    # a job up wherever it is, is job_result_fates, run for those only)
    read = {node.get("Relation Name") for node in nodes if "Scan" in node["Node Type"]} - {None}
    history = {name for name in read if name.startswith(("jobs_done", "jobs_dead", "job_attempts"))}
    assert history == set(), history
    # the locking and the update: jobs_live alone
    locked = [node for node in nodes if node["Node Type"] == "LockRows"]
    updated = [node for node in nodes if node["Node Type"] == "ModifyTable"
               and node.get("Relation Name") == "jobs"]  # fmt: skip
    for top in locked + updated:
        below, relations = [top], set()
        while below:
            node = below.pop()
            if node.get("Node Type") == "CTE Scan":
                continue
            relations.add(node.get("Relation Name"))
            below.extend(node.get("Plans", []))
        assert relations - {None} <= {"jobs", "jobs_live"}, relations
    assert len(claimed) == 3


def stale_partition(conn: Conn, hours_ago: float) -> tuple[str, str]:
    """The names of the jobs_done and job_attempts partitions of a period some hours ago."""
    suffix = scalar(
        conn,
        "SELECT to_char(date_trunc('hour', now() - make_interval(secs => %s)) AT TIME ZONE 'UTC',"
        " 'YYYYMMDD\"t\"HH24MISS')",
        hours_ago * HOUR,
    )
    return f"jobs_done_{suffix}", f"job_attempts_{suffix}"


def finished_at(conn: Conn, job_id: int, state: str, hours_ago: float) -> None:
    """Finish a job (and write its attempt) some hours ago, as the engine would have."""
    conn.execute(
        "UPDATE jobs SET state = %s, attempt = 1, finished_at = now() - make_interval(secs => %s)"
        " WHERE id = %s",
        (state, hours_ago * HOUR, job_id),
    )
    conn.execute(
        "INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome,"
        " duration) VALUES (%s, 1, 'w1', now(), now() - make_interval(secs => %s), %s, '1s')",
        (job_id, hours_ago * HOUR, "succeeded" if state == "succeeded" else "failed"),
    )


def test_retention_drops_an_expired_partition_whole_and_keeps_the_rest(conn: Conn) -> None:
    """kills: a partition dropped before all it holds expired; attempts of a job that outlives
    its attempts' partition dropped with it; a stale leader dropping partitions"""
    store = JobStore(conn)
    # the partitions of the last day, as a leader running for a day made them
    conn.execute("SELECT history_partitions(3600, 86400, now() - interval '1 day', now())")
    old, old_too, recent, dead = (enqueue(conn, "noop") for _ in range(4))
    finished_at(conn, old, "succeeded", 20.5)
    finished_at(conn, old_too, "cancelled", 20.5)
    finished_at(conn, recent, "succeeded", 1)
    finished_at(conn, dead, "dead", 20.5)  # dead: kept 14 days, its attempt with it
    old_jobs, old_attempts = stale_partition(conn, 20.5)
    recent_jobs, _ = stale_partition(conn, 1)
    assert home(conn, old) == home(conn, old_too) == old_jobs

    term = store.elect("maintenance", "w1", 30)
    assert term is not None
    stale = Term("maintenance", "w1", term.number - 1)
    assert store.history_partitions(stale, HOUR, 12 * HOUR, 2 * HOUR) == []  # fenced out
    assert scalar(conn, "SELECT to_regclass(%s) IS NOT NULL", old_jobs)

    done = store.history_partitions(term, HOUR, 12 * HOUR, 2 * HOUR)
    assert ("dropped", old_jobs) in done and ("dropped", old_attempts) in done
    assert ("dropped", recent_jobs) not in done
    assert scalar(conn, "SELECT to_regclass(%s) IS NULL", old_jobs)
    remaining = {row[0] for row in conn.execute("SELECT id FROM jobs")}
    assert remaining == {recent, dead}
    with_attempts = {row[0] for row in conn.execute("SELECT job_id FROM job_attempts")}
    assert with_attempts == {recent, dead}
    assert (
        scalar(conn, "SELECT tableoid::regclass::text FROM job_attempts WHERE job_id = %s", dead)
        == "job_attempts_default"
    )
    # every partition left ends after the retention horizon; those ahead exist
    oldest_end = scalar(
        conn,
        "SELECT min(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \\(''([^'']+)''\\)')"
        "::timestamptz) > now() - interval '12 hours' FROM pg_inherits i"
        " JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'jobs_done'::regclass"
        " AND c.relname <> 'jobs_done_default'",
    )
    assert oldest_end is True
    _, ahead = stale_partition(conn, -1)
    assert scalar(conn, "SELECT to_regclass(%s) IS NOT NULL", ahead)
    # and the dead job's attempts go when it does, by the delete-based prune
    assert store.prune(term, 12 * HOUR, 0.0, 100) == 1
    assert scalar(conn, "SELECT count(*) FROM job_attempts WHERE job_id = %s", dead) == 0


def test_an_attempts_partition_waits_for_its_jobs_partition(conn: Conn, database_url: str) -> None:
    """A jobs partition too busy to drop this round keeps its attempts' partition too: dropped
    alone, every attempt of the period (its job still there) was copied to the default.
    kills: attempts partitions dropped without their jobs' partition (0019_history_pairs)"""
    store = JobStore(conn)
    conn.execute("SELECT history_partitions(3600, 86400, now() - interval '1 day', now())")
    old = enqueue(conn, "noop")
    finished_at(conn, old, "succeeded", 20.5)
    old_jobs, old_attempts = stale_partition(conn, 20.5)
    term = store.elect("maintenance", "w1", 30)
    assert term is not None
    with psycopg.connect(database_url) as reader:
        reader.execute(f"SELECT count(*) FROM {old_jobs}")  # holds a lock the drop must wait for
        done = store.history_partitions(term, HOUR, 12 * HOUR, 2 * HOUR)
        assert ("dropped", old_jobs) not in done and ("dropped", old_attempts) not in done
        assert scalar(conn, "SELECT count(*) FROM job_attempts_default") == 0
    done = store.history_partitions(term, HOUR, 12 * HOUR, 2 * HOUR)
    assert ("dropped", old_jobs) in done and ("dropped", old_attempts) in done
    assert scalar(conn, "SELECT count(*) FROM job_attempts_default") == 0


def attempt_at(conn: Conn, job_id: int, number: int, outcome: str, hours_ago: float) -> None:
    conn.execute(
        "INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome,"
        " duration) VALUES (%s, %s, 'w1', now(), now() - make_interval(secs => %s), %s, '1s')",
        (job_id, number, hours_ago * HOUR, outcome),
    )


def test_an_attempt_copied_out_goes_when_its_jobs_partition_does(conn: Conn) -> None:
    """A retried job's first attempt outlives its period (the job finished a period later) and
    is copied to the default; when the job's partition goes, so does that attempt.
    kills: attempts copied out and left behind, waiting for the orphan sweep (0019)"""
    store = JobStore(conn)
    conn.execute("SELECT history_partitions(3600, 86400, now() - interval '1 day', now())")
    retried, dead = enqueue(conn, "noop"), enqueue(conn, "noop")
    conn.execute(
        "UPDATE jobs SET state = 'succeeded', attempt = 2,"
        " finished_at = now() - make_interval(secs => %s) WHERE id = %s",
        (20.5 * HOUR, retried),
    )
    attempt_at(conn, retried, 1, "failed", 22.5)
    attempt_at(conn, retried, 2, "succeeded", 20.5)
    finished_at(conn, dead, "dead", 22.5)
    first_jobs, first_attempts = stale_partition(conn, 22.5)
    term = store.elect("maintenance", "w1", 30)
    assert term is not None

    done = store.history_partitions(term, HOUR, 21.5 * HOUR, 2 * HOUR)
    assert ("dropped", first_jobs) in done and ("dropped", first_attempts) in done
    kept = "SELECT job_id, attempt FROM job_attempts_default ORDER BY 1, 2"
    assert conn.execute(kept).fetchall() == [(retried, 1), (dead, 1)]

    later_jobs, _ = stale_partition(conn, 20.5)
    done = store.history_partitions(term, HOUR, 12 * HOUR, 2 * HOUR)
    assert ("dropped", later_jobs) in done
    assert conn.execute(kept).fetchall() == [(dead, 1)]


def test_the_prune_sweeps_attempts_whose_job_is_gone_and_keeps_the_others(conn: Conn) -> None:
    """The safety net for attempts left in the default with no job (by an older version, a
    change of period, a tenant's jobs deleted): swept once older than both horizons; an old
    attempt whose job lives on stays.
    kills: no orphan sweep; a sweep that does not look for the job"""
    store = JobStore(conn)
    gone, requeued = enqueue(conn, "noop"), enqueue(conn, "noop")
    attempt_at(conn, gone, 1, "failed", 30)
    attempt_at(conn, requeued, 1, "failed", 30)
    conn.execute("DELETE FROM jobs WHERE id = %s", (gone,))
    term = store.elect("maintenance", "w1", 30)
    assert term is not None
    assert store.prune(term, 12 * HOUR, 24 * HOUR, 100) == 0  # no job deleted
    left = "SELECT job_id FROM job_attempts_default ORDER BY 1"
    assert [row[0] for row in conn.execute(left)] == [requeued]


def test_the_upkeep_reads_only_the_expired_periods_partitions(
    conn: Conn, database_url: str
) -> None:
    """What dropping a period costs does not grow with the history kept: the attempts kept are
    found in the period's own jobs partition, not by looking every job id up.
    kills: a copy-out that reads jobs_live, jobs_dead and every jobs_done partition (0019)"""
    store = JobStore(conn)
    conn.execute("SELECT history_partitions(3600, 86400, now() - interval '1 day', now())")
    old, recent, dead = (enqueue(conn, "noop") for _ in range(3))
    live = enqueue(conn, "noop")
    finished_at(conn, old, "succeeded", 20.5)
    finished_at(conn, recent, "succeeded", 1)
    finished_at(conn, dead, "dead", 20.5)
    old_jobs, _ = stale_partition(conn, 20.5)
    recent_jobs, recent_attempts = stale_partition(conn, 1)
    untouched = ["jobs_live", "jobs_dead", recent_jobs, recent_attempts]
    term = store.elect("maintenance", "w1", 30)
    assert term is not None

    def scans(reader: Conn) -> dict[str, int]:
        rows = reader.execute(
            "SELECT relname, coalesce(seq_scan, 0) + coalesce(idx_scan, 0)"
            " FROM pg_stat_user_tables WHERE relname = ANY(%s)",
            ([*untouched, "jobs_done_default"],),
        )
        return {name: count for name, count in rows}

    with psycopg.connect(database_url, autocommit=True) as reader:
        conn.execute("SELECT pg_stat_force_next_flush()")
        before = scans(reader)
        assert ("dropped", old_jobs) in store.history_partitions(term, HOUR, 12 * HOUR, 2 * HOUR)
        conn.execute("SELECT count(*) FROM jobs_done_default")  # a scan to see the flush by
        conn.execute("SELECT pg_stat_force_next_flush()")

        def flushed() -> dict[str, int] | None:
            now = scans(reader)
            return now if now["jobs_done_default"] > before["jobs_done_default"] else None

        after = wait_until(flushed)
    assert {name: after[name] - before[name] for name in untouched} == dict.fromkeys(untouched, 0)
    assert home(conn, live) == "jobs_live" and home(conn, dead) == "jobs_dead"
    assert scalar(conn, "SELECT count(*) FROM job_attempts WHERE job_id = %s", dead) == 1


def test_partition_upkeep_waits_for_the_writers_before_it_locks_a_partition(
    conn: Conn, database_url: str
) -> None:
    """The upkeep takes `jobs` first, as every writer does: while a writer's transaction is
    open it does nothing this round, rather than lock partitions the writer will need next
    while it waits on the writer (the deadlock a finish met 17 times in the soak).
    kills: partition DDL before the writers' lock (0019_history_pairs)"""
    store = JobStore(conn)
    job = enqueue(conn, "noop")
    term = store.elect("maintenance", "w1", 30)
    assert term is not None
    with psycopg.connect(database_url) as writer:
        writer.execute("UPDATE jobs SET priority = priority WHERE id = %s", (job,))
        assert store.history_partitions(term, HOUR, 12 * HOUR, 6 * HOUR) == []
    created = store.history_partitions(term, HOUR, 12 * HOUR, 6 * HOUR)
    assert ("created", stale_partition(conn, -5)[0]) in created


def test_partition_upkeep_goes_on_while_a_partition_of_jobs_is_vacuumed(
    conn: Conn, database_url: str
) -> None:
    """A vacuum or analyze of jobs_live or jobs_dead (SHARE UPDATE EXCLUSIVE, as autovacuum
    holds it) does not hold the upkeep up: waiting for it, the upkeep's lock request held every
    writer back for its 500 ms timeout, and then the round did nothing.
    kills: the writers' lock taken on jobs with its partitions (0019)"""
    store = JobStore(conn)
    term = store.elect("maintenance", "w1", 30)
    assert term is not None
    with psycopg.connect(database_url) as vacuum:
        vacuum.execute("LOCK TABLE jobs_dead IN SHARE UPDATE EXCLUSIVE MODE")
        created = store.history_partitions(term, HOUR, 12 * HOUR, 6 * HOUR)
        assert ("created", stale_partition(conn, -5)[0]) in created


def test_a_second_reminder_is_impossible_after_the_first_finished(conn: Conn) -> None:
    """kills: dedup keys that die with the job's row, or with its move between partitions"""
    reminder = {"cycle_id": 7, "reviewer_id": 3, "round": 1}
    (first,) = enqueue_many(conn, [JobRequest("hr.remind_reviewer", reminder, queue="mail")])
    store = JobStore(conn)
    claimed = store.claim("mail", 1, "w1", 30)
    store.finish([result(claimed[0], "succeeded")], "w1")
    assert home(conn, first).startswith("jobs_done_")
    with pytest.raises(psycopg.errors.UniqueViolation, match="jobs_remind_reviewer_key"):
        enqueue_many(conn, [JobRequest("hr.remind_reviewer", reminder, queue="mail")])
    conn.execute("DELETE FROM jobs WHERE id = %s", (first,))  # pruned: the key stays
    with pytest.raises(psycopg.errors.UniqueViolation, match="jobs_remind_reviewer_key"):
        enqueue(conn, "hr.remind_reviewer", reminder, queue="mail")
    # the next round is another reminder
    enqueue(conn, "hr.remind_reviewer", {**reminder, "round": 2}, queue="mail")
    assert scalar(conn, "SELECT count(*) FROM job_once_keys") == 2


def test_a_requeued_dead_job_moves_back_to_jobs_live_and_runs(conn: Conn) -> None:
    """kills: requeue that cannot move a row back across partitions"""
    store = JobStore(conn)
    job_id = enqueue(conn, "noop")
    run(store, {job_id: "dead"})
    assert home(conn, job_id) == "jobs_dead"
    assert store.requeue(job_id, 1) is True
    assert home(conn, job_id) == "jobs_live"
    run(store, {job_id: "succeeded"})
    assert home(conn, job_id).startswith("jobs_done_")
    attempts = "SELECT outcome FROM job_attempts WHERE job_id = %s ORDER BY attempt"
    outcomes = [row[0] for row in conn.execute(attempts, (job_id,))]
    assert outcomes == ["failed", "succeeded"]


def test_a_cancel_racing_the_finish_that_moves_the_row_is_answered_not_failed(
    conn: Conn, database_url: str
) -> None:
    """The cancel waits for the row while the finish moves it to jobs_done: PostgreSQL answers
    the cancel with 40001; it runs again and finds the job finished.
    kills: a cancel that fails with SerializationFailure"""
    job_id = enqueue(conn, "noop")
    (job,) = JobStore(conn).claim("default", 1, "w1", 30)
    answers: list[object] = []
    with psycopg.connect(database_url) as finisher:
        JobStore(finisher).finish([result(job, "succeeded")], "w1")  # moved, not committed

        def cancel() -> None:
            with psycopg.connect(database_url, autocommit=True) as canceller:
                try:
                    answers.append(JobStore(canceller).cancel(job_id))
                except psycopg.Error as error:
                    answers.append(error)

        thread = threading.Thread(target=cancel)
        thread.start()
        waiting = ("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                   " AND query LIKE '%%UPDATE jobs%%'")  # fmt: skip
        wait_until(lambda: scalar(conn, waiting) == 1)
        finisher.commit()
        thread.join(10)
    assert answers == [None]  # finished meanwhile: nothing to cancel
    assert home(conn, job_id).startswith("jobs_done_")


@pytest.mark.parametrize("second", ["requeue", "requeue_many", "discard"])
def test_two_operators_acting_on_one_dead_job_get_answers_not_errors(
    conn: Conn, database_url: str, second: str
) -> None:
    """One operator's requeue moves a dead job back to jobs_live; another's requeue or discard,
    waiting for the row meanwhile, gets 40001 from PostgreSQL, runs again, and finds the job
    already live: nothing to do, no error (the console answers it, never a 500).
    kills: operator writes without the moved-row retry"""
    job_id = enqueue(conn, "noop")
    run(JobStore(conn), {job_id: "dead"})
    answers: list[object] = []

    def act() -> None:
        with psycopg.connect(database_url, autocommit=True) as other:
            store = JobStore(other)
            try:
                if second == "requeue":
                    answers.append(store.requeue(job_id, 1))
                elif second == "requeue_many":
                    answers.append(store.requeue_many({job_id: 1}))
                else:
                    answers.append(store.discard([job_id]))
            except psycopg.Error as error:
                answers.append(error)

    waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    thread = threading.Thread(target=act)
    with psycopg.connect(database_url) as first, first.transaction():
        assert JobStore(first).requeue(job_id, 1)  # moved to jobs_live, not committed
        thread.start()
        with psycopg.connect(database_url, autocommit=True) as watcher:
            wait_until(lambda: scalar(watcher, waiting) == 1)
    thread.join(10)
    assert answers == [False if second == "requeue" else []]
    assert home(conn, job_id) == "jobs_live"
    assert scalar(conn, "SELECT state FROM jobs WHERE id = %s", job_id) == "available"
