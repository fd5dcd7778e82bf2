"""The one-statement claim: order, visibility, pausing, SKIP LOCKED and its index."""

import re
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.sql import SQL, Literal

from jobqueue import JobRequest, JobStore, enqueue, enqueue_many
from jobqueue.store import ClaimedJob
from tests.support.db import job_row, scalar

pytestmark = pytest.mark.pooled  # also through PgBouncer (tests/conftest.py)

Conn = psycopg.Connection[Any]


def assert_claimed_by_w1_for_30_s(conn: Conn, job_id: int) -> None:
    """The job is running its first attempt, held by worker w1 on a lease of 30 seconds."""
    row = job_row(conn, job_id)
    assert (row["state"], row["attempt"], row["locked_by"]) == ("running", 1, "w1")
    lease = scalar(
        conn,
        "SELECT extract(epoch FROM lease_expires_at - started_at) FROM jobs WHERE id = %s",
        job_id,
    )
    assert float(lease) == 30


def test_claim_takes_visible_jobs_by_priority_then_age_and_marks_them_running(conn: Conn) -> None:
    store = JobStore(conn)
    low = enqueue(conn, "noop", priority=5)
    first = enqueue(conn, "noop", priority=0)
    second = enqueue(conn, "noop", priority=0)
    enqueue(conn, "noop", delay=3600)  # scheduled: invisible
    enqueue(conn, "noop", queue="other")
    claimed = store.claim("default", 10, "w1", lease_seconds=30)
    assert [job.id for job in claimed] == [first, second, low]
    assert_claimed_by_w1_for_30_s(conn, first)
    assert store.claim("default", 10, "w1", lease_seconds=30) == []


def test_claim_respects_its_limit(conn: Conn) -> None:
    enqueue_many(conn, [JobRequest("noop")] * 10)
    assert len(JobStore(conn).claim("default", 3, "w1", 30)) == 3
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE state = 'available'") == 7


def claim_in_threads(
    database_url: str,
    take: Callable[[JobStore, str], list[ClaimedJob]],
    meanwhile: Callable[[], None] = lambda: None,
    until: Callable[[], bool] = lambda: True,
) -> dict[str, list[int]]:
    """Four claimers, each on a connection of its own, start together and call ``take`` until
    it finds nothing after ``until()`` held; ``meanwhile`` runs in this thread once they have
    started. Each claimer's job ids, by its name."""
    claimed: dict[str, list[int]] = {}
    barrier = threading.Barrier(5)

    def claimer(name: str) -> None:
        ids: list[int] = []
        with psycopg.connect(database_url, autocommit=True) as connection:
            store = JobStore(connection)
            barrier.wait()
            while True:
                last = until()
                jobs = take(store, name)
                ids.extend(job.id for job in jobs)
                if last and not jobs:
                    break
        claimed[name] = ids

    threads = [threading.Thread(target=claimer, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    barrier.wait()
    meanwhile()
    for thread in threads:
        thread.join()
    return claimed


def test_concurrent_claims_never_share_a_job(database_url: str, conn: Conn) -> None:
    enqueue_many(conn, [JobRequest("noop")] * 2000)
    claimed = claim_in_threads(
        database_url, lambda store, name: store.claim("default", 7, name, 30)
    )
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


def explain(conn: Conn, statement: str, params: dict[str, Any], plan: str) -> str:
    """EXPLAIN ANALYZE of a claim (rolled back): its ``custom`` plan, made for these values, or
    its ``generic`` plan, made once for any values, which the worker's claiming connections
    reuse (Link's ``reuse_plans``)."""
    sql = JobStore(conn)._queries[statement].sql
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql)))
    with conn.transaction():
        if plan == "custom":
            rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)  # type: ignore[operator]
        else:
            conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m[1]) + 1}", sql)
            conn.execute("PREPARE explained AS " + numbered)  # type: ignore[operator]
            values = SQL(", ").join(Literal(params[name]) for name in names)
            rows = conn.execute(
                SQL("EXPLAIN (ANALYZE, BUFFERS) EXECUTE explained ({})").format(values)
            )
        lines = "\n".join(row[0] for row in rows)
        if plan == "generic":
            conn.execute("DEALLOCATE explained")
        conn.execute("ROLLBACK")  # EXPLAIN ANALYZE ran the update; undo it
    # a generic plan compares with the parameter, not with the value
    assert ("(queue = $1)" in lines) == (plan == "generic"), lines
    return lines


@pytest.mark.parametrize("plan", ["custom", "generic"])
def test_claim_reads_only_jobs_live_beside_many_finished_jobs(conn: Conn, plan: str) -> None:
    """The claim's plan names no partition but jobs_live (finished and dead jobs are never
    read, not even planned for), and takes the jobs through the claim index in order."""
    conn.execute(
        """
        INSERT INTO jobs (tenant_id, queue, task, state, attempt, finished_at)
        SELECT 1, 'default', 'noop', CASE WHEN i % 10 = 0 THEN 'dead' ELSE 'succeeded' END, 1,
               now()
        FROM generate_series(1, 100000) AS i
        """
    )
    enqueue_many(conn, [JobRequest("noop")] * 50)
    conn.execute("ANALYZE jobs")
    params = {"queue": "default", "limit": 10, "worker": "w1", "lease_seconds": 30}
    lines = explain(conn, "job_claim", params, plan)
    assert "Index Scan using jobs_claim_idx on jobs_live" in lines, lines
    read = set(re.findall(r"(?:Seq Scan|Index (?:Only )?Scan using \w+|Update) on (\w+)", lines))
    assert read == {"jobs", "jobs_live", "queues"}, lines  # "Update on jobs": the parent named
    before_lock = lines.split("Index Scan using jobs_claim_idx")[0].split("LockRows")[-1]
    assert "Sort" not in before_lock, lines


# -- the fair claim (job_claim_fair) ------------------------------------------------------------


def make_tenants(conn: Conn, count: int) -> list[int]:
    return [
        int(row[0])
        for row in conn.execute(
            "INSERT INTO tenants (slug, name) SELECT 't' || n, 'T' || n"
            " FROM generate_series(1, %s) AS n RETURNING id",
            (count,),
        )
    ]


def test_the_fair_claim_shares_the_slots_between_tenants(conn: Conn) -> None:
    """kills: fair-claim-no-share"""
    big, small = make_tenants(conn, 2)
    enqueue_many(conn, [JobRequest("noop", tenant_id=big)] * 500)
    enqueue_many(conn, [JobRequest("noop", tenant_id=small)] * 20)
    store = JobStore(conn)
    for _ in range(2):
        claimed = store.claim("default", 10, "w1", 30, fair=True)
        assert sorted(job.tenant_id for job in claimed) == [big] * 5 + [small] * 5
    unfair = store.claim("default", 10, "w1", 30)
    assert {job.tenant_id for job in unfair} == {big}, "plain order: the older burst first"
    claimed = store.claim("default", 40, "w1", 30, fair=True)
    assert sorted(job.tenant_id for job in claimed).count(small) == 10, "all the small one has"


def test_the_fair_claim_keeps_priorities_within_a_tenant(conn: Conn) -> None:
    """kills: fair-claim-no-priority, fair-claim-takes-scheduled-jobs"""
    [tenant] = make_tenants(conn, 1)
    late = enqueue(conn, "noop", tenant_id=tenant, priority=5)
    enqueue(conn, "noop", tenant_id=tenant, priority=-1, delay=3600)  # scheduled: invisible
    urgent = enqueue(conn, "noop", tenant_id=tenant, priority=-1)
    store = JobStore(conn)
    assert [job.id for job in store.claim("default", 1, "w1", 30, fair=True)] == [urgent]
    assert [job.id for job in store.claim("default", 5, "w1", 30, fair=True)] == [late]
    assert store.claim("default", 5, "w1", 30, fair=True) == []


def test_the_fair_claim_serves_every_tenant_in_turn_when_they_outnumber_the_slots(
    conn: Conn,
) -> None:
    tenants = make_tenants(conn, 30)
    enqueue_many(conn, [JobRequest("noop", tenant_id=t) for t in tenants for _ in range(10)])
    store = JobStore(conn)
    served: set[int] = set()
    claims = 0
    while served != set(tenants):
        claimed = store.claim("default", 3, "w1", 30, fair=True)
        assert len(claimed) == 3 and len({job.tenant_id for job in claimed}) == 3
        served |= {job.tenant_id for job in claimed}
        claims += 1
        assert claims < 100, "the round starts at a random tenant: all are reached"


def test_the_fair_claim_respects_a_pause(conn: Conn) -> None:
    enqueue(conn, "noop")
    store = JobStore(conn)
    store.pause_queue("default", "test")
    assert store.claim("default", 10, "w1", 30, fair=True) == []
    store.resume_queue("default")
    assert len(store.claim("default", 10, "w1", 30, fair=True)) == 1


@pytest.mark.parametrize("plan", ["custom", "generic"])
def test_the_fair_claim_reads_indexes_only_beside_many_finished_jobs(conn: Conn, plan: str) -> None:
    tenants = make_tenants(conn, 3)
    conn.execute(
        """
        INSERT INTO jobs (tenant_id, queue, task, state, attempt, finished_at)
        SELECT 1, 'default', 'noop', CASE WHEN i % 10 = 0 THEN 'dead' ELSE 'succeeded' END, 1,
               now()
        FROM generate_series(1, 100000) AS i
        """
    )
    enqueue_many(conn, [JobRequest("noop", tenant_id=t) for t in tenants for _ in range(50)])
    conn.execute("ANALYZE jobs")
    params = {"queue": "default", "limit": 10, "worker": "w1", "lease_seconds": 30}
    lines = explain(conn, "job_claim_fair", params, plan)
    read = set(re.findall(r"(?:Seq Scan|Index (?:Only )?Scan using \w+|Update) on (\w+)", lines))
    assert read == {"jobs", "jobs_live", "queues"}, lines  # finished jobs: not even planned for
    assert "Bitmap" not in lines, lines
    walks = [line for line in lines.splitlines() if "Scan" in line and " on jobs_live " in line]
    # the walk of tenants and each tenant's jobs by the claim index; the update's own lookup of
    # the picked rows by id is the one other read of jobs_live
    assert sum("jobs_claim_tenant_idx" not in line for line in walks) == 1, lines
    assert any("jobs_claim_tenant_idx on jobs_live next" in line for line in walks), lines


def buffers_read(lines: str) -> int:
    """The pages a plan's top node read, from memory or disk (EXPLAIN's BUFFERS)."""
    found = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", lines)
    assert found is not None, lines
    return int(found[1]) + int(found[2] or 0)


@pytest.mark.parametrize("plan", ["custom", "generic"])
@pytest.mark.parametrize("statement", ["job_claim", "job_claim_fair"])
def test_a_claim_never_walks_the_scheduled_jobs(conn: Conn, statement: str, plan: str) -> None:
    """A claim that finds fewer visible jobs than it asks for stops, at each priority, at the
    first job not yet visible: 40,000 jobs scheduled for later in the queue, of a more urgent
    priority than the visible job and of its own, cost it nothing. Taken in one range ordered
    by priority, the fair claim read them all (about 310 pages, 2.5 ms a claim with 50,000 of
    them against 0.45 for the plain claim).
    kills: claim-walks-scheduled-jobs, fair-claim-walks-scheduled-jobs"""
    [tenant] = make_tenants(conn, 1)
    for batch in range(40):
        scheduled = JobRequest("noop", tenant_id=tenant, delay=3600, priority=batch % 2)
        enqueue_many(conn, [scheduled] * 1000)
    visible = enqueue(conn, "noop", tenant_id=tenant, priority=1)
    conn.execute("ANALYZE jobs")
    params = {"queue": "default", "limit": 10, "worker": "w1", "lease_seconds": 30}
    lines = explain(conn, statement, params, plan)
    assert "rows=1 loops=1" in lines.splitlines()[0], lines  # the visible job, claimed
    assert buffers_read(lines) < 80, lines
    fair = statement == "job_claim_fair"
    assert [job.id for job in JobStore(conn).claim("default", 10, "w1", 30, fair)] == [visible]


@pytest.mark.parametrize("plan", ["custom", "generic"])
@pytest.mark.parametrize("statement", ["job_claim", "job_claim_fair"])
def test_a_claim_marks_its_jobs_by_id_however_long_the_queue(
    conn: Conn, statement: str, plan: str
) -> None:
    """The update finds the picked jobs by id. Joined to them, it let the planner, which cannot
    see how few the claim picks, hash the whole live table: 13 ms a claim against 0.9 with
    50,000 jobs waiting, the drain's one bottleneck (11,500 -> 21,700 jobs/s once fixed).
    kills: claim-joins-picked"""
    conn.execute(
        """
        INSERT INTO jobs (tenant_id, queue, task)
        SELECT 1, 'default', 'noop' FROM generate_series(1, 20000)
        """
    )
    conn.execute("ANALYZE jobs")
    params = {"queue": "default", "limit": 10, "worker": "w1", "lease_seconds": 30}
    lines = explain(conn, statement, params, plan)
    assert "Index Scan using jobs_live_id_idx on jobs_live" in lines, lines
    assert "Seq Scan on jobs_live" not in lines and "Hash" not in lines, lines


# -- rate limits: the token bucket in the queue's row ------------------------------------------


def test_a_rate_limited_queue_claims_only_the_tokens_its_bucket_holds(conn: Conn) -> None:
    """kills: claim-ignores-rate-limit, rate-bucket-not-spent"""
    enqueue_many(conn, [JobRequest("noop")] * 100)
    store = JobStore(conn)
    store.set_rate_limit("default", 40, 60.0, "test")  # 40 a minute: 2/3 of a token a second
    for fair in (False, True):
        conn.execute(
            "UPDATE queues SET rate_tokens = 0,"
            " rate_refilled_at = clock_timestamp() - interval '6.5 s'"
        )
        assert len(store.claim("default", 50, "w1", 30, fair=fair)) == 4  # 4.33 tokens
        assert store.claim("default", 50, "w1", 30, fair=fair) == [], "the bucket is spent"
        conn.execute("UPDATE queues SET rate_refilled_at = clock_timestamp() - interval '1 h'")
        assert len(store.claim("default", 50, "w1", 30, fair=fair)) == 10, "a quarter at most"
    store.set_rate_limit("default", None, 1.0, None)
    assert len(store.claim("default", 50, "w1", 30)) == 50, "no limit: the slots asked for"
    store.set_rate_limit("default", 3, 60.0, "test")
    conn.execute("UPDATE queues SET rate_refilled_at = clock_timestamp() - interval '1 h'")
    assert len(store.claim("default", 50, "w1", 30)) == 1, "a bucket holds one at least"
    # A claim that waited for the lock behind a later refill counts no time, never less than 0.
    conn.execute(
        "UPDATE queues SET rate_tokens = 0.5, rate_refilled_at = clock_timestamp() + interval '1 s'"
    )
    assert store.claim("default", 50, "w1", 30) == []
    assert scalar(conn, "SELECT rate_tokens FROM queues WHERE name = 'default'") == 0.5


def test_the_claim_of_an_unlimited_queue_locks_no_queue_row(conn: Conn, database_url: str) -> None:
    enqueue_many(conn, [JobRequest("noop")] * 5)
    store = JobStore(conn)
    store.pause_queue("default", "test")
    store.resume_queue("default")  # the queue has a row, without a limit
    with psycopg.connect(database_url) as holder:
        holder.execute("SELECT * FROM queues WHERE name = 'default' FOR UPDATE")
        conn.execute("SET lock_timeout = '500ms'")
        assert len(store.claim("default", 2, "w1", 30)) == 2
        assert len(store.claim("default", 2, "w1", 30, fair=True)) == 2
        conn.execute("RESET lock_timeout")


def test_a_claim_measures_its_payloads_as_the_server_sent_them(conn: Conn) -> None:
    """claim_measured gives the mean size of the claimed payloads' JSON text, read from a
    sample spread over a claim of more rows than it reads (40 here, 16 read), for the runner's
    prefetch_bytes; a claim that found nothing measures 0. The payloads' size is what the test
    knows, so reading another column, or none, fails. kills: claim-measures-no-payload"""
    payload = {"blob": "x" * 1000}
    enqueue_many(conn, [JobRequest("noop", payload) for _ in range(40)])
    store = JobStore(conn)
    jobs, mean = store.claim_measured("default", 40, "w1", 30, fair=True)
    assert len(jobs) == 40
    assert mean == len('{"blob": "' + "x" * 1000 + '"}')  # jsonb's text: a space after the colon
    assert store.claim_measured("default", 40, "w1", 30) == ([], 0.0)


# -- the listener's claim of an idle queue's one job (job_claim_sole) ---------------------------


def claim_sole(conn: Conn, queue: str = "default") -> tuple[list[int], bool]:
    """What job_claim_sole answers: the ids it claimed, and whether the full claim must follow."""
    params = {"queue": queue, "limit": 10, "worker": "w1", "lease_seconds": 30}
    row = conn.execute(JobStore(conn)._queries["job_claim_sole"].sql, params).fetchone()
    assert row is not None
    return ([] if row[0] is None else [row[0]]), row[-1]


def state(conn: Conn, job_id: int) -> str:
    return str(job_row(conn, job_id)["state"])


def test_the_sole_claim_takes_the_one_job_of_an_idle_queue_as_the_full_claim_would(
    conn: Conn,
) -> None:
    only = enqueue(conn, "noop")
    assert claim_sole(conn) == ([only], False)
    assert_claimed_by_w1_for_30_s(conn, only)
    assert claim_sole(conn) == ([], False), "an empty queue: nothing, and no full claim after"
    again = enqueue(conn, "noop")
    store = JobStore(conn)
    for fair in (False, True):
        assert [job.id for job in store.claim_measured("default", 10, "w1", 30, fair, True)[0]] == (
            [again] if not fair else []
        )


def test_the_sole_claim_leaves_a_queue_of_two_visible_jobs_to_the_full_claim(conn: Conn) -> None:
    """With two visible jobs, or a scheduled job at a more urgent priority than the visible
    one, the sole claim takes none: the full claim, after it, takes the visible ones in
    priority order. kills: sole-claim-reads-one-entry, sole-claim-ignores-second-visible"""
    store = JobStore(conn)
    for fair in (False, True):
        first, second = enqueue(conn, "noop"), enqueue(conn, "noop")
        assert claim_sole(conn) == ([], True)
        assert (state(conn, first), state(conn, second)) == ("available", "available")
        jobs, _ = store.claim_measured("default", 1, "w1", 30, fair, sole_first=True)
        assert [job.id for job in jobs] == [first]
        assert [job.id for job in store.claim("default", 1, "w1", 30, fair)] == [second]
        later = enqueue(conn, "noop", priority=5)
        sooner = enqueue(conn, "noop", priority=0)
        assert claim_sole(conn) == ([], True)
        jobs, _ = store.claim_measured("default", 1, "w1", 30, fair, sole_first=True)
        assert [job.id for job in jobs] == [sooner]
        assert [job.id for job in store.claim("default", 1, "w1", 30, fair)] == [later]
        scheduled = enqueue(conn, "noop", priority=0, delay=3600)
        visible = enqueue(conn, "noop", priority=5)
        assert claim_sole(conn) == ([], True)
        jobs, _ = store.claim_measured("default", 10, "w1", 30, fair, sole_first=True)
        assert [job.id for job in jobs] == [visible]
        assert state(conn, scheduled) == "available"
        conn.execute("DELETE FROM jobs WHERE id = %s", (scheduled,))


def test_the_sole_claim_takes_the_one_visible_job_ahead_of_scheduled_ones(conn: Conn) -> None:
    """Jobs scheduled for later at the visible job's priority (reminders, retries waiting out
    their backoff) leave it the queue's one visible job: the sole claim takes it. A job waiting
    at a later priority sends the claim to the full one, which takes the visible jobs of every
    priority. kills: sole-claim-ignores-later-priorities, sole-claim-falls-back-behind-scheduled"""
    store = JobStore(conn)
    scheduled = [enqueue(conn, "noop", delay=3600) for _ in range(3)]
    visible = enqueue(conn, "noop")
    assert claim_sole(conn) == ([visible], False)
    later = enqueue(conn, "noop", priority=5)
    again = enqueue(conn, "noop")
    assert claim_sole(conn) == ([], True)
    jobs, _ = store.claim_measured("default", 10, "w1", 30, True, sole_first=True)
    assert [job.id for job in jobs] == [again, later]
    assert [state(conn, job) for job in scheduled] == ["available"] * 3


def test_the_sole_claim_takes_nothing_scheduled_nor_of_a_paused_queue(conn: Conn) -> None:
    """kills: sole-claim-ignores-pause, sole-claim-takes-scheduled-job"""
    store = JobStore(conn)
    scheduled = enqueue(conn, "noop", delay=3600)
    assert claim_sole(conn) == ([], False)
    assert state(conn, scheduled) == "available"
    conn.execute("DELETE FROM jobs WHERE id = %s", (scheduled,))
    only = enqueue(conn, "noop")
    store.pause_queue("default", "test")
    assert claim_sole(conn) == ([], False)
    assert store.claim_measured("default", 10, "w1", 30, True, sole_first=True) == ([], 0.0)
    assert state(conn, only) == "available"
    store.resume_queue("default")
    assert claim_sole(conn) == ([only], False)


def test_the_sole_claim_leaves_a_rate_limited_queue_to_the_full_claim(conn: Conn) -> None:
    """A rate-limited queue's one job waits for its bucket's token: only the full claim spends
    it. kills: sole-claim-ignores-rate-limit"""
    store = JobStore(conn)
    only = enqueue(conn, "noop")
    store.set_rate_limit("default", 40, 60.0, "test")
    conn.execute("UPDATE queues SET rate_tokens = 0, rate_refilled_at = clock_timestamp()")
    assert claim_sole(conn) == ([], True)
    assert store.claim_measured("default", 10, "w1", 30, True, sole_first=True) == ([], 0.0)
    assert state(conn, only) == "available"
    conn.execute("UPDATE queues SET rate_refilled_at = clock_timestamp() - interval '1 h'")
    jobs, _ = store.claim_measured("default", 10, "w1", 30, True, sole_first=True)
    assert [job.id for job in jobs] == [only]
    assert scalar(conn, "SELECT rate_tokens FROM queues WHERE name = 'default'") < 10


def test_the_sole_claim_skips_its_job_locked_elsewhere_instead_of_waiting(
    database_url: str, conn: Conn
) -> None:
    """kills: sole-claim-waits-instead-of-skipping"""
    only = enqueue(conn, "noop")
    with (
        psycopg.connect(database_url) as holder,
        psycopg.connect(database_url, autocommit=True) as claimer,
    ):
        holder.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (only,))
        claimer.execute("SET lock_timeout = '500ms'")
        assert claim_sole(claimer) == ([], False)
        holder.rollback()
        assert claim_sole(claimer) == ([only], False)


def test_listeners_racing_for_jobs_enqueued_one_at_a_time_claim_each_once(
    database_url: str, conn: Conn
) -> None:
    """Four listeners' claims (the sole claim, the full one when it falls back) race for jobs
    committed one at a time, as notifications would wake them: every job is claimed exactly
    once, and none is left."""
    total = 400
    enqueued = threading.Event()

    def enqueue_one_at_a_time() -> None:
        for _ in range(total):
            enqueue(conn, "noop")
        enqueued.set()

    claimed = claim_in_threads(
        database_url,
        lambda store, name: store.claim_measured("default", 3, name, 30, True, sole_first=True)[0],
        enqueue_one_at_a_time,
        enqueued.is_set,
    )
    every_claim = [job_id for ids in claimed.values() for job_id in ids]
    assert len(every_claim) == len(set(every_claim)) == total
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE state = 'available'") == 0
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE attempt <> 1") == 0


def test_the_sole_claim_measures_its_payload(conn: Conn) -> None:
    """kills: sole-claim-measures-no-payload"""
    enqueue(conn, "noop", {"blob": "x" * 1000})
    jobs, mean = JobStore(conn).claim_measured("default", 10, "w1", 30, True, sole_first=True)
    assert len(jobs) == 1
    assert mean == len('{"blob": "' + "x" * 1000 + '"}')


@pytest.mark.parametrize("plan", ["custom", "generic"])
@pytest.mark.parametrize("waiting_in", ["default", "other"])
def test_the_sole_claim_reads_two_jobs_of_its_queue_however_many_wait(
    conn: Conn, plan: str, waiting_in: str
) -> None:
    """Beside 100,000 finished jobs, with 40,000 waiting in its queue or in another one, the
    sole claim reads only jobs_live and queues, stops at its queue's second job (a few pages)
    and hands over to the full claim."""
    conn.execute(
        """
        INSERT INTO jobs (tenant_id, queue, task, state, attempt, finished_at)
        SELECT 1, 'default', 'noop', CASE WHEN i % 10 = 0 THEN 'dead' ELSE 'succeeded' END, 1,
               now()
        FROM generate_series(1, 100000) AS i
        """
    )
    for _ in range(40):
        enqueue_many(conn, [JobRequest("noop", queue=waiting_in)] * 1000)
    enqueue_many(conn, [JobRequest("noop")] * 2)
    conn.execute("ANALYZE jobs")
    params = {"queue": "default", "limit": 10, "worker": "w1", "lease_seconds": 30}
    lines = explain(conn, "job_claim_sole", params, plan)
    read = set(re.findall(r"(?:Seq Scan|Index (?:Only )?Scan using \w+|Update) on (\w+)", lines))
    assert read <= {"jobs", "jobs_live", "queues"}, lines
    assert buffers_read(lines) < 20, lines
    assert claim_sole(conn) == ([], True)
