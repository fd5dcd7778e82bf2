"""Fair shares between tenants in one queue: a tenant's burst delays another tenant's jobs by
about one claim, not by the burst. Real worker.py processes and PostgreSQL."""

import statistics
import time
from typing import Any

import psycopg
import pytest

from jobqueue import JobRequest, enqueue_many
from tests.support.db import scalar
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]

BURST = 50_000
SMALL = 100
JOB_SECONDS = 0.01


def tenant(conn: Conn, slug: str) -> int:
    return int(
        scalar(conn, "INSERT INTO tenants (slug, name) VALUES (%s, %s) RETURNING id", slug, slug)
    )


def waits(conn: Conn, tenant_id: int) -> list[float]:
    """Seconds from visible to claimed, of the tenant's jobs that have started."""
    rows = conn.execute(
        "SELECT extract(epoch FROM started_at - available_at)::float8 FROM jobs"
        " WHERE tenant_id = %s AND started_at IS NOT NULL",
        (tenant_id,),
    ).fetchall()
    return [row[0] for row in rows]


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


@pytest.mark.parametrize("fair", [True, False], ids=["fair", "fifo"])
def test_a_burst_of_one_tenant_delays_another_by_about_one_claim(
    conn: Conn, database_url: str, workers: list[WorkerProcess], fair: bool
) -> None:
    a, b = tenant(conn, "burst"), tenant(conn, "small")
    setting = ("--fair-tenants", "true" if fair else "false")
    start_worker(workers, database_url, "--queues", "default=8", "--poll", "0.1", *setting)
    burst = [JobRequest("sleep", {"seconds": JOB_SECONDS}, tenant_id=a)]
    for _ in range(BURST // 10_000):
        enqueue_many(conn, burst * 10_000)
    time.sleep(1.0)
    enqueue_many(conn, [JobRequest("sleep", {"seconds": JOB_SECONDS}, tenant_id=b)] * SMALL)
    b_enqueued = time.monotonic()
    if fair:
        wait_until(
            lambda: (
                scalar(
                    conn,
                    "SELECT count(*) FROM jobs WHERE tenant_id = %s AND state = 'succeeded'",
                    b,
                )
                == SMALL
            ),
            timeout=60,
        )
    else:
        time.sleep(10)  # enough to show FIFO order; the burst would take minutes to drain
    seconds = time.monotonic() - b_enqueued
    a_done = scalar(
        conn, "SELECT count(*) FROM jobs WHERE tenant_id = %s AND state = 'succeeded'", a
    )
    ran_for = scalar(
        conn,
        "SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8 FROM jobs"
        " WHERE finished_at IS NOT NULL",
    )
    rate = a_done / max(ran_for or 0.0, 1e-3)
    b_waits = waits(conn, b)
    label = "fair shares" if fair else "plain FIFO"
    if b_waits:
        summary = f"p50 {statistics.median(b_waits):.3f}s, p99 {p99(b_waits):.3f}s"
    else:
        summary = f"none started in {seconds:.1f}s"
    ahead = scalar(
        conn, "SELECT count(*) FROM jobs WHERE tenant_id = %s AND state = 'available'", a
    )
    print(
        f"\n{label}: tenant B's {SMALL} waits: {summary}; {len(b_waits)} started;"
        f" tenant A: {a_done} done, {ahead} still waiting, at about {rate:.0f} jobs/s"
        f" (B behind all of A would wait about {BURST / rate:.0f}s)"
    )
    if fair:
        assert len(b_waits) == SMALL
        assert p99(b_waits) < 2.0
    else:
        assert len(b_waits) < SMALL, "in plain order B waits behind the whole burst"
