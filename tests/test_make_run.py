"""`make run` (devtools/run.py) as a real process tree: gunicorn, worker.py and the SMTP sink on
free ports, against a fresh database, with its var/ directory in a temporary one.

The first run builds the demo tenant and enqueues the demo jobs, printing one line about them
and no job ids; a later run enqueues none and does not call the cycle a draft once it was
activated. A worker shut down from the console (drained, exit 0) is started again while the
console stays up, and SIGTERM stops everything with exit 0. Ctrl-C at the terminal (SIGINT to
the whole process group) in the middle of the demo's enqueueing lets the command under way
finish, enqueues nothing more and stops everything with exit 0; during the migrations, it lets
them finish, starts nothing and says so in one sentence.
"""

import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench.machine import children
from devtools.run import DEMO_JOBS
from jobqueue.store import JobStore
from tests.support.db import scalar
from tests.support.processes import ROOT, wait_until
from tests.support.smtp import free_port

Conn = psycopg.Connection[Any]


class MakeRun:
    """`python -m devtools.run`, its output collected line by line, in a session of its own (as
    at a terminal, where Ctrl-C signals the whole foreground process group)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "devtools.run"], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:
            for line in self.process.stdout:
                self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 120) -> None:
        try:
            wait_until(lambda: any(text in line for line in self.lines), timeout=timeout)
        except AssertionError:
            raise AssertionError(f"{text!r} never printed:\n{self.output()}") from None

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(90)
        self._reader.join(5)
        return code

    def output(self) -> str:
        return "\n".join(self.lines)

    def ctrl_c_when(self, running: str) -> tuple[int, list[str], dict[int, str]]:
        """Once a child whose command line holds ``running`` is up, SIGINT to the whole process
        group (what Ctrl-C at the terminal sends); the exit code, those children's command
        lines, and every child there was then."""
        pid = self.process.pid
        try:
            matching = wait_until(
                lambda: [c for c in children_of(pid).values() if running in c], timeout=120
            )
            started = children_of(pid)
            os.killpg(pid, signal.SIGINT)
            code = self.process.wait(90)
            self._reader.join(5)
        finally:
            if self.process.poll() is None:
                self.stop()
        return code, matching, started


@pytest.fixture
def environment(database_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "PAUTA_VAR_DIR": str(tmp_path / "var"),
        "PORT": str(free_port()),
        "PAUTA_SMTP_SINK_PORT": str(free_port()),
    }
    yield env


def healthy(port: str) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
        return bool(response.status == 200)


def live_supervisors(conn: Conn) -> list[int]:
    return [row[0] for row in conn.execute(
        "SELECT pid FROM workers WHERE parent_id IS NULL AND queue IS NULL AND state = 'running'"
    )]  # fmt: skip


def test_make_run_seeds_once_restarts_a_drained_worker_and_stops_cleanly(
    environment: dict[str, str], conn: Conn
) -> None:
    first = MakeRun(environment)
    try:
        first.wait_for("Pauta console:")
        output = first.output()
        assert "Demo tenant 'demo': 40 employees and one draft cycle." in output
        assert "Demo jobs enqueued: 200 noop, 8 sleep of 2 s, 1 fail with 2 attempts, 1 noop in" \
            " 10 minutes." in output  # fmt: skip
        assert not [line for line in first.lines if re.fullmatch(r"\d+", line.strip())]
        assert scalar(conn, "SELECT count(*) FROM jobs WHERE task = 'fail'") == 1

        wait_until(lambda: len(live_supervisors(conn)) == 1, timeout=60)
        (old,) = live_supervisors(conn)
        supervisor = scalar(conn, "SELECT id FROM workers WHERE pid = %s", old)
        JobStore(conn).request_drain(supervisor, requested_by="a test")  # as the console does
        first.wait_for("worker.py drained and exited 0")
        wait_until(lambda: live_supervisors(conn) not in ([], [old]), timeout=60)
        assert healthy(environment["PORT"])  # the console stayed up
        assert first.process.poll() is None
    finally:
        assert first.stop() == 0, first.output()

    conn.execute("UPDATE review_cycles SET status = 'active', activated_at = now(),"
                 " participants_locked_at = now(),"
                 " activated_by = (SELECT min(id) FROM users)")  # fmt: skip
    second = MakeRun(environment)
    try:
        second.wait_for("Pauta console:")
        output = second.output()
        assert "draft" not in output and "Demo jobs enqueued" not in output
        assert "Demo tenant 'demo' (built on the first run). Log in with:" in output
        assert "platform-admin@demo.example" in output
        assert scalar(conn, "SELECT count(*) FROM jobs WHERE task = 'fail'") == 1
    finally:
        assert second.stop() == 0, second.output()


def children_of(pid: int) -> dict[int, str]:
    """The processes whose parent is ``pid``, with their command lines."""
    found = {}
    for child in children(pid):
        try:
            found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # it ended meanwhile
            continue
    return found


def test_ctrl_c_during_the_demo_lets_the_enqueue_under_way_finish_and_stops_cleanly(
    environment: dict[str, str], conn: Conn
) -> None:
    """kills: make-run-flask-in-the-terminals-group, make-run-demo-ignores-ctrl-c"""
    run = MakeRun(environment)
    code, enqueueing, started = run.ctrl_c_when(" jobs enqueue ")
    output = run.output()
    assert code == 0, output
    assert "Traceback" not in output and "Pauta console:" not in output, output
    # The command under way when the signal came finished, with the ones before it; none after.
    (under_way,) = [
        n for n, (_, arguments) in enumerate(DEMO_JOBS) if " ".join(arguments) in enqueueing[0]
    ]
    done = DEMO_JOBS[: under_way + 1]
    assert f"Demo jobs enqueued: {', '.join(name for name, _ in done)}." in run.lines, output
    expected = {}
    for _, (task, *rest) in done:
        count = int(rest[rest.index("--count") + 1]) if "--count" in rest else 1
        expected[task] = expected.get(task, 0) + count
    assert dict(conn.execute("SELECT task, count(*) FROM jobs GROUP BY task").fetchall()) == (
        expected
    )
    # and every child it had started is gone
    assert not [child for child in started if Path(f"/proc/{child}").exists()], started


def test_ctrl_c_during_the_migrations_lets_them_finish_and_starts_nothing(
    environment: dict[str, str], conn: Conn
) -> None:
    """kills: make-run-serves-after-ctrl-c"""
    head = scalar(conn, "SELECT version_num FROM alembic_version")
    # one revision back (0023 replaces a function: it runs again), so that the upgrade has work
    conn.execute("UPDATE alembic_version SET version_num = '0022_insert_trigger'")
    run = MakeRun(environment)
    code, _, _ = run.ctrl_c_when(" db upgrade")
    output = run.output()
    assert code == 0, output
    assert "Stopped by a signal while setting up; nothing was left running." in run.lines, output
    assert "Traceback" not in output and "Pauta console:" not in output, output
    assert scalar(conn, "SELECT version_num FROM alembic_version") == head  # it finished
    assert scalar(conn, "SELECT count(*) FROM workers") == 0  # no worker was started
    assert scalar(conn, "SELECT count(*) FROM tenants WHERE slug = 'demo'") == 0  # nor seeding
