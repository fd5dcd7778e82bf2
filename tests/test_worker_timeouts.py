"""Timeouts: an attempt past its timeout is recorded ``timed_out`` (retried or dead by its
policy), its lease is no longer renewed, its thread is given up, and its process drains and is
replaced by the supervisor. Real worker.py processes, real PostgreSQL, a real silent server."""

import math
import socket
import threading
from collections.abc import Iterator
from datetime import datetime
from itertools import pairwise
from typing import Any

import psycopg
import pytest

from jobqueue import EnqueueError, JobRequest, enqueue, enqueue_many
from tests.support.db import attempt_rows, create_test_tables, job_row, scalar
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]

FAST = ("--lease", "2", "--heartbeat", "0.5", "--sweep", "0.2", "--poll", "0.1")


@pytest.fixture(autouse=True)
def test_tables(conn: Conn) -> None:
    create_test_tables(conn)


@pytest.fixture
def silent_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """A loopback server that accepts connections and never answers; yields its port and the
    connections it accepted."""
    server = socket.create_server(("127.0.0.1", 0), backlog=16)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                peer, _ = server.accept()
            except OSError:
                return
            accepted.append(peer)

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1], accepted
    server.close()
    for peer in accepted:
        peer.close()


def test_a_task_hung_on_a_silent_server_times_out_three_times_then_dies_and_nothing_is_lost(
    conn: Conn,
    database_url: str,
    workers: list[WorkerProcess],
    silent_server: tuple[int, list[socket.socket]],
) -> None:
    port, accepted = silent_server
    supervisor = start_worker(workers, database_url, "--queues", "default=4", *FAST)
    # @task(timeout=2); this process does not import the task, so its budget is given here
    hung = enqueue(conn, "hangs_on_socket", {"port": port}, max_attempts=3)
    others = enqueue_many(conn, [JobRequest("record_run", {"pause": 0.5})] * 40)

    wait_until(lambda: job_row(conn, hung)["state"] == "dead", timeout=40)
    attempts = attempt_rows(conn, hung)
    assert [a["outcome"] for a in attempts] == ["timed_out"] * 3
    for attempt in attempts:
        assert attempt["error"].startswith("TimedOut: the attempt ran past its timeout of 2s")
        assert "recv" in attempt["traceback"], "the traceback shows where the thread was stuck"
        assert 2.0 <= attempt["duration"].total_seconds() < 3.0
    assert len(accepted) == 3, "each attempt reached the silent server"
    first_start: datetime = attempts[0]["started_at"]
    total = (job_row(conn, hung)["finished_at"] - first_start).total_seconds()
    gaps = [
        (later["started_at"] - earlier["finished_at"]).total_seconds()
        for earlier, later in pairwise(attempts)
    ]
    print(f"\nthree timed-out attempts then dead in {total:.2f}s; gaps between attempts {gaps}")
    # Each retry waits for its backoff and for a new child (the drain, then a fresh interpreter).
    assert total < 3 * (2 + 0.5) + 2 * 5

    # Every other job ran exactly once; none was released, failed or timed out.
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM runs") == len(others), timeout=30)
    assert scalar(conn, "SELECT count(DISTINCT job_id) FROM runs") == len(others)
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE state = 'succeeded'") == len(others)
    outcomes = conn.execute(
        "SELECT DISTINCT outcome FROM job_attempts WHERE job_id <> %s", (hung,)
    ).fetchall()
    assert outcomes == [("succeeded",)]
    # The jobs running beside the hung one in its child went on and finished there, after the
    # timeout fired (the timed-out attempt's row is written with the drain's last results, so
    # its finished_at can come after theirs: the timeout is when its duration ran out).
    first_child = attempts[0]["worker"]
    finished_beside = scalar(
        conn,
        "SELECT count(*) FROM runs WHERE worker = %s AND at > %s",
        first_child,
        attempts[0]["started_at"] + attempts[0]["duration"],
    )
    assert finished_beside >= 1

    # Each timeout recycled its child: three drained with a thread given up, a fourth serves.
    def recycled_children() -> list[tuple[str, int]]:
        return conn.execute(
            "SELECT name, abandoned_threads FROM workers WHERE parent_id IS NOT NULL"
            " AND state = 'stopped' ORDER BY id"
        ).fetchall()

    recycled = wait_until(lambda: len(recycled_children()) >= 3 and recycled_children(), timeout=30)
    assert [abandoned for _, abandoned in recycled] == [1, 1, 1]
    assert {name for name, _ in recycled} == {a["worker"] for a in attempts}
    wait_until(
        lambda: (
            scalar(
                conn,
                "SELECT count(*) FROM workers WHERE parent_id IS NOT NULL AND state = 'running'",
            )
            == 1
        ),
        timeout=15,
    )
    assert supervisor.log().count("recycled: it gave up threads to timed-out tasks") == 3
    assert "restarting in" not in supervisor.log(), "a recycled child is not a crash"


def test_the_context_reports_the_deadline_from_the_job_the_task_or_the_default(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    given = enqueue(conn, "watches_its_deadline", timeout=5)
    default = enqueue(conn, "watches_its_deadline")
    enqueued_at = scalar(conn, "SELECT now()")
    assert job_row(conn, given)["timeout_seconds"] == 5.0
    assert job_row(conn, default)["timeout_seconds"] is None
    start_worker(workers, database_url, "--single", "--queues", "default=2", "--timeout", "30")
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM runs") == 2, timeout=20)
    seen = dict(conn.execute("SELECT job_id, worker FROM runs").fetchall())
    for job_id, timeout in ((given, 5.0), (default, 30.0)):
        deadline_text, remaining_text = seen[job_id].split(" ")
        remaining = float(remaining_text)
        assert timeout - 2 < remaining <= timeout
        deadline = datetime.fromisoformat(deadline_text)
        lead = (deadline - enqueued_at).total_seconds()
        assert timeout - 1 < lead < timeout + 10


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, True, "5", 8 * 24 * 3600])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(
    conn: Conn, bad: Any
) -> None:
    with pytest.raises(EnqueueError, match="timeout must be"):
        enqueue(conn, "watches_its_deadline", timeout=bad)
    with pytest.raises(EnqueueError, match="timeout must be"):
        enqueue_many(conn, [JobRequest("watches_its_deadline", timeout=bad)])
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def test_enqueue_many_stores_each_job_its_own_timeout(conn: Conn) -> None:
    plain = [JobRequest("watches_its_deadline", timeout=1.5), JobRequest("watches_its_deadline")]
    keyed = [JobRequest("watches_its_deadline", timeout=3, unique_key="k")]
    ids = enqueue_many(conn, plain) + enqueue_many(conn, keyed)
    assert [job_row(conn, job_id)["timeout_seconds"] for job_id in ids] == [1.5, None, 3.0]
