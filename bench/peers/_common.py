"""Machinery shared by the peer adapters.

Every adapter subclasses `PeerBase` and supplies the library-specific parts (schema, enqueue
calls, what "completed" means in the database, the worker runner). `PeerBase` implements the
measurement protocol once, so every system is measured identically:

* Each adapter names its ``PROFILES``: ``defaults`` (the library as its documentation sets it
  up, with only the benchmark's concurrency given) and ``best`` (the knobs its own
  documentation offers for throughput, said in the adapter's docstring). A runner is started
  with ``--profile``; producers use the profile's client too.
* ``concurrency`` is the number of jobs a runner handles at once (threads, tasks or permits);
  how it fetches them (batch size, prefetch) is left as the library recommends.

* ``enqueue_single``/``enqueue_bulk`` time only the enqueue calls (client already connected).
* ``drain`` bulk-inserts the jobs untimed, starts one runner subprocess, and measures from the
  first handler start (reported by the runner) to the moment the driver, polling the database
  every 5 ms, sees all jobs completed.
* ``pickup_latency`` starts an idle runner (concurrency 1), confirms it is working with a
  warm-up job, then enqueues jobs one per transaction at a fixed cadence and compares each
  handler start with the time just after the enqueue call returned.

Runner subprocesses write ``"<seq> <time.time()>"`` lines to an events file; the handler
takes its timestamp before anything else.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar

import psycopg

from bench.machine import cpu_seconds

POLL_INTERVAL = 0.005  # driver-side database polling during drain
EVENTS_POLL_INTERVAL = 0.01  # driver-side polling of the runner's events file
DRAIN_TIMEOUT = 900.0
RUNNER_READY_TIMEOUT = 60.0
PICKUP_TIMEOUT = 60.0
SETTLE_SECONDS = 0.5  # idle time after the warm-up job so the runner waits for work
STOP_GRACE_SECONDS = 10.0
DRAIN_INSERT_BATCH = 1000
WARMUP_SEQ = -1


@dataclass(frozen=True)
class EnqueueRun:
    """Result of enqueueing jobs one per transaction."""

    elapsed: float  # perf_counter seconds from the first call to the last return
    stamps: list[float]  # time.time() just after each enqueue returned


@dataclass(frozen=True)
class DrainRun:
    """The moments of one drain (``time.time()`` seconds), and the runner's CPU when asked."""

    first: float  # the first handler's start
    drained: float  # when every job was seen completed
    end: float  # the drained moment, or when the telemetry of every attempt had arrived
    runner_cpu: float | None  # CPU seconds of the runner from its first attempt to drained

    def jobs_per_s(self, n: int) -> float:
        return n / (self.end - self.first)


class Pacer:
    """Start-to-start pacing of a loop at a fixed interval."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._next = time.perf_counter()

    def delay(self) -> float:
        """Seconds to sleep before the next iteration."""
        self._next += self._interval
        return max(0.0, self._next - time.perf_counter())


def enqueue_each_paced(
    enqueue_one: Callable[[int], object], seqs: Sequence[int], interval: float
) -> EnqueueRun:
    """Call ``enqueue_one(seq)`` for each seq, ``interval`` seconds apart start to start (0: no
    wait), stamping each return: the loop of every synchronous adapter's ``_enqueue_each``."""
    stamps: list[float] = []
    pacer = Pacer(interval)
    started = time.perf_counter()
    for seq in seqs:
        enqueue_one(seq)
        stamps.append(time.time())
        if interval:
            time.sleep(pacer.delay())
    return EnqueueRun(time.perf_counter() - started, stamps)


class Recorder:
    """Handler-side event log: the first handler start only, or every handler start."""

    def __init__(self, path: str, record_all: bool) -> None:
        self._file = open(path, "a")
        self._record_all = record_all
        self._recorded = False

    def record(self, seq: int) -> None:
        now = time.time()
        if self._record_all or not self._recorded:
            self._file.write(f"{seq} {now!r}\n")
            self._file.flush()
            self._recorded = True


@dataclass(frozen=True)
class RunnerArgs:
    dsn: str
    concurrency: int
    recorder: Recorder
    profile: str


def parse_runner_args(argv: Sequence[str] | None = None) -> RunnerArgs:
    """Parse the command line that `RunnerProcess` gives a peer module's runner."""
    parser = argparse.ArgumentParser(description="Benchmark runner for one peer job queue.")
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--record", choices=("first", "all"), required=True)
    parser.add_argument("--profile", choices=("defaults", "best"), default="defaults")
    args = parser.parse_args(argv)
    start_parent_watchdog()
    recorder = Recorder(args.events, args.record == "all")
    return RunnerArgs(args.dsn, args.concurrency, recorder, args.profile)


def start_parent_watchdog(interval: float = 1.0) -> None:
    """Exit the runner if the process that started it goes away, so runners never leak."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(3)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


class RunnerProcess:
    """One runner subprocess (``python -m <peer module>``), always stopped on exit."""

    def __init__(
        self,
        module: str,
        dsn: str,
        concurrency: int,
        record_all: bool,
        profile: str,
        environment: dict[str, str],
    ) -> None:
        self._module = module
        self._dsn = dsn
        self._concurrency = concurrency
        self._record_all = record_all
        self._profile = profile
        self._environment = environment
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-peer-")
        self._events = Path(self._tmp.name) / "events"
        self._log = Path(self._tmp.name) / "runner.log"
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> RunnerProcess:
        try:
            self._start()
        except BaseException:
            self._tmp.cleanup()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._stop()
        finally:
            self._tmp.cleanup()

    def _start(self) -> None:
        self._events.touch()
        root = _import_root(self._module)
        env = {**os.environ, **self._environment}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        command = [
            sys.executable,
            "-m",
            self._module,
            "--dsn",
            self._dsn,
            "--concurrency",
            str(self._concurrency),
            "--events",
            str(self._events),
            "--record",
            "all" if self._record_all else "first",
            "--profile",
            self._profile,
        ]
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(
                command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def _stop(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    @property
    def pid(self) -> int:
        """The runner process's id (for readings of its CPU time)."""
        assert self._proc is not None
        return self._proc.pid

    def check_alive(self) -> None:
        """Raise if the runner has exited, showing the end of its output."""
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            tail = self._log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"runner {self._module} exited with code {code}:\n{tail}")

    def events(self) -> dict[int, float]:
        """Handler starts recorded so far: seq -> time.time()."""
        found: dict[int, float] = {}
        lines = self._events.read_text().split("\n")[:-1]  # drop a line still being written
        for line in lines:
            seq, stamp = line.split(" ")
            found.setdefault(int(seq), float(stamp))
        return found

    def wait_for(self, seqs: set[int], timeout: float) -> dict[int, float]:
        """Wait until handlers for all `seqs` have started; return all recorded events."""
        deadline = time.perf_counter() + timeout
        while True:
            found = self.events()
            if seqs <= found.keys():
                return found
            self.check_alive()
            if time.perf_counter() > deadline:
                missing = len(seqs - found.keys())
                raise TimeoutError(f"{missing} of {len(seqs)} jobs not started in {timeout}s")
            time.sleep(EVENTS_POLL_INTERVAL)

    def first_start(self) -> float:
        """time.time() at the first handler start (record mode "first")."""
        events = self.events()
        if not events:
            raise RuntimeError("runner reported no handler start")
        return min(events.values())


def _import_root(module: str) -> Path:
    """Directory from which `module` (a dotted name of a file module) is importable."""
    path = Path(sys.modules[module].__file__ or "").resolve()
    return path.parents[module.count(".")]


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/max of latencies in milliseconds (inclusive linear interpolation)."""
    cuts = statistics.quantiles(latencies_ms, n=100, method="inclusive")
    return {"p50": cuts[49], "p95": cuts[94], "p99": cuts[98], "max": max(latencies_ms)}


class PeerBase(ABC):
    """Measurement protocol shared by all peers; subclasses provide the library calls."""

    name: str
    version: str
    PROFILES: ClassVar[dict[str, str]]  # "defaults" and "best": the knobs each sets, in a sentence

    def __init__(self, dsn: str, profile: str = "defaults") -> None:
        if profile not in self.PROFILES:
            raise ValueError(f"{self.name} has no profile {profile!r}")
        self.dsn = dsn
        self.profile = profile
        self.runner_environment: dict[str, str] = {}  # extra variables for runner processes

    def runner(self, concurrency: int, record_all: bool) -> RunnerProcess:
        return RunnerProcess(
            type(self).__module__,
            self.dsn,
            concurrency,
            record_all,
            self.profile,
            self.runner_environment,
        )

    @abstractmethod
    def setup(self) -> None:
        """Install the peer's schema in the (fresh, empty) database."""

    @abstractmethod
    def reset(self) -> None:
        """Remove all jobs, logs and worker bookkeeping left by a previous measurement."""

    @abstractmethod
    def _enqueue_each(self, seqs: Sequence[int], interval: float) -> EnqueueRun:
        """Enqueue one job per seq, one per transaction, `interval` seconds apart (0: no wait)."""

    @abstractmethod
    def _enqueue_batches(self, n: int, batch: int) -> float:
        """Enqueue `n` jobs through the bulk API, `batch` per call; return elapsed seconds."""

    @abstractmethod
    def _is_drained(self, conn: psycopg.Connection, n: int) -> bool:
        """Cheap check, polled every 5 ms: have all `n` enqueued jobs completed?"""

    @abstractmethod
    def _count_completed(self, conn: psycopg.Connection) -> int:
        """Exact number of successfully completed jobs (checked once after a drain)."""

    def enqueue_single(self, n: int) -> float:
        return n / self._enqueue_each(range(n), 0.0).elapsed

    def enqueue_bulk(self, n: int, batch: int = 1000) -> float:
        return n / self._enqueue_batches(n, batch)

    def drain(self, n: int, concurrency: int, exported: Callable[[], bool] | None = None) -> float:
        """Jobs per second from the first handler start until all ``n`` are seen completed
        and, when ``exported`` is given (a traced drain), until it says the telemetry of every
        attempt has arrived."""
        return self.drain_run(n, concurrency, exported).jobs_per_s(n)

    def drain_run(
        self,
        n: int,
        concurrency: int,
        exported: Callable[[], bool] | None = None,
        runner_cpu: bool = False,
    ) -> DrainRun:
        """:meth:`drain`'s moments; with ``runner_cpu``, also the runner's CPU time from its
        first attempt (its startup left out) to the drained queue, read from ``/proc``."""
        self._enqueue_batches(n, DRAIN_INSERT_BATCH)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            # Planner statistics as autovacuum would have them in steady state: right after
            # reset's TRUNCATE the tables look empty, and a plan chosen for an empty table
            # can turn every dequeue into a scan of the whole backlog.
            conn.execute("ANALYZE")
            with self.runner(concurrency, False) as runner:
                cpu_from = self._first_attempt_cpu(runner) if runner_cpu else None
                drained = self._wait_drained(conn, n, runner)
                cpu = None if cpu_from is None else cpu_seconds(runner.pid) - cpu_from
                end = drained if exported is None else self._wait_exported(exported, runner)
                first = runner.first_start()
            completed = self._count_completed(conn)
        if completed != n:
            raise RuntimeError(f"{self.name}: {completed} of {n} jobs completed successfully")
        return DrainRun(first, drained, end, cpu)

    @staticmethod
    def _first_attempt_cpu(runner: RunnerProcess) -> float:
        """The runner's CPU seconds once its first attempt has started."""
        deadline = time.perf_counter() + RUNNER_READY_TIMEOUT
        while not runner.events():
            runner.check_alive()
            if time.perf_counter() > deadline:
                raise TimeoutError(f"no attempt started within {RUNNER_READY_TIMEOUT}s")
            time.sleep(0.002)
        return cpu_seconds(runner.pid)

    def _wait_drained(self, conn: psycopg.Connection, n: int, runner: RunnerProcess) -> float:
        deadline = time.perf_counter() + DRAIN_TIMEOUT
        while not self._is_drained(conn, n):
            runner.check_alive()
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{self.name}: drain of {n} jobs exceeded {DRAIN_TIMEOUT}s")
            time.sleep(POLL_INTERVAL)
        return time.time()

    def _wait_exported(self, exported: Callable[[], bool], runner: RunnerProcess) -> float:
        deadline = time.perf_counter() + DRAIN_TIMEOUT
        while not exported():
            runner.check_alive()
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{self.name}: telemetry not all exported in {DRAIN_TIMEOUT}s")
            time.sleep(POLL_INTERVAL)
        return time.time()

    def pickup_latency(
        self, n: int = 500, interval: float = 0.010, concurrency: int = 1
    ) -> dict[str, float]:
        with self.runner(concurrency, True) as runner:
            self._enqueue_each([WARMUP_SEQ], 0.0)
            runner.wait_for({WARMUP_SEQ}, RUNNER_READY_TIMEOUT)
            time.sleep(SETTLE_SECONDS)
            sent = self._enqueue_each(range(n), interval).stamps
            started = runner.wait_for(set(range(n)), PICKUP_TIMEOUT)
        return latency_summary([(started[seq] - sent[seq]) * 1000.0 for seq in range(n)])
