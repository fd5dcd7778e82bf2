"""Worker hosts whose clocks are ten minutes off change nothing: every time the engine compares
is the database's ``now()``. One worker.py runs under libfaketime (Debian's ``faketime``
package) ten minutes ahead, another ten minutes behind, on the same queue.

Only the wall clock is moved (``FAKETIME_DONT_FAKE_MONOTONIC=1``), as on a host whose clock is
wrong. Bookworm's libfaketime 0.9.10 breaks Python 3.11's sleeps in that mode, so a small shim
(tests/support/monotonic_sleep.c, compiled here) is loaded in front of it."""

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jobqueue import enqueue
from tests.support.db import create_test_tables, scalar
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
SHIM = Path(__file__).parent / "support" / "monotonic_sleep.c"
LEASE = 6.0
FAST_RETRY_DELAYS = [0.2, 0.4, 0.5, 0.5]  # tests.support.tasks.FAST_RETRY after attempts 1 to 4
SKEW_PROBE = (
    "import threading, time; t = time.monotonic(); time.sleep(0.05);"
    " threading.Event().wait(0.05); print(time.time(), time.monotonic() - t)"
)


@pytest.fixture(scope="module")
def preload(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """LD_PRELOAD for a process whose wall clock libfaketime moves."""
    compiler = shutil.which("cc")
    if not LIBFAKETIME.exists():
        pytest.skip(f"no {LIBFAKETIME} (Debian package faketime; .ci/run installs it)")
    if compiler is None:
        pytest.skip("no C compiler for the libfaketime 0.9.10 shim")
    shim = tmp_path_factory.mktemp("faketime") / "monotonic_sleep.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", shim, SHIM, "-ldl"], check=True)
    yield f"{shim}:{LIBFAKETIME}"


def skewed(preload: str, offset: str) -> dict[str, str]:
    return {"LD_PRELOAD": preload, "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


@pytest.mark.parametrize("offset", ["+10m", "-10m"])
def test_libfaketime_moves_a_pythons_wall_clock_and_leaves_its_sleeps(
    preload: str, offset: str
) -> None:
    """The set-up works, so the test below is not vacuous: the wall clock is ten minutes off,
    and sleeps and timed waits last what they say."""
    shown = subprocess.run(
        [sys.executable, "-c", SKEW_PROBE],
        env={**os.environ, **skewed(preload, offset)},
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    wall, slept = map(float, shown.stdout.split())
    assert abs(wall - time.time() - (600 if offset == "+10m" else -600)) < 10
    assert 0.1 <= slept < 0.5


def test_workers_ten_minutes_ahead_and_behind_run_nothing_early_and_keep_leases_and_backoff(
    conn: Conn, database_url: str, workers: list[WorkerProcess], preload: str
) -> None:
    create_test_tables(conn)
    args = ("--single", "--queues", "default=3", "--poll", "0.2", "--prefetch", "0")
    args += ("--lease", str(LEASE), "--heartbeat", "2")
    for offset in ("+10m", "-10m"):
        start_worker(workers, database_url, *args, env=skewed(preload, offset))

    scheduled = [enqueue(conn, "record_run", delay=2) for _ in range(6)]
    failing = enqueue(conn, "always_fails")
    napping = enqueue(conn, "nap", {"seconds": 3})

    # Leases run for lease_seconds of database time from the claim, whoever claimed.
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM started WHERE job_id = %s", napping))
    remaining = scalar(
        conn, "SELECT extract(epoch FROM lease_expires_at - now()) FROM jobs WHERE id = %s", napping
    )
    assert 0 < float(remaining) <= LEASE

    wait_until(
        lambda: (
            scalar(conn, "SELECT count(*) FROM jobs WHERE state IN ('succeeded', 'dead')")
            == len(scheduled) + 2
        ),
        timeout=30,
    )
    # No scheduled job started before its time.
    early = scalar(
        conn,
        "SELECT count(*) FROM job_attempts a JOIN jobs j ON j.id = a.job_id"
        " WHERE j.id = ANY(%s) AND a.started_at < j.available_at",
        scheduled,
    )
    assert early == 0
    late = scalar(
        conn,
        "SELECT max(a.started_at - j.available_at) FROM job_attempts a"
        " JOIN jobs j ON j.id = a.job_id WHERE j.id = ANY(%s)",
        scheduled,
    )
    assert late.total_seconds() < 2.0
    # Each retry waited its backoff, in database time, whichever worker ran the attempt before.
    attempts = conn.execute(
        "SELECT started_at, finished_at, worker FROM job_attempts WHERE job_id = %s"
        " ORDER BY attempt",
        (failing,),
    ).fetchall()
    assert len(attempts) == 5
    for delay, before, after in zip(FAST_RETRY_DELAYS, attempts, attempts[1:], strict=False):
        waited = (after[0] - before[1]).total_seconds()
        assert delay - 0.01 <= waited < delay + 2.0, (delay, waited)
    runners = scalar(conn, "SELECT count(DISTINCT worker) FROM job_attempts")
    assert runners == 2, "both skewed workers should have run jobs"
