"""What a skeptical review broke, tried again with real worker.py processes and real signals:
a whole worker.py frozen, deadlocks between a healthy worker's own writes, hostile error text,
and stats under dropped connections. Every verdict is read from the rows."""

import os
import signal
from typing import Any

import psycopg
import pytest

from devtools.invariants import stats_against_truth
from jobqueue import JobRequest, JobStore, enqueue_many
from models.people import Role
from tests.support.db import attempt_rows, create_test_tables, scalar, worker_processes
from tests.support.factories import login_as, make_user, seeding, system_tenant
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]

LEASE, HEARTBEAT = 2.0, 0.5
FAST = (
    "--lease", str(LEASE), "--heartbeat", str(HEARTBEAT), "--sweep", "0.2", "--poll", "0.1",
    "--leader-lease-seconds", "1",
)  # fmt: skip


@pytest.fixture(autouse=True)
def test_tables(conn: Conn) -> None:
    create_test_tables(conn)


def count(conn: Conn, where: str = "true") -> int:
    return int(scalar(conn, f"SELECT count(*) FROM jobs WHERE {where}"))


def leader(conn: Conn) -> tuple[str, int] | None:
    row = conn.execute(
        "SELECT holder, term FROM leaders WHERE name = 'maintenance' AND expires_at > now()"
    ).fetchone()
    return None if row is None else (row[0], int(row[1]))


def signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        os.kill(pid, signum)


def test_a_whole_worker_frozen_with_sigstop_is_rescued_by_another_and_fenced_when_it_wakes(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    """worker.py A (supervisor and child, every process of it) leads and holds running jobs;
    worker.py B runs beside it. A is frozen: B rescues A's jobs and starts them again within
    lease + two heartbeats of the freeze, completes them and takes over leadership. After
    SIGCONT, A's late completions are fenced out (its attempts stay 'lease_expired'), A steps
    down, and every job has exactly one succeeded attempt."""
    frozen = start_worker(workers, database_url, "--queues", "default=2", *FAST)
    wait_until(lambda: leader(conn), timeout=10)
    frozen_leader = leader(conn)
    assert frozen_leader is not None
    frozen_supervisor = frozen_leader[0]
    # The first attempt naps longer than B takes to start, so A still runs them when frozen.
    nap = {"seconds": 10.0, "later": 0.2}
    ids = enqueue_many(conn, [JobRequest("nap_then_record", nap)] * 2)
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM started") == 2, timeout=10)
    frozen_child = scalar(conn, "SELECT DISTINCT worker FROM started")
    start_worker(workers, database_url, "--queues", "default=2", *FAST)
    pids = worker_processes(conn, frozen_supervisor)
    assert len(pids) == 2  # A's supervisor and its child
    signal_all(pids, signal.SIGSTOP)
    frozen_at = scalar(conn, "SELECT clock_timestamp()")
    try:
        wait_until(lambda: count(conn, "state = 'succeeded'") == 2, timeout=30)
        wait_until(lambda: leader(conn) and leader(conn)[0] != frozen_supervisor, timeout=10)  # type: ignore[index]
        new_leader = leader(conn)
    finally:
        signal_all(pids, signal.SIGCONT)
    resumed_at = scalar(conn, "SELECT now()")
    rescued = scalar(
        conn, "SELECT max(finished_at) FROM job_attempts WHERE outcome = 'lease_expired'"
    )
    restarted = scalar(conn, "SELECT max(at) FROM started WHERE attempt = 2")
    assert (rescued - frozen_at).total_seconds() <= LEASE + 2 * HEARTBEAT
    assert (restarted - frozen_at).total_seconds() <= LEASE + 2 * HEARTBEAT
    assert new_leader is not None and new_leader[1] > frozen_leader[1]
    # A wakes: its threads finish their naps and its completer sends the stale results. Wait
    # until A's child has heartbeated since waking and holds nothing any more.
    wait_until(
        lambda: scalar(
            conn,
            "SELECT in_flight = 0 AND last_heartbeat_at > %s FROM workers WHERE name = %s",
            resumed_at,
            frozen_child,
        ),
        timeout=15,
        message="the frozen child never came back to an empty hand",
    )
    for job_id in ids:
        attempts = attempt_rows(conn, job_id)
        assert [(a["attempt"], a["outcome"], a["worker"] == frozen_child) for a in attempts] == [
            (1, "lease_expired", True),
            (2, "succeeded", False),
        ]
    frozen.wait_for_line(r"lost the maintenance leadership \(term \d+ is over", timeout=15)
    assert leader(conn) == new_leader  # A stepped down instead of leading again
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE state <> 'succeeded'") == 0


@pytest.mark.parametrize(
    "settings",
    [(), ("--lease", "2", "--heartbeat", "0.2")],
    ids=["default-lease", "lease-2s-heartbeat-0.2s"],
)
def test_twenty_thousand_jobs_on_eight_threads_without_a_deadlock_or_a_second_run(
    conn: Conn, database_url: str, workers: list[WorkerProcess], settings: tuple[str, ...]
) -> None:
    """One --single worker, 8 threads, 20,000 no-op jobs: the completer and the heartbeat write
    the same rows all the time. No deadlock (the server's own count), no lease expired, one
    succeeded attempt per job and no false "lost job" warning.
    kills: finish-lock-unordered, extend-lock-unordered, extend-lost-when-finished"""
    deadlocks_before = scalar(
        conn, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
    )
    enqueue_many(conn, [JobRequest("noop")] * 20_000)
    worker = start_worker(
        workers, database_url, "--single", "--queues", "default=8", "--poll", "0.1", *settings
    )
    wait_until(lambda: count(conn, "state = 'succeeded'") == 20_000, timeout=180, interval=0.5)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    deadlocks = scalar(
        conn, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
    )
    assert deadlocks - deadlocks_before == 0
    outcomes = dict(
        conn.execute("SELECT outcome, count(*) FROM job_attempts GROUP BY 1").fetchall()
    )
    assert outcomes == {"succeeded": 20_000}
    assert scalar(conn, "SELECT sum(succeeded) FROM job_stats_minute") == 20_000
    assert "lost job" not in worker.log()
    assert "connection lost" not in worker.log()


HOSTILE = ("raises_nul", "raises_surrogate", "raises_huge_message", "raises_huge_traceback")


def test_hostile_error_text_mixed_into_ordinary_jobs_kills_nothing(
    conn: Conn, database_url: str, workers: list[WorkerProcess], client: Any
) -> None:
    """A NUL byte, a lone surrogate, a 5 MB message and a 2 MB traceback among 1,000 ordinary
    jobs: no process exits, every ordinary job succeeds once, each hostile job is dead after its
    two attempts with a cleaned, cut error, and the console shows it.
    kills: text-not-cleaned, completer-no-fallback"""
    requests = [JobRequest("ledger_write") for _ in range(1000)]
    for position, task in enumerate(HOSTILE * 3):
        requests.insert(position * 80, JobRequest(task, max_attempts=2))
    enqueue_many(conn, requests)
    supervisor = start_worker(workers, database_url, "--queues", "default=4", *FAST)
    wait_until(lambda: count(conn, "state IN ('succeeded', 'dead')") == 1012, timeout=120)
    assert supervisor.process.poll() is None
    assert "exited with" not in supervisor.log() and "died" not in supervisor.log()
    assert scalar(conn, "SELECT count(*) FROM ledger") == 1000
    assert count(conn, "task = 'ledger_write' AND state = 'succeeded' AND attempt = 1") == 1000
    rows = conn.execute(
        "SELECT j.task, j.state, a.error, a.traceback FROM jobs j"
        " JOIN job_attempts a ON a.job_id = j.id WHERE j.task LIKE 'raises_%'"
    ).fetchall()
    assert len(rows) == 12 * 2
    for task, state, error, trace in rows:
        assert state == "dead"
        assert len(error.encode()) <= 2048 and len(trace.encode()) <= 32 * 1024
        assert "\x00" not in error + trace
        if task in ("raises_nul", "raises_surrogate"):
            assert "\ufffd" in error
        if task == "raises_huge_message":
            assert error.endswith("more bytes cut]")
        if task == "raises_huge_traceback":
            assert "bytes cut ...]" in trace and trace.rstrip().endswith("huge traceback")
    job_id = scalar(conn, "SELECT min(id) FROM jobs WHERE task = 'raises_huge_message'")
    with seeding(client.application) as session:
        admin = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
    login_as(client, admin)
    page = client.get(f"/jobs/{job_id}")
    assert page.status_code == 200
    assert "more bytes cut]" in page.get_data(as_text=True)


def test_stats_equal_the_truth_when_connections_are_terminated_during_the_run(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    """Every count is written in the statement that writes the result it counts, so neither a
    lost reply nor a killed connection can drop or double one. The depth sample is taken in
    one snapshot, so it equals the jobs table read in that snapshot."""
    tenant = scalar(conn, "INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme') RETURNING id")
    requests = (
        [JobRequest("record_run", {"pause": 0.002}) for _ in range(2000)]
        + [JobRequest("record_run", {"pause": 0.002}, tenant_id=tenant, queue="mail")] * 600
        + [JobRequest("flaky", {"failures": 1}, queue="mail") for _ in range(100)]
        + [JobRequest("always_fails", max_attempts=2) for _ in range(50)]
        + [JobRequest("refuses", tenant_id=tenant) for _ in range(30)]
    )
    total = len(requests)
    # A job scheduled for later in each (queue, tenant): every group stays live all run long.
    groups = [("default", None), ("default", tenant), ("mail", None), ("mail", tenant)]
    requests += [JobRequest("noop", queue=q, tenant_id=t, delay=3600) for q, t in groups]
    enqueue_many(conn, requests)
    supervisor = start_worker(workers, database_url, "--queues", "default=3,mail=2", *FAST)
    terminations = 0
    for threshold in (300, 900, 1500, 2100):
        wait_until(lambda t=threshold: scalar(conn, "SELECT count(*) FROM runs") >= t, timeout=60)  # type: ignore[misc]
        terminations += scalar(
            conn,
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        if threshold == 300:
            with psycopg.connect(database_url) as snapshot:
                snapshot.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                store = JobStore(snapshot)
                term = store.elect("depth-check", "test", 60)
                assert term is not None
                store.sample_depth(term)
                sampled = snapshot.execute(
                    "SELECT queue, tenant_id, available + scheduled, running, dead"
                    " FROM queue_depth_minute WHERE minute = date_trunc('minute', now())"
                ).fetchall()
                counted = snapshot.execute(
                    "SELECT queue, tenant_id, count(*) FILTER (WHERE state = 'available'),"
                    " count(*) FILTER (WHERE state = 'running'),"
                    " count(*) FILTER (WHERE state = 'dead') FROM jobs"
                    " WHERE state IN ('available', 'running', 'dead') GROUP BY 1, 2"
                ).fetchall()
                snapshot.rollback()
            assert sorted(sampled) == sorted(counted)
    assert terminations >= 4 * 5
    wait_until(lambda: count(conn, "state IN ('succeeded', 'dead')") == total, timeout=120)
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0
    assert "connection lost" in supervisor.log()  # the faults did happen
    assert stats_against_truth(conn) == {}
    totals = conn.execute("SELECT sum(succeeded), sum(dead) FROM job_stats_minute").fetchone()
    assert totals == (2700, 80)
    runtimes = scalar(
        conn,
        "SELECT abs(sum(runtime_sum) - (SELECT sum(extract(epoch FROM duration))"
        " FROM job_attempts WHERE outcome IN ('succeeded', 'failed'))) FROM job_stats_minute",
    )
    assert float(runtimes) < 0.001
