"""worker.py --single (one process): draining, wake-up, retries, crashes, fencing, shutdown."""

import itertools
import signal
import time
from typing import Any

import psycopg
import pytest

from jobqueue import JobRequest, JobStore, enqueue, enqueue_many
from tests.support.db import attempt_rows, create_test_tables, job_row, scalar
from tests.support.processes import WorkerProcess, start_worker, wait_until

pytestmark = pytest.mark.pooled  # also through PgBouncer (tests/conftest.py)

Conn = psycopg.Connection[Any]


@pytest.fixture(autouse=True)
def test_tables(conn: Conn) -> None:
    create_test_tables(conn)


def count(conn: Conn, where: str = "true") -> int:
    return int(scalar(conn, f"SELECT count(*) FROM jobs WHERE {where}"))


def test_four_runners_of_four_threads_run_ten_thousand_jobs_exactly_once(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    with conn.transaction():
        ids = enqueue_many(conn, [JobRequest("ledger_write")] * 10_000)
    for _ in range(4):
        start_worker(workers, database_url, "--single", "--queues", "default=4", "--poll", "0.2")
    wait_until(lambda: count(conn, "state = 'succeeded'") == 10_000, timeout=180)
    assert count(conn, "state <> 'succeeded'") == 0
    assert scalar(conn, "SELECT count(*) FROM ledger") == 10_000
    assert scalar(conn, "SELECT count(DISTINCT job_id) FROM ledger") == 10_000
    assert scalar(conn, "SELECT min(job_id) FROM ledger") == ids[0]
    assert scalar(conn, "SELECT count(*) FROM job_attempts") == 10_000
    assert scalar(conn, "SELECT count(*) FROM job_attempts WHERE outcome <> 'succeeded'") == 0
    runners = scalar(conn, "SELECT count(DISTINCT worker) FROM ledger")
    assert runners == 4, "every runner should have taken part"


def test_idle_runner_wakes_on_notify_long_before_its_poll_interval(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    """kills: listener-ignores-notifications"""
    start_worker(workers, database_url, "--single", "--queues", "default=1", "--poll", "30")
    with conn.transaction():
        enqueue(conn, "noop")
        time.sleep(0.5)  # an open transaction: nothing to see until the commit
    committed = time.monotonic()
    wait_until(lambda: count(conn, "state = 'succeeded'") == 1, timeout=10, interval=0.005)
    assert time.monotonic() - committed < 5  # a sixth of the poll: woken, on the slowest machine


def test_failing_twice_then_succeeding_leaves_three_attempts(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    job_id = enqueue(conn, "flaky", {"failures": 2})
    start_worker(workers, database_url, "--single", "--queues", "default=2", "--poll", "0.05")
    wait_until(lambda: job_row(conn, job_id)["state"] == "succeeded", timeout=20)
    attempts = attempt_rows(conn, job_id)
    assert [a["outcome"] for a in attempts] == ["failed", "failed", "succeeded"]
    assert attempts[0]["error"] == "ConnectionError: attempt 1 failed on purpose"
    assert "Traceback" in attempts[0]["traceback"]


def test_always_failing_job_dies_after_max_attempts_with_a_capped_growing_backoff(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    job_id = enqueue(conn, "always_fails", max_attempts=4)
    start_worker(workers, database_url, "--single", "--queues", "default=1", "--poll", "0.05")
    wait_until(lambda: job_row(conn, job_id)["state"] == "dead", timeout=20)
    row = job_row(conn, job_id)
    assert (row["attempt"], row["last_error"]) == (4, "ValueError: broken for good")
    attempts = attempt_rows(conn, job_id)
    assert [a["outcome"] for a in attempts] == ["failed"] * 4
    # Database time: the gap between an attempt's end and the next one's claim is the backoff.
    gaps = [
        (later["started_at"] - earlier["finished_at"]).total_seconds()
        for earlier, later in itertools.pairwise(attempts)
    ]
    expected = [0.2, 0.4, 0.5]  # base 0.2 s doubling, capped at 0.5 s, jitter pinned to 1.0
    for gap, delay in zip(gaps, expected, strict=True):
        assert delay <= gap < delay + 0.5, gaps


def test_jittered_backoff_stays_within_its_bounds(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    ids = enqueue_many(conn, [JobRequest("jittered_fails", max_attempts=4)] * 5)
    start_worker(workers, database_url, "--single", "--queues", "default=5", "--poll", "0.05")
    wait_until(lambda: count(conn, "state = 'dead'") == 5, timeout=20)
    ceilings = [0.2, 0.4, 0.5]
    for job_id in ids:
        attempts = attempt_rows(conn, job_id)
        for n, (earlier, later) in enumerate(itertools.pairwise(attempts)):
            gap = (later["started_at"] - earlier["finished_at"]).total_seconds()
            assert 0 <= gap < ceilings[n] + 0.5


def test_unknown_tasks_and_rejected_payloads_go_dead_with_the_reason(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    unknown = enqueue(conn, "no_such_task")
    bad_payload = enqueue(conn, "sleep", {"minutes": 3})
    refused = enqueue(conn, "refuses")
    fine = enqueue(conn, "noop")
    start_worker(workers, database_url, "--single", "--queues", "default=2", "--poll", "0.05")
    wait_until(lambda: count(conn, "state IN ('dead', 'succeeded')") == 4, timeout=20)
    assert job_row(conn, unknown)["last_error"] == (
        "UnknownTask: no task named 'no_such_task' is registered in this worker"
    )
    assert job_row(conn, bad_payload)["last_error"].startswith(
        "InvalidPayload: payload does not fit task 'sleep'"
    )
    assert job_row(conn, refused)["last_error"] == "PermanentError: this job can never succeed"
    assert all(len(attempt_rows(conn, j)) == 1 for j in (unknown, bad_payload, refused))
    assert job_row(conn, fine)["state"] == "succeeded"


def test_the_worker_process_runs_with_its_garbage_collector_threshold(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    """50,000 by default (not Python's 700), or what --gc-threshold says, read from what a task
    saw in the process.
    kills: worker-ignores-gc-threshold"""
    default = enqueue(conn, "reports_gc_threshold")
    worker = start_worker(workers, database_url, "--single", "--poll", "0.05")
    wait_until(lambda: job_row(conn, default)["state"] == "dead", timeout=20)
    assert job_row(conn, default)["last_error"] == "PermanentError: gc threshold 50000"
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    chosen = enqueue(conn, "reports_gc_threshold")
    start_worker(workers, database_url, "--single", "--poll", "0.05", "--gc-threshold", "1234")
    wait_until(lambda: job_row(conn, chosen)["state"] == "dead", timeout=20)
    assert job_row(conn, chosen)["last_error"] == "PermanentError: gc threshold 1234"


def test_runner_killed_mid_job_loses_nothing(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    lease = ("--lease", "2", "--heartbeat", "0.5", "--sweep", "0.2", "--poll", "0.1")
    doomed = start_worker(workers, database_url, "--single", "--queues", "default=1", *lease)
    job_id = enqueue(conn, "nap", {"seconds": 1.5})
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM started") == 1, timeout=10)
    doomed.signal(signal.SIGKILL)
    doomed.wait()
    killed_at = time.monotonic()
    start_worker(workers, database_url, "--single", "--queues", "default=1", *lease)
    wait_until(lambda: job_row(conn, job_id)["state"] == "succeeded", timeout=15)
    assert time.monotonic() - killed_at < 2 + 0.2 + 1.5 + 3  # lease + sweep + the job + slack
    attempts = attempt_rows(conn, job_id)
    assert [a["outcome"] for a in attempts] == ["lease_expired", "succeeded"]
    assert attempts[0]["worker"] != attempts[1]["worker"]


def test_paused_queue_is_not_claimed_until_resumed(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    JobStore(conn).pause_queue("default", paused_by="test")
    job_id = enqueue(conn, "noop")
    start_worker(
        workers, database_url, "--single", "--queues", "default=1,witness=1", "--poll", "0.05"
    )
    witness = enqueue(conn, "noop", queue="witness")
    # The worker claims for every queue as it starts; once the witness has run, it has also
    # looked at the paused queue, which already held a job.
    wait_until(lambda: job_row(conn, witness)["state"] == "succeeded", timeout=10)
    assert job_row(conn, job_id)["state"] == "available"
    JobStore(conn).resume_queue("default")
    wait_until(lambda: job_row(conn, job_id)["state"] == "succeeded", timeout=5)


def test_sigterm_finishes_running_jobs_releases_unstarted_and_exits_zero(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    ids = enqueue_many(conn, [JobRequest("nap", {"seconds": 1})] * 12)
    worker = start_worker(
        workers,
        database_url,
        "--single",
        "--queues",
        "default=2",
        "--prefetch",
        "6",
        "--poll",
        "0.05",
    )
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM started") == 2, timeout=10)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    started = {row[0] for row in conn.execute("SELECT job_id FROM started")}
    assert len(started) == 2
    for job_id in ids:
        row = job_row(conn, job_id)
        if job_id in started:
            assert row["state"] == "succeeded"
        else:
            assert (row["state"], row["attempt"], row["locked_by"]) == ("available", 0, None)
    assert count(conn, "state = 'running'") == 0


def test_grace_shorter_than_a_job_releases_it_and_it_completes_once_later(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    job_id = enqueue(conn, "nap", {"seconds": 3})
    worker = start_worker(
        workers, database_url, "--single", "--queues", "default=1", "--grace", "0.5"
    )
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM started") == 1, timeout=10)
    worker.signal(signal.SIGTERM)
    assert worker.wait(10) == 0
    row = job_row(conn, job_id)
    assert (row["state"], row["attempt"], row["max_attempts"]) == ("available", 1, 6)
    assert [a["outcome"] for a in attempt_rows(conn, job_id)] == ["released"]
    start_worker(workers, database_url, "--single", "--queues", "default=1")
    wait_until(lambda: job_row(conn, job_id)["state"] == "succeeded", timeout=15)
    assert [a["outcome"] for a in attempt_rows(conn, job_id)] == ["released", "succeeded"]


def test_second_sigterm_stops_at_once(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    job_id = enqueue(conn, "nap", {"seconds": 30})
    worker = start_worker(
        workers, database_url, "--single", "--queues", "default=1", "--grace", "60"
    )
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM started") == 1, timeout=10)
    worker.signal(signal.SIGTERM)
    worker.wait_for_line("stopping; grace")
    signalled = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(10) == 0
    assert time.monotonic() - signalled < 5
    assert job_row(conn, job_id)["state"] == "available"
    assert [a["outcome"] for a in attempt_rows(conn, job_id)] == ["released"]


def test_bad_settings_stop_the_start_with_one_sentence(database_url: str) -> None:
    worker = WorkerProcess(database_url, "--queues", "default=four")
    assert worker.wait() == 78
    assert worker.lines == [
        "worker.py: queues: 'default=four' should be NAME=THREADS with a whole number,"
        " e.g. default=4"
    ]
    worker = WorkerProcess(database_url, "--lease", "5", "--heartbeat", "10")
    assert worker.wait() == 78
    assert "heartbeat_seconds (10) must be at most half of lease_seconds (5)" in worker.lines[0]
    for threshold in ("0", "-5"):
        worker = WorkerProcess(database_url, "--gc-threshold", threshold)
        assert worker.wait() == 78
        assert worker.lines == [
            "worker.py: gc_threshold must be at least 1 (0 would turn the garbage collector off),"
            f" not {threshold}"
        ]


@pytest.mark.parametrize(
    ("variable", "value", "reason"),
    [
        ("OTEL_BSP_SCHEDULE_DELAY", "-5", "schedule_delay_millis must be positive"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "10", "max_export_batch_size must be less than or equal"),
        ("OTEL_METRIC_EXPORT_INTERVAL", "0", "interval value 0.0 is invalid"),
    ],
)
def test_telemetry_settings_the_sdk_refuses_stop_the_start_with_one_sentence(
    database_url: str, variable: str, value: str, reason: str
) -> None:
    """The SDK raised a bare ValueError for these, and the worker died with a traceback."""
    worker = WorkerProcess(
        database_url, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", variable: value}
    )
    assert worker.wait() == 78
    assert len(worker.lines) == 1
    assert worker.lines[0].startswith(
        f"worker.py: {variable}={value!r} is refused by the OpenTelemetry SDK ({reason}"
    )
    assert "): set " in worker.lines[0]


def test_a_worker_that_cannot_boot_says_why_with_a_named_exit_code(
    database_url: str, template_database: str
) -> None:
    bad_level = WorkerProcess(database_url, "--log-level", "chatty")
    assert bad_level.wait() == 78
    assert bad_level.lines == [
        "worker.py: log_level must be one of DEBUG, INFO, WARNING, ERROR, not 'chatty'"
    ]
    unreachable = WorkerProcess("postgresql://postgres@127.0.0.1:1/postgres", "--connect-wait", "0")
    assert unreachable.wait() == 69
    assert unreachable.lines[-1].startswith("worker.py: cannot reach the database within 0s:")
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("DROP TABLE job_attempts, jobs")
    unmigrated = WorkerProcess(database_url)
    assert unmigrated.wait() == 78
    assert unmigrated.lines == [
        "worker.py: the database has no jobs table: run `flask --app app db upgrade` first"
    ]
