"""A queue's rate limit holds across every worker process, enforced by the database in the
claim; raising it takes effect at once. Real worker.py processes and PostgreSQL. The full-size
run (2,000 jobs) is `python -m bench.rate_limit`; this one is scaled down to stay fast."""

from collections import Counter
from datetime import datetime
from typing import Any

import psycopg

from jobqueue import JobRequest, JobStore, enqueue_many
from tests.support.db import scalar
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]

HEARTBEAT = 1.0
WINDOW = 5.0


def starts_per_window(conn: Conn, since: datetime, until: datetime) -> list[int]:
    """Jobs started in each whole WINDOW from ``since`` up to ``until``."""
    rows = conn.execute(
        "SELECT floor(extract(epoch FROM started_at - %s) / %s)::int FROM jobs"
        " WHERE queue = 'limited' AND started_at >= %s AND started_at < %s",
        (since, WINDOW, since, until),
    ).fetchall()
    counted = Counter(row[0] for row in rows)
    whole = int((until - since).total_seconds() // WINDOW)
    return [counted.get(window, 0) for window in range(whole)]


def start_three(database_url: str, workers: list[WorkerProcess]) -> None:
    for _ in range(3):
        start_worker(
            workers, database_url, "--single", "--queues", "limited=8",
            "--rate-limits", "limited=20/s", "--heartbeat", str(HEARTBEAT), "--lease", "4",
        )  # fmt: skip


def test_three_workers_of_eight_threads_start_twenty_jobs_a_second_together(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    jobs = 400
    start_three(database_url, workers)  # all three up first: the windows measure the three
    enqueue_many(conn, [JobRequest("noop", queue="limited")] * jobs)
    wait_until(
        lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE state = 'succeeded'") == jobs,
        timeout=60,
    )
    first, last = conn.execute(
        "SELECT min(started_at), max(started_at) FROM jobs WHERE queue = 'limited'"
    ).fetchone()  # type: ignore[misc]
    windows = starts_per_window(conn, first, last)
    took = (last - first).total_seconds()
    print(f"\n{jobs} jobs started in {took:.1f}s: {jobs / took:.1f}/s; per 5 s: {windows}")
    assert len(windows) >= 3
    assert all(90 <= count <= 110 for count in windows), windows
    by_worker = scalar(conn, "SELECT count(DISTINCT worker) FROM job_attempts")
    assert by_worker == 3, "all three processes shared the limit"


def test_raising_the_limit_takes_effect_within_a_heartbeat(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    start_three(database_url, workers)
    enqueue_many(conn, [JobRequest("noop", queue="limited")] * 600)
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE started_at IS NOT NULL"))
    JobStore(conn).set_rate_limit("limited", 60, 1.0, "admin@example")  # as the console does
    raised_at = scalar(conn, "SELECT now()")
    wait_until(lambda: scalar(conn, "SELECT now() - %s > interval '6 s'", raised_at), timeout=30)
    after = starts_per_window(conn, raised_at, scalar(conn, "SELECT now()"))
    print(f"\nafter raising 20/s to 60/s, starts per 5 s: {after}")
    assert after and 0.85 * 300 <= after[0] <= 1.1 * 300, after
