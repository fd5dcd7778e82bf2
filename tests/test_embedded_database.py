"""With DATABASE_URL unset, the flask commands and worker.py use the embedded PostgreSQL that
`make run` uses (pgserver, data in PAUTA_EMBEDDED_PGDATA), and say so; without one, the flask
command says in one sentence what to do, with no traceback. Real pgserver, real processes."""

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import ROOT, WorkerProcess, wait_until

BIN = Path(sys.executable).parent


def without_database(pgdata: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    return {**env, "PAUTA_EMBEDDED_PGDATA": str(pgdata), "SECRET_KEY": "test"}


def flask(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "flask"), "--app", "app", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def server_running(pgdata: Path) -> bool:
    return (pgdata / "postmaster.pid").exists()


@pytest.fixture
def pgdata(tmp_path: Path) -> Iterator[Path]:
    """A data directory for an embedded server of the test's own; stopped at the end."""
    path = tmp_path / "pgdata"
    yield path
    if server_running(path):
        ctl = Path(sys.prefix).glob("lib/python*/site-packages/pgserver/pginstall/bin/pg_ctl")
        subprocess.run([str(next(ctl)), "-D", str(path), "-m", "immediate", "stop"], check=False)


def test_without_an_embedded_server_the_command_says_what_to_do(pgdata: Path) -> None:
    done = flask(without_database(pgdata), "jobs", "stats")
    assert done.returncode == 2
    assert (
        "Error: DATABASE_URL is not set and this checkout has no embedded PostgreSQL yet: "
        "run `make run` once" in done.stderr
    )
    assert "Traceback" not in done.stderr and not pgdata.exists()


def test_the_cli_and_the_worker_find_the_embedded_server_that_make_run_uses(
    pgdata: Path,
) -> None:
    env = without_database(pgdata)
    created = subprocess.run(  # what `make run` does first
        [sys.executable, "-m", "devtools.database", str(BIN / "flask"), "--app", "app", "db",
         "upgrade"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert f"Using the embedded PostgreSQL (pgserver) with its data in {pgdata}." in created.stderr
    assert not server_running(pgdata)  # stopped when make run's command ended

    said = (
        "DATABASE_URL is unset: using the embedded PostgreSQL (pgserver) of `make run`, "
        f"with its data in {pgdata}."
    )
    enqueued = flask(env, "jobs", "enqueue", "noop", "--count", "3")
    assert enqueued.returncode == 0, enqueued.stderr
    assert said in enqueued.stderr and len(enqueued.stdout.split()) == 3
    assert not server_running(pgdata)  # the last process using it stopped it

    def succeeded() -> int:
        stats = flask(env, "jobs", "stats", "--json")
        assert stats.returncode == 0, stats.stderr
        return int(json.loads(stats.stdout)["queues"].get("default", {}).get("succeeded", 0))

    worker = WorkerProcess("", "--queues", "default=1", env=env)
    try:
        worker.wait_for_line(re.escape(f"worker.py: {said}"))
        worker.wait_ready()
        wait_until(lambda: succeeded() == 3, timeout=60)
        worker.signal(15)
        assert worker.wait() == 0
    finally:
        worker.kill()
    wait_until(lambda: not server_running(pgdata), timeout=30)
