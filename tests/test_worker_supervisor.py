"""worker.py as a supervisor of one child per queue: deploys, crashes, registry and stats."""

import os
import signal
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jobqueue import JobRequest, JobStore, enqueue, enqueue_many
from tests.support.db import attempt_rows, create_test_tables, job_row, scalar
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]

FAST = ("--lease", "2", "--heartbeat", "0.5", "--sweep", "0.2", "--poll", "0.1")


@pytest.fixture(autouse=True)
def test_tables(conn: Conn) -> None:
    create_test_tables(conn)


def count(conn: Conn, where: str = "true") -> int:
    return int(scalar(conn, f"SELECT count(*) FROM jobs WHERE {where}"))


def children(conn: Conn, state: str = "running") -> dict[str, tuple[int, str]]:
    """The live queue children in the registry: {queue: (pid, name)}."""
    rows = conn.execute(
        "SELECT queue, pid, name FROM workers WHERE parent_id IS NOT NULL AND state = %s",
        (state,),
    ).fetchall()
    return {queue: (pid, name) for queue, pid, name in rows}


def gone(pid: int) -> bool:
    """True once the process has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def test_sigterm_during_a_deploy_finishes_running_jobs_and_claims_nothing_more(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    requests = [
        JobRequest("nap", {"seconds": 1 + (n % 3)}, queue=("alpha", "beta")[n % 2])
        for n in range(200)
    ]
    enqueue_many(conn, requests)
    supervisor = start_worker(workers, database_url, "--queues", "alpha=8,beta=8", "--poll", "0.1")
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM started") >= 16, timeout=10)
    signalled_at = scalar(conn, "SELECT clock_timestamp()")
    supervisor.signal(signal.SIGTERM)
    started = time.monotonic()
    assert supervisor.wait(40) == 0
    assert time.monotonic() - started < 25, "the drain must end within the grace period"
    assert count(conn, "state = 'running'") == 0
    late_claims = scalar(
        conn,
        "SELECT count(*) FROM jobs WHERE started_at > %s + interval '200 milliseconds'",
        signalled_at,
    )
    assert late_claims == 0
    unfinished = scalar(
        conn,
        "SELECT count(*) FROM started s JOIN jobs j ON j.id = s.job_id"
        " WHERE j.state <> 'succeeded'",
    )
    assert unfinished == 0, "every job that had started must have finished"
    finished = count(conn, "state = 'succeeded'")
    assert finished == scalar(conn, "SELECT count(*) FROM started")
    assert count(conn, "state = 'available'") == 200 - finished
    assert scalar(conn, "SELECT count(*) FROM job_attempts WHERE outcome <> 'succeeded'") == 0
    states = {row[0] for row in conn.execute("SELECT DISTINCT state FROM workers")}
    assert states == {"stopped"}


def test_a_job_longer_than_the_grace_period_is_released_then_completed_once(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    job_id = enqueue(conn, "nap", {"seconds": 4})
    supervisor = start_worker(workers, database_url, "--queues", "default=1", "--grace", "1")
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM started") == 1, timeout=10)
    supervisor.signal(signal.SIGTERM)
    assert supervisor.wait(20) == 0
    assert [a["outcome"] for a in attempt_rows(conn, job_id)] == ["released"]
    assert job_row(conn, job_id)["state"] == "available"
    start_worker(workers, database_url, "--queues", "default=1")
    wait_until(lambda: job_row(conn, job_id)["state"] == "succeeded", timeout=20)
    assert [a["outcome"] for a in attempt_rows(conn, job_id)] == ["released", "succeeded"]


def test_a_child_killed_mid_run_is_restarted_and_nothing_is_lost(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    enqueue_many(conn, [JobRequest("record_run", {"pause": 0.002})] * 5000)
    # Leases long enough that a busy machine cannot starve the surviving child's heartbeat.
    leases = ("--lease", "5", "--heartbeat", "1", "--sweep", "0.2", "--poll", "0.1")
    supervisor = start_worker(workers, database_url, "--queues", "default=8", *leases)
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM runs") >= 1000, timeout=30)
    [(pid, killed_name)] = children(conn).values()
    os.kill(pid, signal.SIGKILL)
    supervisor.wait_for_line(rf"child {pid} for queue default died \(killed by SIGKILL\)")
    supervisor.wait_for_line(r"started child \d+ for queue default", timeout=10)
    wait_until(lambda: count(conn, "state = 'succeeded'") == 5000, timeout=120)
    assert count(conn, "state <> 'succeeded'") == 0
    assert scalar(conn, "SELECT count(DISTINCT job_id) FROM runs") == 5000
    # A job ran twice only if the killed child held it when it died.
    twice = {
        row[0] for row in conn.execute("SELECT job_id FROM runs GROUP BY 1 HAVING count(*) > 1")
    }
    held_by_killed = {
        row[0]
        for row in conn.execute(
            "SELECT job_id FROM job_attempts WHERE outcome = 'lease_expired' AND worker = %s",
            (killed_name,),
        )
    }
    assert twice <= held_by_killed
    assert held_by_killed, "the killed child held jobs: their leases must have expired"


def test_children_drain_and_exit_when_the_supervisor_is_killed(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    ids = enqueue_many(conn, [JobRequest("nap", {"seconds": 1})] * 6)
    supervisor = start_worker(
        workers, database_url, "--queues", "default=2,other=1", "--grace", "5", *FAST
    )
    wait_until(lambda: len(children(conn)) == 2, timeout=10)
    pids = [pid for pid, _ in children(conn).values()]
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM started") >= 2, timeout=10)
    supervisor.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    wait_until(lambda: all(gone(pid) for pid in pids), timeout=10)
    assert time.monotonic() - killed_at < 5 + 1, "no orphan may outlive the grace period"
    assert count(conn, "state = 'running'") == 0  # they drained: nothing waits for a lease
    start_worker(workers, database_url, "--queues", "default=2", *FAST)
    wait_until(lambda: all(job_row(conn, j)["state"] == "succeeded" for j in ids), timeout=30)


def test_terminated_database_connections_are_reopened_and_nothing_is_lost(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    enqueue_many(conn, [JobRequest("record_run", {"pause": 0.003})] * 2000)
    supervisor = start_worker(workers, database_url, "--queues", "default=4", *FAST)
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM runs") >= 300, timeout=30)
    terminated = scalar(
        conn,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    assert terminated >= 5  # listener, fetcher, completer, heartbeat, leader, task pool
    supervisor.wait_for_line(r"database connection lost", timeout=10)
    wait_until(lambda: count(conn, "state = 'succeeded'") == 2000, timeout=120)
    assert count(conn, "state <> 'succeeded'") == 0
    assert scalar(conn, "SELECT count(DISTINCT job_id) FROM runs") == 2000
    twice = scalar(
        conn, "SELECT count(*) FROM (SELECT job_id FROM runs GROUP BY 1 HAVING count(*) > 1) d"
    )
    expired = scalar(conn, "SELECT count(*) FROM job_attempts WHERE outcome = 'lease_expired'")
    assert twice <= expired


def test_a_stopped_child_resumed_after_its_leases_expired_cannot_overwrite(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    ids = enqueue_many(conn, [JobRequest("nap", {"seconds": 1.5})] * 2)
    start_worker(workers, database_url, "--queues", "default=2", *FAST)
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM started") == 2, timeout=10)
    [(pid, frozen_name)] = children(conn).values()
    os.kill(pid, signal.SIGSTOP)
    try:
        start_worker(workers, database_url, "--single", "--queues", "default=2", *FAST)
        wait_until(lambda: count(conn, "state = 'succeeded'") == 2, timeout=20)
    finally:
        os.kill(pid, signal.SIGCONT)
    resumed_at = scalar(conn, "SELECT now()")
    # Sync on the rows: the child has heartbeated since it woke and holds nothing any more, so
    # its late results have been sent (and fenced out).
    wait_until(
        lambda: scalar(
            conn,
            "SELECT in_flight = 0 AND last_heartbeat_at > %s FROM workers WHERE name = %s",
            resumed_at,
            frozen_name,
        ),
        timeout=15,
    )
    for job_id in ids:
        attempts = attempt_rows(conn, job_id)
        assert [(a["attempt"], a["outcome"]) for a in attempts] == [
            (1, "lease_expired"),
            (2, "succeeded"),
        ]
        assert attempts[0]["worker"] == frozen_name != attempts[1]["worker"]
        assert job_row(conn, job_id)["state"] == "succeeded"


def test_a_drain_asked_through_the_database_is_handled_like_sigterm(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    supervisor = start_worker(
        workers, database_url, "--queues", "default=1,mail=1", "--heartbeat", "0.5"
    )
    wait_until(lambda: len(children(conn)) == 2, timeout=10)
    supervisor_row = scalar(conn, "SELECT id FROM workers WHERE parent_id IS NULL")
    asked = JobStore(conn).request_drain(supervisor_row, requested_by="admin@example.com")
    assert len(asked) == 3
    assert supervisor.wait(15) == 0
    rows = conn.execute("SELECT state, drain_requested_by FROM workers").fetchall()
    assert rows == [("stopped", "admin@example.com")] * 3


def test_a_silent_worker_is_marked_lost_by_a_maintainer(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    doomed = start_worker(workers, database_url, "--single", "--queues", "default=1", *FAST)
    name = scalar(conn, "SELECT name FROM workers")
    doomed.kill()
    start_worker(workers, database_url, "--queues", "other=1", *FAST, "--lost-after-seconds", "1.5")
    wait_until(
        lambda: scalar(conn, "SELECT state FROM workers WHERE name = %s", name) == "lost",
        timeout=10,
    )


def test_settings_come_from_the_toml_file_and_the_command_line_wins(
    conn: Conn, database_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    config = tmp_path / "pauta.toml"
    config.write_text(
        '[worker]\ngrace_seconds = 7\nlog_format = "json"\n\n'
        "[worker.queues]\nmail = 2\nreports = 1\n"
    )
    supervisor = start_worker(
        workers, database_url, "--config", str(config), "--queues", "mail=3", ready=False
    )
    supervisor.wait_for_line(r'"message": "worker \S+ ready; queues mail=3"')
    assert scalar(conn, "SELECT threads FROM workers WHERE queue = 'mail'") == 3
    assert scalar(conn, "SELECT count(*) FROM workers WHERE queue = 'reports'") == 0
    enqueue(conn, "fail", queue="mail", max_attempts=1)
    line = supervisor.wait_for_line(r'"outcome": "dead"')
    assert '"task": "fail"' in line and '"queue": "mail"' in line and '"attempt": 1' in line


def test_the_children_run_with_the_garbage_collector_threshold_they_were_given(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    """The setting reaches the queue children through the supervisor's settings.
    kills: worker-ignores-gc-threshold"""
    probe = enqueue(conn, "reports_gc_threshold")
    start_worker(workers, database_url, "--queues", "default=1", "--gc-threshold", "4321")
    wait_until(lambda: job_row(conn, probe)["state"] == "dead", timeout=20)
    assert job_row(conn, probe)["last_error"] == "PermanentError: gc threshold 4321"


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[worker]\ngrace_seconds = 'soon'\n", "grace_seconds must be a number of seconds"),
        ("[worker]\nthreads = 4\n", "has an unknown setting worker.threads"),
        ("[worker.queues]\nmail = 0\n", "queues: mail needs 1 to 1000 threads, not 0"),
        ("[worker\n", "is not valid TOML"),
    ],
)
def test_a_bad_config_file_stops_the_start_with_one_sentence(
    database_url: str, tmp_path: Path, toml: str, message: str
) -> None:
    config = tmp_path / "pauta.toml"
    config.write_text(toml)
    worker = WorkerProcess(database_url, "--config", str(config))
    assert worker.wait() == 78
    assert len(worker.lines) == 1 and message in worker.lines[0]


def test_a_child_that_cannot_boot_stops_the_supervisor_for_good(
    database_url: str, workers: list[WorkerProcess]
) -> None:
    supervisor = start_worker(
        workers,
        database_url,
        "--queues",
        "default=1",
        tasks="tests.support.tasks,tests.support.broken_in_children",
        ready=False,
    )
    assert supervisor.wait(20) == 78
    assert any("cannot boot (exit 78); stopping for good" in line for line in supervisor.lines)
    assert sum("started child" in line for line in supervisor.lines) == 1
