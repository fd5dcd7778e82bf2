"""Parts of the runner, driven by hand on a real database: the completer's writes (one result
the database refuses never loses the others) and the worker threads' check of a job's lease."""

import threading
import time
from typing import Any

import psycopg

from jobqueue import JobRequest, JobStore, TaskRegistry, enqueue, enqueue_many
from jobqueue.connections import Link
from jobqueue.runner import Runner
from jobqueue.settings import WorkerSettings
from jobqueue.store import AttemptResult
from tests.jobqueue.test_leases import claimed, stats
from tests.support.db import attempt_rows, job_row, scalar
from tests.support.telemetry import MemoryTelemetry, memory_telemetry

Conn = psycopg.Connection[Any]


def test_a_batch_with_rows_the_database_refuses_is_written_row_by_row(
    conn: Conn, database_url: str
) -> None:
    """Results built by hand, past run_job's cleaning: a NUL (which PostgreSQL text refuses) and
    a lone surrogate (which cannot be encoded) among good ones. Every good result is written;
    the bad ones are written without their text. kills: completer-no-fallback"""
    ids = [enqueue(conn, "noop") for _ in range(6)]
    JobStore(conn).claim("default", 6, "w1", 30)
    poisoned = {ids[1]: "ValueError: a\x00b", ids[4]: "ValueError: \ud800"}
    batch = [
        AttemptResult(
            claimed(job_id, 1), "failed", poisoned.get(job_id, "ValueError: fine"), None, 5.0, 0.1
        )
        for job_id in ids
    ]
    runner = Runner(WorkerSettings(database_url=database_url, queues={"default": 1}))
    runner.worker_id = "w1"
    link = Link(database_url, "completer", threading.Event())
    runner._write_results(link, batch)
    link.close()
    for job_id in ids:
        row = job_row(conn, job_id)
        assert (row["state"], row["locked_by"]) == ("available", None)
        [attempt] = attempt_rows(conn, job_id)
        if job_id in poisoned:
            assert (
                attempt["error"] == "the attempt's error could not be stored; see the worker's log"
            )
        else:
            assert attempt["error"] == "ValueError: fine"
    assert stats(conn)["failed"] == 6


def test_a_buffered_job_whose_lease_ran_out_while_the_process_stalled_is_not_started(
    conn: Conn, database_url: str
) -> None:
    """A process frozen (SIGSTOP, a paused VM) past a prefetched job's lease wakes up: the job
    has been rescued and may run elsewhere, so its worker thread must not start it."""
    tasks = TaskRegistry()
    ran: list[int] = []

    @tasks.task("count")
    def count(n: int) -> None:
        ran.append(n)

    settings = WorkerSettings(database_url=database_url, queues={"default": 1}, lease_seconds=30)
    runner = Runner(settings, tasks=tasks)
    stale, fresh = (enqueue(conn, "count", {"n": n}, tasks=tasks) for n in (1, 2))
    jobs = JobStore(conn).claim("default", 2, runner.worker_id, 30)
    consumer = runner.consumers["default"]
    runner.hold([jobs[0]], lease_from=time.monotonic() - 31)  # claimed before a long stall
    runner.hold([jobs[1]], lease_from=time.monotonic())
    consumer._outstanding = 2
    for job in (*jobs, None):
        consumer._buffer.put(job)
    consumer._work_loop()
    assert ran == [2]
    assert consumer._outstanding == 0
    assert not runner.lease_may_hold(jobs[0])
    assert {job.id for job in jobs} == {stale, fresh}


def test_the_completer_counts_each_written_attempt_once_in_the_metrics(
    conn: Conn, database_url: str
) -> None:
    """The processed counter is added to once per batch and outcome: its sums still count every
    attempt, and the run and wait histograms take one value per attempt.
    kills: processed-counted-once-per-batch"""
    telemetry_memory = memory_telemetry()
    before = _processed(telemetry_memory)
    ids = [enqueue(conn, "noop") for _ in range(7)]
    JobStore(conn).claim("default", 7, "w1", 30)
    batch = [
        AttemptResult(claimed(job_id, 1), outcome, error, None, 5.0, 0.1)
        for job_id, (outcome, error) in zip(
            ids,
            [("succeeded", None)] * 4 + [("failed", "E: x")] * 2 + [("dead", "E: y")],
            strict=True,
        )
    ]
    runner = Runner(WorkerSettings(database_url=database_url, queues={"default": 1}))
    runner.worker_id = "w1"
    link = Link(database_url, "completer", threading.Event())
    runner._write_results(link, batch)
    link.close()
    after = _processed(telemetry_memory)
    assert {k: after[k] - before.get(k, 0) for k in after} == {
        "succeeded": 4,
        "retry": 2,
        "dead": 1,
    }
    [(_, run_time)] = telemetry_memory.metric_points("pauta.job.run.duration")
    assert run_time.count >= 7


def _processed(memory: MemoryTelemetry) -> dict[str, int]:
    return {
        labels["outcome"]: point.value
        for labels, point in memory.metric_points("pauta.jobs.processed")
        if labels["task"] == "noop"
    }


# The full claim's plans (job_claim or job_claim_fair, which walk with WITH RECURSIVE), and the
# listener's claim of an idle queue's one job (job_claim_sole); these queries are prepared too,
# where everything is at once.
CLAIM_PLANS = (
    "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
    " WHERE statement LIKE 'WITH RECURSIVE%%' AND statement NOT LIKE '%%pg_prepared%%'"
)
SOLE_CLAIM_PLANS = (
    "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
    " WHERE statement LIKE '%%seen AS MATERIALIZED%%' AND statement NOT LIKE '%%pg_prepared%%'"
)


def test_the_fetch_link_reuses_the_claims_generic_plan(conn: Conn, database_url: str) -> None:
    """Left to itself, PostgreSQL plans the claim afresh at every call (each custom plan's
    estimate beats the generic one's); the consumer's fetch link keeps the generic plan, which
    reads the same indexes (test_claim's EXPLAIN tests), and plans once; the other links leave
    the choice to PostgreSQL. kills: fetch-link-custom-plans, every-link-reuses-plans"""
    enqueue_many(conn, [JobRequest("noop")] * 100)
    runner = Runner(WorkerSettings(database_url=database_url, queues={"default": 1}))
    fetch = runner.consumers["default"]._link
    other = runner._link("registry")
    plans = {}
    for name, link in (("fetch", fetch), ("other", other)):
        for _ in range(8):
            link.call(lambda store: store.claim("default", 2, runner.worker_id, 30))
        assert link.connection is not None
        plans[name] = link.connection.execute(CLAIM_PLANS).fetchall()
        link.close()
    # a claiming link prepares the claim at its first run, and each run reuses the generic
    # plan; elsewhere psycopg prepares a statement for its sixth run, and that run and the two
    # after it plan afresh
    assert plans == {"fetch": [(8, 0)], "other": [(0, 3)]}
    assert len(JobStore(conn).claim("default", 100, "w1", 30)) == 100 - 2 * 8 * 2


def test_the_listener_has_the_claim_planned_before_the_first_job(database_url: str) -> None:
    """The listener claims only when woken for a job; its first claims, planned afresh at
    first, were the slowest pickups of a latency run. Once connected it has run both its claims
    for no job, so the statements are prepared and their plans made. kills:
    listener-claim-unprepared, claiming-link-prepares-late"""
    runner = Runner(WorkerSettings(database_url=database_url, queues={"default": 1}))
    link = runner._link("listener", claims=True)
    link.on_connect = runner._on_listen_connect
    connection = link.connect()
    assert connection.execute(CLAIM_PLANS).fetchall() == [(1, 0)]
    assert connection.execute(SOLE_CLAIM_PLANS).fetchall() == [(1, 0)]
    link.call(runner.consumers["default"].claim_now)  # what the listener runs when woken
    assert connection.execute(SOLE_CLAIM_PLANS).fetchall() == [(2, 0)]
    link.close()


def test_the_listener_claims_an_idle_queues_one_job_without_the_full_claim(
    conn: Conn, database_url: str
) -> None:
    """Woken for a queue that holds one job, the listener claims it with job_claim_sole alone;
    while its consumer holds a job (a queue being drained), it runs the full claim straight
    away. Each claim's count of plans run on the listener's connection says which ran. The
    sole claim's fallback to the full claim: tests/jobqueue/test_claim.py, and a rate-limited
    queue's below. kills: listener-never-sole, sole-claim-result-ignored,
    listener-sole-while-draining"""
    runner = Runner(WorkerSettings(database_url=database_url, queues={"default": 4}))
    link = runner._link("listener", claims=True)
    link.on_connect = runner._on_listen_connect
    try:
        connection = link.connect()
        claim_now = runner.consumers["default"].claim_now
        one = enqueue(conn, "noop")
        link.call(claim_now)
        assert job_row(conn, one)["state"] == "running"
        assert connection.execute(SOLE_CLAIM_PLANS).fetchall() == [(2, 0)]  # connect, the job
        assert connection.execute(CLAIM_PLANS).fetchall() == [(1, 0)]  # connect only
        two = [enqueue(conn, "noop", priority=1), enqueue(conn, "noop")]
        link.call(claim_now)  # the consumer holds the first job
        assert connection.execute(SOLE_CLAIM_PLANS).fetchall() == [(2, 0)]
        assert connection.execute(CLAIM_PLANS).fetchall() == [(2, 0)]  # the full claim alone
        assert [job_row(conn, job)["state"] for job in two] == ["running", "running"]
    finally:
        link.close()


def test_an_idle_listener_runs_the_claim_for_no_job_to_keep_its_plan(
    conn: Conn, database_url: str
) -> None:
    """An ANALYZE or VACUUM of the job tables (the maintenance leader's, autovacuum's) throws the
    claim's cached plan away, and the next claim plans it again (1.6 ms here): the first pickup
    after a quiet spell was 3 to 4 ms against 1. After half a second without a job the listener
    runs the claim for no job, which plans it then; woken for a job, it claims that job instead.
    Behind a pooler it prepares nothing, so it has no plan to keep and runs nothing while idle.
    kills: listener-idle-claim-skipped, listener-idle-claim-unprepared-too"""
    for pooler, idle_claims in (("none", 1), ("transaction", 0)):
        settings = WorkerSettings(
            database_url=database_url, queues={"default": 1}, pooler=pooler, listen_url=database_url
        )
        runner = Runner(settings)
        link = runner._link("listener", url=settings.notify_url, claims=True)
        link.on_connect = runner._on_listen_connect
        try:
            connection = link.connect()
            backend = connection.info.backend_pid
            conn.execute("ANALYZE jobs_live")
            link.call(runner._receive_notifications)  # no job: returns after half a second
            last = scalar(conn, "SELECT query FROM pg_stat_activity WHERE pid = %s", backend)
            if idle_claims:
                assert last.startswith("WITH seen AS MATERIALIZED"), last  # the sole claim, last
                assert connection.execute(CLAIM_PLANS).fetchall() == [(2, 0)]  # connect, idle
                assert connection.execute(SOLE_CLAIM_PLANS).fetchall() == [(2, 0)]
            else:
                assert last.startswith("LISTEN"), last
            job = enqueue(conn, "noop")
            link.call(runner._receive_notifications)  # woken: claims the job
            assert job_row(conn, job)["state"] == "running"
            if idle_claims:
                assert connection.execute(SOLE_CLAIM_PLANS).fetchall() == [(3, 0)]
        finally:
            link.close()


def test_the_listeners_claim_for_no_job_leaves_a_rate_limited_queues_bucket_alone(
    conn: Conn, database_url: str
) -> None:
    """Run for a rate-limited queue, the claim locks the queue's token bucket and writes it back
    refilled, even when it takes no job: an idle listener would then write that row twice a
    second, and take turns with the real claims for its lock. It runs for a queue no job can
    be in instead; the plan, generic, is the same. kills: listener-plans-in-its-queue"""
    JobStore(conn).set_rate_limit("default", 10, 1.0, "test")
    bucket = "SELECT xmin::text, rate_refilled_at FROM queues WHERE name = 'default'"
    before = conn.execute(bucket).fetchone()
    runner = Runner(WorkerSettings(database_url=database_url, queues={"default": 1}))
    link = runner._link("listener", claims=True)
    link.on_connect = runner._on_listen_connect
    try:
        connection = link.connect()
        link.call(runner._receive_notifications)  # no job: runs the claim for none, idle
        assert connection.execute(CLAIM_PLANS).fetchall() == [(2, 0)]
        assert conn.execute(bucket).fetchone() == before
        job = enqueue(conn, "noop")
        link.call(runner._receive_notifications)  # woken: claims the job, spends a token
        assert job_row(conn, job)["state"] == "running"
        assert conn.execute(bucket).fetchone() != before
    finally:
        link.close()


def test_a_queue_of_big_payloads_claims_ahead_only_what_prefetch_bytes_allows(
    conn: Conn, database_url: str
) -> None:
    """60 no-op jobs of 100 kB payloads, two threads, up to 500 claimed ahead by count (jobs
    this short would be) but 250 kB of payloads: at most two ahead, so no claim takes more than
    four jobs. A claim stamps its jobs' started_at with its transaction's time: the attempts'
    rows, grouped by it, are the claims. kills: prefetch-ignores-payload-bytes,
    claim-measures-no-payload"""
    tasks = TaskRegistry()
    done = threading.Event()
    ran: list[int] = []

    @tasks.task("carry")
    def carry(seq: int, blob: str) -> None:
        ran.append(seq)
        if len(ran) == 60:
            done.set()

    blob = "x" * 100_000
    enqueue_many(
        conn, [JobRequest("carry", {"seq": n, "blob": blob}) for n in range(60)], tasks=tasks
    )
    settings = WorkerSettings(
        database_url=database_url,
        queues={"default": 2},
        prefetch=500,
        prefetch_bytes=250_000,
        maintenance=False,
    )
    runner = Runner(settings, tasks=tasks)
    runner.start()
    try:
        assert done.wait(60)
    finally:
        runner.stop()
    claims = conn.execute(
        "SELECT count(*) FROM job_attempts WHERE outcome = 'succeeded' GROUP BY started_at"
    ).fetchall()
    assert sum(size for (size,) in claims) == 60
    assert max(size for (size,) in claims) <= 4
