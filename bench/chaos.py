"""`make chaos`: many worker.py processes drain a ledgered queue while faults are injected.

On a PostgreSQL cluster of its own (devtools.cluster: it restarts the server), it enqueues
``--jobs`` jobs over two queues, starts ``--workers`` worker.py supervisors (each a child per
queue with ``--threads`` threads) and, while they drain, injects ``--faults`` faults picked at
random (seeded): SIGKILL of a child, SIGKILL of a whole worker.py (restarted, as systemd
would), SIGSTOP of a whole worker.py past its leases then SIGCONT, pg_terminate_backend of
random worker connections, and an immediate-mode restart of PostgreSQL; a tenth of the jobs is
held back until every kind has been injected once. Then it checks the
rows (devtools.invariants): every job succeeded, none lost or left running, runs beyond one
only where the attempt rows say a process was killed or frozen while it ran (or a connection
fault hit the task's own commit), and the per-minute stats equal the attempt rows. It prints
each fault with its recovery time and exits 1 if any check fails.

    python -m bench.chaos [--jobs 50000] [--workers 3] [--threads 8] [--faults 20] [--seed N]
"""

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from devtools.cluster import Cluster
from devtools.invariants import LedgerReport, ledger_report, stats_against_truth

ROOT = Path(__file__).resolve().parents[1]
QUEUES = ("default", "mail")
FAULT_KINDS = (
    "kill_child",
    "kill_worker",
    "stop_worker",
    "terminate_connections",
    "restart_postgres",
)


@dataclass(frozen=True)
class ChaosSettings:
    jobs: int = 50_000
    workers: int = 3
    threads: int = 8
    faults: int = 20
    pause: float = 0.04  # seconds each job works before recording its run
    seed: int = 1
    lease: float = 4.0
    heartbeat: float = 1.0
    gap: tuple[float, float] = (0.8, 2.0)  # seconds between faults
    timeout: float = 900.0

    def worker_args(self) -> list[str]:
        return [
            "--queues", ",".join(f"{queue}={self.threads}" for queue in QUEUES),
            "--tasks", "bench.chaos_tasks",
            "--lease", str(self.lease), "--heartbeat", str(self.heartbeat),
            "--sweep", "0.5", "--poll", "0.2", "--grace", "5",
            "--leader-lease-seconds", "2", "--lost-after-seconds", str(3 * self.heartbeat),
            "--restart-backoff-max-seconds", "2",
        ]  # fmt: skip


@dataclass
class Fault:
    kind: str
    target: str
    at: float  # monotonic
    victims: list[str] = field(default_factory=list)  # child processes cut off by it
    succeeded_before: int = 0
    recovered_after: float | None = None  # seconds


@dataclass
class ChaosResult:
    settings: ChaosSettings
    faults: list[Fault]
    ledger: LedgerReport
    stats_mismatches: dict[Any, Any]
    workers_left_live: int
    seconds: float

    @property
    def injected(self) -> list[Fault]:
        """The faults that hit something (none is injected while no target is up)."""
        return [fault for fault in self.faults if fault.target != "none live"]

    @property
    def valid(self) -> bool:
        """The rows are right, every kind of fault hit the fleet, and each that hit was
        recovered from. Fewer faults than planned is not a failure: injecting stops when the
        jobs are done (after every kind), and a fast machine gets there first."""
        return (
            self.ledger.valid
            and not self.stats_mismatches
            and self.workers_left_live == 0
            and {fault.kind for fault in self.injected} == set(FAULT_KINDS)
            and all(fault.recovered_after is not None for fault in self.injected)
        )


class Fleet:
    """The worker.py processes, restarted when a fault kills one (as systemd would)."""

    def __init__(self, url: str, settings: ChaosSettings, logs: Path) -> None:
        self.url = url
        self.settings = settings
        self.logs = logs
        self.processes: list[subprocess.Popen[bytes]] = []
        self.frozen: set[int] = set()
        self._starts = 0

    def start(self) -> subprocess.Popen[bytes]:
        self._starts += 1
        with (self.logs / f"worker-{self._starts}.log").open("wb") as log:  # the child keeps it
            process = subprocess.Popen(
                [sys.executable, "worker.py", *self.settings.worker_args()],
                cwd=ROOT,
                env={**os.environ, "DATABASE_URL": self.url},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.processes.append(process)
        return process

    def live(self) -> list[subprocess.Popen[bytes]]:
        return [p for p in self.processes if p.poll() is None and p.pid not in self.frozen]

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                if process.pid in self.frozen:
                    os.kill(process.pid, signal.SIGCONT)
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def supervisor_name(pid: int) -> str:
    return f"{socket.gethostname()}:{pid}:supervisor"


@contextmanager
def connection(url: str) -> Iterator[psycopg.Connection[Any] | None]:
    """A short-lived connection, or None while the server is down. A server that goes down
    while the caller uses it fails the caller's statement (psycopg.OperationalError)."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=2)
    except psycopg.OperationalError:
        yield None
        return
    with conn:
        yield conn


def children_of(url: str, pid: int) -> list[tuple[int, str]]:
    """(pid, name) of the live children of the supervisor with this pid."""
    with connection(url) as conn:
        if conn is None:
            return []
        rows = conn.execute(
            "SELECT pid, name FROM workers WHERE state IN ('running', 'draining')"
            " AND parent_id = (SELECT id FROM workers WHERE name = %s)",
            (supervisor_name(pid),),
        ).fetchall()
    return [(int(pid), name) for pid, name in rows if alive(int(pid))]


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie (a killed child not yet reaped still
    has a `running` row until the maintainers mark it lost)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def signal_processes(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass  # it died meanwhile (a child killed by an earlier fault)


def succeeded(url: str) -> int | None:
    with connection(url) as conn:
        if conn is None:
            return None
        return int(
            conn.execute("SELECT count(*) FROM jobs WHERE state = 'succeeded'").fetchone()[0]
        )  # type: ignore[index]


class Injector:
    def __init__(self, cluster: Cluster, url: str, fleet: Fleet, settings: ChaosSettings) -> None:
        self.cluster = cluster
        self.url = url
        self.fleet = fleet
        self.settings = settings
        self.random = random.Random(settings.seed)
        self.faults: list[Fault] = []
        self.interrupted: set[str] = set()
        self._lock = threading.Lock()

    def plan(self) -> list[str]:
        """Every kind once first, in a random order, then the rest at random: the reserve (see
        :func:`enqueue_jobs`) keeps the run going until each kind has hit the fleet."""
        kinds = list(FAULT_KINDS)
        self.random.shuffle(kinds)
        kinds += [self.random.choice(FAULT_KINDS) for _ in range(self.settings.faults - len(kinds))]
        return kinds

    def inject(self, kind: str) -> None:
        """Inject one fault of ``kind``, unless every job has succeeded since the drive looked: a
        fault then would hit a fleet with nothing left to do, and no later success could show
        it recovered (a CI run lost that race on 2026-12-03: its last fault "never" recovered,
        every job done, nothing lost)."""
        done = succeeded(self.url)
        if done is not None and done >= self.settings.jobs:
            return
        fault = Fault(kind, "", time.monotonic(), succeeded_before=done or 0)
        getattr(self, kind)(fault)
        with self._lock:
            self.interrupted.update(fault.victims)
            self.faults.append(fault)

    def _targets(self) -> list[tuple[subprocess.Popen[bytes], list[tuple[int, str]]]]:
        """Live, unfrozen worker.py processes whose children are all up, with those children;
        waits a little for one (a restarted worker.py takes a moment to start its children)."""
        deadline = time.monotonic() + 15
        while True:
            ready = [
                (process, children)
                for process in self.fleet.live()
                if len(children := children_of(self.url, process.pid)) == len(QUEUES)
            ]
            if ready or time.monotonic() > deadline:
                return ready
            time.sleep(0.2)

    def kill_child(self, fault: Fault) -> None:
        candidates = [child for _, children in self._targets() for child in children]
        if not candidates:
            fault.target = "none live"
            return
        pid, name = self.random.choice(candidates)
        fault.target, fault.victims = f"child {pid}", [name]
        signal_processes([pid], signal.SIGKILL)

    def kill_worker(self, fault: Fault) -> None:
        targets = self._targets()
        if not targets:
            fault.target = "none live"
            return
        process, children = self.random.choice(targets)
        # Children first: a child outliving its supervisor would drain instead of dying.
        signal_processes([pid for pid, _ in children], signal.SIGKILL)
        process.kill()
        process.wait()
        fault.target = f"worker.py {process.pid} and its {len(children)} children"
        fault.victims = [name for _, name in children]
        self.fleet.start()

    def stop_worker(self, fault: Fault) -> None:
        targets = self._targets()
        if not targets:
            fault.target = "none live"
            return
        process, children = self.random.choice(targets)
        pids = [process.pid, *(pid for pid, _ in children)]
        signal_processes(pids, signal.SIGSTOP)
        self.fleet.frozen.add(process.pid)
        fault.target = f"worker.py {process.pid} and its {len(children)} children"
        fault.victims = [name for _, name in children]

        def resume() -> None:
            signal_processes(pids, signal.SIGCONT)
            self.fleet.frozen.discard(process.pid)

        threading.Timer(self.settings.lease + 2 * self.settings.heartbeat + 1, resume).start()

    def terminate_connections(self, fault: Fault) -> None:
        with connection(self.url) as conn:
            if conn is None:
                fault.target = "server down"
                return
            pids = [
                row[0]
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                )
            ]
            chosen = self.random.sample(pids, max(1, len(pids) // 2)) if pids else []
            for pid in chosen:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        fault.target = f"{len(chosen)} of {len(pids)} connections"

    def restart_postgres(self, fault: Fault) -> None:
        down = self.cluster.restart("immediate")
        fault.target = f"down {down:.1f} s"

    def watch(self, done: threading.Event) -> None:
        """Resolve each fault's recovery time: every job its victims held is free again, and
        the succeeded count has grown since it."""
        while not done.wait(0.1):
            try:
                self._watch_once()
            except psycopg.OperationalError:
                continue  # the server went down under the watcher's query: look again

    def _watch_once(self) -> None:
        """One look: the succeeded count, and each pending fault's victims' held jobs."""
        with connection(self.url) as conn:
            if conn is None:
                return
            count = int(
                conn.execute("SELECT count(*) FROM jobs WHERE state = 'succeeded'").fetchone()[0]
            )  # type: ignore[index]
            with self._lock:
                pending = [f for f in self.faults if f.recovered_after is None]
            for fault in pending:
                held = 0
                if fault.victims:
                    held = int(
                        conn.execute(
                            "SELECT count(*) FROM jobs WHERE state = 'running'"
                            " AND locked_by = ANY (%s)",
                            (fault.victims,),
                        ).fetchone()[0]  # type: ignore[index]
                    )
                if held == 0 and count > fault.succeeded_before:
                    fault.recovered_after = round(time.monotonic() - fault.at, 2)


def migrate(url: str) -> None:
    from flask_migrate import upgrade

    from app import create_app
    from models import db

    app = create_app({"DATABASE_URL": url, "SECRET_KEY": "chaos"})
    with app.app_context():
        upgrade()
        db.engine.dispose()


RESERVE = 0.1  # of the jobs, held back until every kind of fault has hit the fleet once


def enqueue_jobs(url: str, settings: ChaosSettings) -> tuple[set[int], list[int]]:
    """Every job, and the reserve among them: the last tenth, scheduled a day ahead so that
    work is left for the fleet until the drive releases it. Without it a fast machine drained
    a short run before the last kind of fault came up."""
    import bench.chaos_tasks  # noqa: F401 - registers the task, so its retry policy applies
    from jobqueue import JobRequest, enqueue_many

    ids: set[int] = set()
    with psycopg.connect(url) as conn:
        conn.execute(
            "CREATE TABLE chaos_ledger (job_id bigint NOT NULL, attempt int NOT NULL,"
            " worker text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())"
        )
        held_from = settings.jobs - int(settings.jobs * RESERVE)
        requests = [
            JobRequest(
                "chaos_record",
                {"pause": settings.pause},
                queue=QUEUES[n % len(QUEUES)],
                delay=86_400 if n >= held_from else None,
            )
            for n in range(settings.jobs)
        ]
        reserve: list[int] = []
        for start in range(0, len(requests), 5000):
            batch = enqueue_many(conn, requests[start : start + 5000])
            ids.update(batch)
            reserve += [job_id for n, job_id in enumerate(batch, start) if n >= held_from]
        conn.commit()
    return ids, reserve


def release(url: str, reserve: list[int], deadline: float) -> None:
    """Make the reserve available now (the server may be restarting: try until it answers)."""
    while time.monotonic() < deadline:
        try:
            with connection(url) as conn:
                if conn is not None:
                    conn.execute(
                        "UPDATE jobs SET available_at = now()"
                        " WHERE id = ANY (%s) AND state = 'available' AND available_at > now()",
                        (reserve,),
                    )
                    for queue in QUEUES:
                        conn.execute("SELECT pg_notify('pauta_jobs', %s)", (queue,))
                    return
        except psycopg.OperationalError:
            pass
        time.sleep(0.2)


def drive(injector: Injector, url: str, settings: ChaosSettings, reserve: list[int]) -> None:
    """Inject the planned faults while the fleet drains, releasing the reserve once every kind
    has been injected, then wait for the last jobs and for every fault's recovery."""
    deadline = time.monotonic() + settings.timeout
    time.sleep(2.0)  # let the workers start and claim before the first fault
    for number, kind in enumerate(injector.plan()):
        if (succeeded(url) or 0) >= settings.jobs or time.monotonic() > deadline:
            break
        injector.inject(kind)
        if number == len(FAULT_KINDS) - 1:
            release(url, reserve, deadline)
        time.sleep(injector.random.uniform(*settings.gap))
    release(url, reserve, deadline)
    while (succeeded(url) or 0) < settings.jobs and time.monotonic() < deadline:
        time.sleep(0.5)
    settle_deadline = time.monotonic() + 30
    while time.monotonic() < settle_deadline and (
        any(f.recovered_after is None for f in injector.faults) or ghosts(url)
    ):
        time.sleep(0.2)


def ghosts(url: str) -> list[int]:
    """Pids of worker rows still `running` whose process is gone (the maintainers mark them
    lost after `lost_after_seconds`)."""
    with connection(url) as conn:
        if conn is None:
            return []
        rows = conn.execute(
            "SELECT pid FROM workers WHERE state IN ('running', 'draining')"
        ).fetchall()
    return [int(row[0]) for row in rows if not alive(int(row[0]))]


def run(settings: ChaosSettings, logs: Path | None = None) -> ChaosResult:
    started = time.monotonic()
    with Cluster() as cluster:
        logs = logs or cluster.folder
        url = cluster.create_database("chaos")
        migrate(url)
        enqueued, reserve = enqueue_jobs(url, settings)
        fleet = Fleet(url, settings, logs)
        injector = Injector(cluster, url, fleet, settings)
        done = threading.Event()
        try:
            for _ in range(settings.workers):
                fleet.start()
            watcher = threading.Thread(target=injector.watch, args=(done,), daemon=True)
            watcher.start()
            drive(injector, url, settings, reserve)
        finally:
            done.set()
            fleet.stop_all()
        with psycopg.connect(url, autocommit=True) as conn:
            left_live = int(
                conn.execute(
                    "SELECT count(*) FROM workers WHERE state IN ('running', 'draining')"
                ).fetchone()[0]  # type: ignore[index]
            )
            ledger = ledger_report(conn, enqueued, injector.interrupted)
            mismatches = stats_against_truth(conn)
    return ChaosResult(
        settings, injector.faults, ledger, mismatches, left_live, time.monotonic() - started
    )


def report(result: ChaosResult) -> str:
    ledger = result.ledger
    lines = [
        f"chaos: {result.settings.jobs:,} jobs, {result.settings.workers} worker.py x "
        f"{len(QUEUES)} queues x {result.settings.threads} threads, seed {result.settings.seed},"
        f" {result.seconds:.0f} s",
        "",
        "| # | fault | target | recovered after |",
        "|---|---|---|---|",
    ]
    for number, fault in enumerate(result.faults, 1):
        recovered = "never" if fault.recovered_after is None else f"{fault.recovered_after:.2f} s"
        lines.append(f"| {number} | {fault.kind} | {fault.target} | {recovered} |")
    lines += [
        "",
        f"succeeded: {ledger.succeeded:,} of {ledger.jobs:,}; lost: {len(ledger.lost)};"
        f" unexpected: {len(ledger.unexpected)}; left running: {ledger.left_running}",
        "runs beyond one: "
        + (", ".join(f"{n} {why}" for why, n in ledger.repeated.items()) or "none"),
        f"unexplained runs: {ledger.unexplained[:10] or 'none'}",
        f"stats differing from the attempt rows: {len(result.stats_mismatches)}",
        f"worker rows left live: {result.workers_left_live}",
        f"faults that hit: {len(result.injected)} of {result.settings.faults} planned"
        + (" (the jobs were done first)" if len(result.injected) < result.settings.faults else ""),
        "verdict: " + ("PASS" if result.valid else "FAIL"),
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="make chaos", description=__doc__)
    defaults = ChaosSettings()
    for name in ("jobs", "workers", "threads", "faults", "seed"):
        parser.add_argument(f"--{name}", type=int, default=getattr(defaults, name))
    parser.add_argument("--pause", type=float, default=defaults.pause)
    parser.add_argument("--json", help="also write the result as JSON to this file")
    parser.add_argument("--logs", type=Path, help="keep the worker.py logs in this folder")
    arguments = parser.parse_args(argv)
    settings = ChaosSettings(
        jobs=arguments.jobs,
        workers=arguments.workers,
        threads=arguments.threads,
        faults=arguments.faults,
        seed=arguments.seed,
        pause=arguments.pause,
    )
    if arguments.logs:
        arguments.logs.mkdir(parents=True, exist_ok=True)
    result = run(settings, arguments.logs)
    print(report(result))
    if arguments.json:
        Path(arguments.json).write_text(
            json.dumps(
                {
                    "settings": asdict(settings),
                    "faults": [asdict(fault) for fault in result.faults],
                    "valid": result.valid,
                    "seconds": result.seconds,
                },
                default=str,
                indent=2,
            )
        )
    return 0 if result.valid else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
