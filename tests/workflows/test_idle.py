"""Waiting holds nothing: executions parked on an approval hold no worker thread and no
connection of a real worker.py, and its memory does not grow with them. (bench/workflow_idle.py
runs the long version: 10,000 executions, RSS sampled over minutes, the console list timed.)"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from tests.support.processes import WorkerProcess, start_worker, wait_until
from workflows import start_workflow

Conn = psycopg.Connection[Any]
TASKS = "tests.support.workflows"
THREADS = 4


@dataclass(frozen=True)
class Footprint:
    threads: int
    connections: int
    # in a transaction begun over a second ago: held, not one of the worker's own short
    # statements (a heartbeat, a claim's poll) that a snapshot may catch running
    busy_connections: int
    rss_kib: int


def footprint(conn: Conn, pid: int) -> Footprint:
    """The worker process's threads and resident memory (from /proc) and the connections to
    this database other than the test's own (from pg_stat_activity): all the worker's."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    rows = conn.execute(
        "SELECT state, xact_start < now() - interval '1 second' FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND backend_type = 'client backend'"
    ).fetchall()
    busy = sum(1 for state, held in rows if state not in ("idle", None) and held)
    return Footprint(len(list(Path(f"/proc/{pid}/task").iterdir())), len(rows), busy, rss)


def waiting(conn: Conn) -> int:
    row = conn.execute(
        "SELECT count(*) FROM workflow_executions AS e JOIN workflow_waits AS w"
        " ON w.execution_id = e.id AND w.satisfied_at IS NULL"
        " WHERE e.status = 'waiting' AND w.key = 'approval'"
    ).fetchone()
    return int(row[0]) if row else 0


def park(conn: Conn, worker: WorkerProcess, executions: int) -> Footprint:
    """Start ``executions`` approvals (one transaction), wait until they all wait, and return
    the worker's footprint once its slices are done."""
    before = waiting(conn)
    with conn.transaction():
        for _ in range(executions):
            start_workflow(conn, "approval", {"timeout": None})
    wait_until(lambda: waiting(conn) == before + executions, timeout=120, interval=0.1)
    live = "SELECT count(*) FROM jobs WHERE state IN ('available', 'running')"
    wait_until(lambda: conn.execute(live).fetchone() == (0,), timeout=30, interval=0.1)
    return footprint(conn, worker.pid)


def test_executions_waiting_on_approval_hold_no_thread_connection_or_memory(
    database_url: str, wf_conn: Conn, workers: list[WorkerProcess]
) -> None:
    worker = start_worker(workers, database_url, "--single", "--queues",
                          f"workflows={THREADS}", tasks=TASKS)  # fmt: skip
    warm = park(wf_conn, worker, 300)  # pools filled, code paths run, allocator warm
    parked = park(wf_conn, worker, 2000)
    assert waiting(wf_conn) == 2300
    # No thread and no connection for any of them: the threads are those it had with 300
    # waiting; the connections at most one per worker thread (its pool) and the process's own
    # five (fetch, completer, heartbeat, listener, maintenance), none in a transaction.
    assert parked.threads == warm.threads
    assert parked.connections <= THREADS + 5
    assert parked.busy_connections == 0
    # Memory: 2,000 more waiting executions are rows, not objects kept in the worker.
    assert parked.rss_kib - warm.rss_kib < 4096, (warm, parked)
