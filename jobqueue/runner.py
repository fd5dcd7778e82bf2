"""The runner: one process serving one or more queues.

Parts, each a thread with its own database connection:

- a **consumer** per queue: its fetch loop claims batches for free slots (threads + prefetch)
  and hands jobs to the queue's pool of worker threads;
- the **completer** writes attempt results in batches, one fenced statement per batch;
- the **heartbeat** extends the leases of every job this process holds, in one statement,
  records the process's own heartbeat in ``workers`` (and learns whether a drain was asked),
  and flushes the per-minute stats;
- the **listener** LISTENs for new-job notifications and claims for that queue at once, on
  its own connection;
- with ``maintenance`` on (a single-process worker), the leader duties of
  :mod:`jobqueue.maintenance`; under the supervisor, the supervisor does them.

Shutdown (:meth:`Runner.stop`): stop claiming, give back jobs fetched but not started, let
running jobs finish within the grace period, release what is still running at the deadline,
write every result, then close.
"""

import logging
import math
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from queue import Empty, SimpleQueue
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from jobqueue import telemetry
from jobqueue.connections import CONNECT_OPTIONS, Link
from jobqueue.execution import run_job
from jobqueue.maintenance import Maintainer
from jobqueue.registry import TaskRegistry, registry
from jobqueue.settings import WorkerSettings
from jobqueue.stats import StatsRecorder
from jobqueue.store import AttemptResult, ClaimedJob, JobStore, WorkerIdentity

NOTIFY_CHANNEL = "pauta_jobs"
RESULT_BATCH = 1000

log = logging.getLogger("jobqueue.runner")


class Prefetch:
    """How many jobs beyond its threads a consumer claims ahead.

    Enough, for short jobs, that the threads do not wait for the next claim's round trip; none
    for long jobs, which would otherwise wait in this process's buffer while another worker is
    idle. The estimate follows moving averages of the jobs' run time and the claim's latency,
    and never exceeds the ``prefetch`` setting.
    """

    SMOOTHING = 0.2

    def __init__(self, threads: int, maximum: int) -> None:
        self.threads = threads
        self.maximum = maximum
        self.runtime: float | None = None  # seconds, moving average; None until a job ran
        self.claim_latency = 0.001  # seconds, moving average

    def observe_runtime(self, seconds: float) -> None:
        # Worker threads race here; under the GIL a lost update only delays the average.
        previous = self.runtime
        self.runtime = (
            seconds if previous is None else previous + self.SMOOTHING * (seconds - previous)
        )

    def observe_claim(self, seconds: float) -> None:
        self.claim_latency += self.SMOOTHING * (seconds - self.claim_latency)

    def amount(self) -> int:
        if self.runtime is None or self.maximum == 0:
            return 0
        # What the threads get through during two claim round trips.
        wanted = 2 * self.threads * self.claim_latency / max(self.runtime, 1e-6)
        return min(self.maximum, math.floor(wanted))


class Consumer:
    """Claims the jobs of one queue and runs them on a pool of threads."""

    def __init__(self, runner: "Runner", queue: str, threads: int) -> None:
        self.runner = runner
        self.queue = queue
        self.threads = threads
        self.prefetch = Prefetch(threads, runner.settings.prefetch)
        self.wake = threading.Event()
        self._buffer: SimpleQueue[ClaimedJob | None] = SimpleQueue()
        self._outstanding = 0  # claimed by this consumer and not yet handed to the completer
        self._lock = threading.Lock()
        # started and not yet finished, by (job id, attempt)
        self._running: dict[tuple[int, int], tuple[ClaimedJob, float]] = {}
        self._abandoned = False
        self._link = Link(runner.settings.database_url, f"fetch[{queue}]", runner.stopping)
        self._fetcher = threading.Thread(
            target=runner._guard(self._fetch_loop), name=f"fetch-{queue}"
        )
        self._workers = [
            threading.Thread(
                target=runner._guard(self._work_loop), name=f"{queue}-{n}", daemon=True
            )
            for n in range(threads)
        ]

    def start(self) -> None:
        for worker in self._workers:
            worker.start()
        self._fetcher.start()

    # -- fetching ------------------------------------------------------------------------------

    def _fetch_loop(self) -> None:
        settings = self.runner.settings
        while not self.runner.stopping.is_set():
            self.wake.clear()
            if self._claim_with(self._link.call):
                continue  # the queue may hold more: top up again as soon as slots free up
            poll = settings.poll_seconds * random.uniform(0.8, 1.2)  # noqa: S311
            self.wake.wait(poll)
        self._link.close()

    def claim_now(self, store: JobStore) -> None:
        """Claim on the caller's connection at once: the listener calls this when a job of this
        queue has just been committed, which saves a thread's wake-up on the way to the job."""
        if not self.runner.stopping.is_set():
            self._claim_with(lambda claim: claim(store))

    def _claim_with(self, run: Callable[[Callable[[JobStore], list[ClaimedJob]]], Any]) -> bool:
        """Claim for the free slots, running the claim through ``run`` (a connection's way of
        calling a store). Returns True when every slot asked for was filled.

        Slots are reserved before the claim and the unused ones given back after it, so the
        fetcher and the listener can claim at the same time without exceeding the capacity.
        """
        with self._lock:
            free = self.threads + self.prefetch.amount() - self._outstanding
            if free <= 0 or self._buffer.qsize() >= self.threads:
                return False
            self._outstanding += free
        runner = self.runner
        jobs: list[ClaimedJob] = []
        started = time.perf_counter()
        try:
            jobs = (
                run(
                    lambda store: store.claim(
                        self.queue, free, runner.worker_id, runner.settings.lease_seconds
                    )
                )
                or []
            )
        finally:
            with self._lock:
                self._outstanding -= free - len(jobs)
        self.prefetch.observe_claim(time.perf_counter() - started)
        if jobs:
            runner.hold(jobs)
            for job in jobs:
                self._buffer.put(job)
        return len(jobs) == free

    # -- running -------------------------------------------------------------------------------

    def _work_loop(self) -> None:
        runner = self.runner
        while (job := self._buffer.get()) is not None:
            with self._lock:
                self._running[job.id, job.attempt] = (job, time.monotonic())
            result = run_job(job, runner.tasks, runner.worker_id, runner.task_connection)
            self.prefetch.observe_runtime(result.duration)
            with self._lock:
                self._running.pop((job.id, job.attempt), None)
                self._outstanding -= 1
                abandoned = self._abandoned
            if not abandoned:
                runner.submit(result)
            if self._buffer.qsize() < self.threads:  # the fetcher has room to claim again
                self.wake.set()

    # -- stopping ------------------------------------------------------------------------------

    def stop_fetching(self) -> None:
        self.wake.set()
        self._fetcher.join()

    def take_unstarted(self) -> list[ClaimedJob]:
        """Empty the buffer of jobs fetched but not started, and stop the worker threads."""
        unstarted = []
        while True:
            try:
                job = self._buffer.get_nowait()
            except Empty:
                break
            if job is not None:
                unstarted.append(job)
        with self._lock:
            self._outstanding -= len(unstarted)
        for _ in self._workers:
            self._buffer.put(None)
        return unstarted

    def busy(self) -> bool:
        return any(worker.is_alive() for worker in self._workers)

    def abandon_running(self) -> list[tuple[ClaimedJob, float]]:
        """At the deadline: the jobs still running, with how long they ran; their threads'
        results will no longer be written."""
        now = time.monotonic()
        with self._lock:
            self._abandoned = True
            return [(job, now - started) for job, started in self._running.values()]


class Runner:
    def __init__(
        self,
        settings: WorkerSettings,
        tasks: TaskRegistry = registry,
        parent_id: int | None = None,
    ) -> None:
        self.settings = settings
        self.tasks = tasks
        hostname = socket.gethostname()
        self.identity = WorkerIdentity(
            name=f"{hostname}:{os.getpid()}:{secrets.token_hex(3)}",
            hostname=hostname,
            pid=os.getpid(),
            parent_id=parent_id,
            queue=",".join(settings.queues),
            threads=sum(settings.queues.values()),
        )
        self.worker_id = self.identity.name  # what jobs.locked_by holds
        self.row_id: int | None = None  # this process's row in workers
        self.stopping = threading.Event()  # no more claims
        self.closing = threading.Event()  # drained: heartbeat and completer may end
        self.hurry = threading.Event()  # fast stop: the grace period ends now
        self.drain_requested = threading.Event()  # someone asked, through the workers table
        self.crashed = threading.Event()  # a part died of a bug: the process must not go on
        self.stats = StatsRecorder()
        self._results: SimpleQueue[AttemptResult | None] = SimpleQueue()
        # (job id, attempt) claimed and not yet written back: what the heartbeat renews
        self._held: set[tuple[int, int]] = set()
        self._held_lock = threading.Lock()
        self._pool: ConnectionPool | None = None
        self._pool_lock = threading.Lock()
        self._listening = threading.Event()
        self.consumers = {
            queue: Consumer(self, queue, threads) for queue, threads in settings.queues.items()
        }
        self._completer = threading.Thread(
            target=self._guard(self._complete_loop), name="completer"
        )
        self._heartbeat = threading.Thread(
            target=self._guard(self._heartbeat_loop), name="heartbeat"
        )
        self._listener = threading.Thread(target=self._guard(self._listen_loop), name="listener")
        self._daemons: list[threading.Thread] = []
        self.maintainer: Maintainer | None = None
        if settings.maintenance:
            self.maintainer = Maintainer(settings, self.worker_id, self.stopping)
            self._daemons.append(
                threading.Thread(
                    target=self._guard(self.maintainer.run), name="maintainer", daemon=True
                )
            )

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        link = self._link("register")
        self.row_id = link.call(lambda store: store.register_worker(self.identity))
        link.close()
        for thread in (self._completer, self._heartbeat, self._listener, *self._daemons):
            thread.start()
        self._listening.wait(10)
        for consumer in self.consumers.values():
            consumer.start()
        queues = ", ".join(f"{name}={c.threads}" for name, c in self.consumers.items())
        log.info("worker %s ready; queues %s", self.worker_id, queues)

    def stop(self) -> None:
        """Drain: stop claiming, give back unstarted jobs, finish or release running ones."""
        deadline = time.monotonic() + self.settings.grace_seconds
        log.info("worker %s stopping; grace %gs", self.worker_id, self.settings.grace_seconds)
        self.stopping.set()
        self._set_state("draining")
        for consumer in self.consumers.values():
            consumer.stop_fetching()
        self._listener.join()  # it may be claiming: its jobs must be in the buffers first
        unstarted = [job for c in self.consumers.values() for job in c.take_unstarted()]
        self._release([(job, False, 0.0) for job in unstarted])
        while any(c.busy() for c in self.consumers.values()):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.hurry.wait(min(remaining, 0.05)):
                break
        still_running = [item for c in self.consumers.values() for item in c.abandon_running()]
        if still_running:
            log.warning("grace period over; releasing %d running jobs", len(still_running))
            self._release([(job, True, ran) for job, ran in still_running])
        self._results.put(None)  # the completer writes what it has, then ends
        self._completer.join(max(deadline - time.monotonic(), 5.0))
        if self._completer.is_alive():
            self.hurry.set()  # the database is unreachable: stop retrying; leases will expire
            self._completer.join()
        self.closing.set()
        self._heartbeat.join()  # flushes the last stats
        self._set_state("stopped")
        if self._pool is not None:
            self._pool.close()
        log.info("worker %s stopped", self.worker_id)

    def _guard(self, loop: Callable[[], None]) -> Callable[[], None]:
        """Run a part's loop; a bug that escapes it marks the runner crashed instead of leaving
        a process that looks alive but no longer claims, heartbeats or writes results."""

        def guarded() -> None:
            try:
                loop()
            except Exception:
                log.exception("%s crashed", threading.current_thread().name)
                self.crashed.set()

        return guarded

    def _link(self, name: str) -> Link:
        return Link(self.settings.database_url, name, self.hurry)

    def _set_state(self, state: str) -> None:
        if self.row_id is None:
            return
        row_id = self.row_id
        with self._held_lock:
            in_flight = len(self._held)
        link = self._link("registry")
        link.call(lambda store: store.set_worker_state(row_id, state, in_flight), tries=3)
        link.close()

    # -- bookkeeping shared by the parts -------------------------------------------------------

    def hold(self, jobs: list[ClaimedJob]) -> None:
        with self._held_lock:
            self._held.update((job.id, job.attempt) for job in jobs)

    def submit(self, result: AttemptResult) -> None:
        self._results.put(result)

    @contextmanager
    def task_connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection for tasks that use the database (committed when the block ends)."""
        with self._pool_lock:
            if self._pool is None:
                size = max(1, sum(self.settings.queues.values()))
                self._pool = ConnectionPool(
                    self.settings.database_url,
                    min_size=1,
                    max_size=size,
                    open=True,
                    check=ConnectionPool.check_connection,  # a dropped session is replaced
                    kwargs=CONNECT_OPTIONS,
                )
        with self._pool.connection() as connection:
            yield connection

    def _release(self, jobs: list[tuple[ClaimedJob, bool, float]]) -> None:
        if not jobs:
            return
        link = self._link("release")
        rows = [(job.id, job.attempt, started, ran) for job, started, ran in jobs]
        answer = link.call(lambda store: store.release(rows, self.worker_id), tries=5)
        link.close()
        self._forget((job.id, job.attempt) for job, _, _ in jobs)
        if answer is None:
            log.error("could not release %d jobs; their leases will expire", len(jobs))
            return
        released, minute = answer
        by_id = {job.id: job for job, _, _ in jobs}
        for job_id in released:
            job = by_id[job_id]
            assert minute is not None  # noqa: S101 - rows came back, so did their minute
            self.stats.released((job.queue, minute, job.tenant_id))
        log.info("gave back %d jobs (%d had started)", len(jobs), len(released))

    def _forget(self, attempts: Iterable[tuple[int, int]]) -> None:
        with self._held_lock:
            self._held.difference_update(attempts)

    # -- completer -----------------------------------------------------------------------------

    def _complete_loop(self) -> None:
        link = self._link("completer")
        finished = False
        while not finished:
            first = self._results.get()
            batch = [] if first is None else [first]
            finished = first is None
            while not finished and len(batch) < RESULT_BATCH:
                try:
                    item = self._results.get_nowait()
                except Empty:
                    break
                if item is None:
                    finished = True
                else:
                    batch.append(item)
            if batch:
                self._write_results(link, batch)
        link.close()

    def _write_results(self, link: Link, batch: list[AttemptResult]) -> None:
        answer = link.call(lambda store: store.finish(batch, self.worker_id))
        if answer is None:
            log.error("could not write %d results before the deadline", len(batch))
            return
        written, minute = answer
        self._forget((result.job_id, result.attempt) for result in batch)
        instruments = telemetry.job_metrics()
        for result in batch:
            state = written.get((result.job_id, result.attempt))
            if state is None:
                log.warning(
                    "lost job %d attempt %d: its lease was taken over; result discarded",
                    result.job_id,
                    result.attempt,
                    extra=_job_fields(result, "lost", self.worker_id),
                )
                continue
            assert minute is not None  # noqa: S101 - rows came back, so did their minute
            key = (result.job.queue, minute, result.job.tenant_id)
            self.stats.finished(key, state, result.duration, result.wait)
            outcome = "retry" if state == "available" else state
            if instruments is not None:
                job = result.job
                instruments.record(job.queue, job.task, outcome, result.duration, result.wait)
            if outcome == "succeeded":
                job_log.debug(
                    "job %d succeeded",
                    result.job_id,
                    extra=_job_fields(result, outcome, self.worker_id),
                )
            else:
                job_log.warning(
                    "job %d attempt %d %s: %s",
                    result.job_id,
                    result.attempt,
                    "failed, retry scheduled" if outcome == "retry" else "is dead",
                    result.error,
                    extra=_job_fields(result, outcome, self.worker_id),
                )

    # -- heartbeat -----------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        """Renew leases and this worker's row every heartbeat; flush stats more often. Runs until
        the very end of a drain, so in-flight jobs keep their leases."""
        settings = self.settings
        link = Link(settings.database_url, "heartbeat", self.closing)
        next_beat = next_flush = time.monotonic()
        while True:
            closing = self.closing.wait(max(0.0, min(next_beat, next_flush) - time.monotonic()))
            now = time.monotonic()
            if closing or now >= next_flush:
                link.call(self._flush_stats, tries=1)
                next_flush = now + settings.stats_flush_seconds
            if closing:
                break
            if now >= next_beat:
                link.call(self._beat, tries=1)
                next_beat = now + settings.heartbeat_seconds
        link.close()

    def _beat(self, store: JobStore) -> None:
        with self._held_lock:
            held = list(self._held)
        if held:
            owned = store.extend_leases(held, self.worker_id, self.settings.lease_seconds)
            lost = set(held) - owned
            for job_id, attempt in lost:
                log.warning("lost job %d attempt %d: its lease was taken over", job_id, attempt)
            self._forget(lost)  # its result, if it comes, will be fenced out
        state = "draining" if self.stopping.is_set() else "running"
        if self.row_id is not None and store.worker_heartbeat(self.row_id, state, len(held)):
            if not self.drain_requested.is_set():
                log.info("worker %s: drain requested through the console", self.worker_id)
            self.drain_requested.set()

    def _flush_stats(self, store: JobStore) -> None:
        counted = self.stats.take()
        try:
            store.add_stats(counted)
        except psycopg.Error:
            self.stats.give_back(counted)
            raise

    # -- listener ------------------------------------------------------------------------------

    def _listen_loop(self) -> None:
        link = Link(self.settings.database_url, "listener", self.stopping)
        link.on_connect = self._on_listen_connect
        while not self.stopping.is_set():
            link.call(self._receive_notifications)
        link.close()

    def _receive_notifications(self, store: JobStore) -> None:
        # Leave the generator after the first notification: it holds the connection, and the
        # claim runs on this same connection right away. Later ones wait in psycopg's backlog.
        woken = {notice.payload for notice in store.connection.notifies(timeout=0.5, stop_after=1)}
        for queue in woken:
            consumer = self.consumers.get(queue)
            if consumer is not None:
                consumer.claim_now(store)

    def _on_listen_connect(self, connection: psycopg.Connection[Any]) -> None:
        connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
        self._listening.set()
        for consumer in self.consumers.values():  # notifications may have been missed
            consumer.wake.set()


job_log = logging.getLogger("jobqueue.jobs")


def _job_fields(result: AttemptResult, outcome: str, worker: str) -> dict[str, Any]:
    """Structured fields of a job's log record (JSON logs carry them as keys)."""
    return {
        "worker": worker,
        "job_id": result.job_id,
        "task": result.job.task,
        "queue": result.job.queue,
        "attempt": result.attempt,
        "duration": round(result.duration, 6),
        "outcome": outcome,
        "trace_id": result.trace_id,
    }
