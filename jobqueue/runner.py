"""The runner: one process serving one or more queues.

Parts, each a thread with its own database connection:

- a **consumer** per queue: its fetch loop claims batches for free slots (threads + prefetch)
  and hands jobs to the queue's pool of worker threads;
- the **completer** writes attempt results in batches, one fenced statement per batch;
- the **heartbeat** extends the leases of every job this process holds, in one statement;
- the **listener** LISTENs for new-job notifications and wakes the consumer of that queue;
- the **maintainer** competes for the leader lock and, while it holds it, sweeps expired leases
  and prunes old finished jobs.

Shutdown (:meth:`Runner.stop`): stop claiming, give back jobs fetched but not started, let
running jobs finish within the grace period, release what is still running at the deadline,
write every result, then close.
"""

import logging
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from queue import Empty, SimpleQueue
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from jobqueue.connections import Link
from jobqueue.execution import run_job
from jobqueue.registry import TaskRegistry, registry
from jobqueue.settings import RunnerSettings
from jobqueue.store import AttemptResult, ClaimedJob, JobStore

NOTIFY_CHANNEL = "pauta_jobs"
RESULT_BATCH = 1000
PRUNE_BATCH = 5000

log = logging.getLogger("jobqueue.runner")


class Consumer:
    """Claims the jobs of one queue and runs them on a pool of threads."""

    def __init__(self, runner: "Runner", queue: str, threads: int) -> None:
        self.runner = runner
        self.queue = queue
        self.threads = threads
        self.capacity = threads + runner.settings.prefetch
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
            free = self.capacity - self._outstanding
            if free > 0 and self._buffer.qsize() < self.threads:
                jobs = self._claim(free)
                if jobs and len(jobs) == free:
                    continue  # the queue may hold more: top up again as soon as slots free up
            poll = settings.poll_seconds * random.uniform(0.8, 1.2)  # noqa: S311
            self.wake.wait(poll)
        self._link.close()

    def _claim(self, limit: int) -> list[ClaimedJob]:
        runner = self.runner
        settings = runner.settings
        jobs = self._link.call(
            lambda store: store.claim(self.queue, limit, runner.worker_id, settings.lease_seconds)
        )
        if not jobs:
            return []
        runner.hold(jobs)
        with self._lock:
            self._outstanding += len(jobs)
        for job in jobs:
            self._buffer.put(job)
        return jobs

    # -- running -------------------------------------------------------------------------------

    def _work_loop(self) -> None:
        runner = self.runner
        while (job := self._buffer.get()) is not None:
            with self._lock:
                self._running[job.id, job.attempt] = (job, time.monotonic())
            result = run_job(job, runner.tasks, runner.worker_id, runner.task_connection)
            with self._lock:
                self._running.pop((job.id, job.attempt), None)
                self._outstanding -= 1
                abandoned = self._abandoned
            if not abandoned:
                runner.submit(result)
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
    def __init__(self, settings: RunnerSettings, tasks: TaskRegistry = registry) -> None:
        self.settings = settings
        self.tasks = tasks
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.stopping = threading.Event()  # no more claims
        self.closing = threading.Event()  # drained: heartbeat and completer may end
        self.hurry = threading.Event()  # fast stop: the grace period ends now
        self.ready = threading.Event()
        self.crashed = threading.Event()  # a part died of a bug: the process must not go on
        self.is_leader = False
        self._results: SimpleQueue[AttemptResult | None] = SimpleQueue()
        # (job id, attempt) claimed and not yet written back: what the heartbeat renews
        self._held: set[tuple[int, int]] = set()
        self._held_lock = threading.Lock()
        self._pool: ConnectionPool | None = None
        self._pool_lock = threading.Lock()
        self.consumers = {
            queue: Consumer(self, queue, threads) for queue, threads in settings.queues.items()
        }
        self._threads = [
            threading.Thread(target=self._guard(self._complete_loop), name="completer"),
            threading.Thread(target=self._guard(self._heartbeat_loop), name="heartbeat"),
            threading.Thread(target=self._guard(self._listen_loop), name="listener", daemon=True),
        ]
        if settings.maintenance:
            self._threads.append(
                threading.Thread(
                    target=self._guard(self._maintain_loop), name="maintainer", daemon=True
                )
            )
        self._listening = threading.Event()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        for thread in self._threads:
            thread.start()
        self._listening.wait(10)
        for consumer in self.consumers.values():
            consumer.start()
        self.ready.set()
        queues = ", ".join(f"{name}={c.threads}" for name, c in self.consumers.items())
        log.info("worker %s ready; queues %s", self.worker_id, queues)

    def stop(self) -> None:
        """Drain: stop claiming, give back unstarted jobs, finish or release running ones."""
        deadline = time.monotonic() + self.settings.grace_seconds
        log.info("worker %s stopping; grace %.0fs", self.worker_id, self.settings.grace_seconds)
        self.stopping.set()
        for consumer in self.consumers.values():
            consumer.stop_fetching()
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
        completer = self._threads[0]
        completer.join(max(deadline - time.monotonic(), 5.0))
        if completer.is_alive():
            self.hurry.set()  # the database is unreachable: stop retrying; leases will expire
            completer.join()
        self.closing.set()
        self._threads[1].join()
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
                    self.settings.database_url, min_size=1, max_size=size, open=True
                )
        with self._pool.connection() as connection:
            yield connection

    def _release(self, jobs: list[tuple[ClaimedJob, bool, float]]) -> None:
        if not jobs:
            return
        link = Link(self.settings.database_url, "release", self.hurry)
        rows = [(job.id, job.attempt, started, ran) for job, started, ran in jobs]
        released = link.call(lambda store: store.release(rows, self.worker_id), tries=5)
        link.close()
        self._forget((job.id, job.attempt) for job, _, _ in jobs)
        log.info("released %d of %d jobs back to their queues", len(released or []), len(jobs))

    def _forget(self, attempts: Iterable[tuple[int, int]]) -> None:
        with self._held_lock:
            self._held.difference_update(attempts)

    # -- completer -----------------------------------------------------------------------------

    def _complete_loop(self) -> None:
        link = Link(self.settings.database_url, "completer", self.hurry)
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
        written = link.call(lambda store: store.finish(batch, self.worker_id))
        if written is None:
            log.error("could not write %d results before the deadline", len(batch))
            return
        self._forget((result.job_id, result.attempt) for result in batch)
        for result in batch:
            if result.job_id not in written:
                log.warning(
                    "lost job %d attempt %d: its lease was taken over; result discarded",
                    result.job_id,
                    result.attempt,
                )
            elif result.outcome != "succeeded":
                log.info(
                    "job %d attempt %d %s: %s",
                    result.job_id,
                    result.attempt,
                    written[result.job_id],
                    result.error,
                )

    # -- heartbeat -----------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        link = Link(self.settings.database_url, "heartbeat", self.closing)
        while not self.closing.wait(self.settings.heartbeat_seconds):
            with self._held_lock:
                held = list(self._held)
            if not held:
                continue
            owned = link.call(partial(self._extend_leases, held=held), tries=1)
            if owned is None:
                continue
            lost = set(held) - owned
            for job_id, attempt in lost:
                log.warning("lost job %d attempt %d: its lease was taken over", job_id, attempt)
            self._forget(lost)  # its result, if it comes, will be fenced out
        link.close()

    def _extend_leases(self, store: JobStore, held: list[tuple[int, int]]) -> set[tuple[int, int]]:
        return store.extend_leases(held, self.worker_id, self.settings.lease_seconds)

    # -- listener ------------------------------------------------------------------------------

    def _listen_loop(self) -> None:
        link = Link(self.settings.database_url, "listener", self.stopping)
        link.on_connect = self._on_listen_connect
        while not self.stopping.is_set():
            link.call(self._receive_notifications)
        link.close()

    def _receive_notifications(self, store: JobStore) -> None:
        for notice in store.connection.notifies(timeout=0.5):
            consumer = self.consumers.get(notice.payload)
            if consumer is not None:
                consumer.wake.set()

    def _on_listen_connect(self, connection: psycopg.Connection[Any]) -> None:
        connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
        self._listening.set()
        for consumer in self.consumers.values():  # notifications may have been missed
            consumer.wake.set()

    # -- maintenance ---------------------------------------------------------------------------

    def _maintain_loop(self) -> None:
        settings = self.settings
        link = Link(settings.database_url, "maintainer", self.stopping)
        link.on_connect = self._on_maintainer_connect
        next_prune = time.monotonic()
        while not self.stopping.is_set():
            if not self.is_leader:
                self.is_leader = bool(link.call(lambda store: store.try_become_leader()))
                if self.is_leader:
                    log.info("worker %s is the maintenance leader", self.worker_id)
            if self.is_leader:  # one try each: after a reconnect, leadership must be won again
                link.call(self._sweep, tries=1)
                if time.monotonic() >= next_prune:
                    link.call(self._prune, tries=1)
                    next_prune = time.monotonic() + settings.prune_seconds
            self.stopping.wait(settings.sweep_seconds * random.uniform(0.8, 1.2))  # noqa: S311
        link.close()  # ends the session, which frees the leader lock

    def _on_maintainer_connect(self, _connection: psycopg.Connection[Any]) -> None:
        self.is_leader = False  # a new session holds no lock

    def _sweep(self, store: JobStore) -> None:
        while rescued := store.rescue_expired():
            dead = sum(1 for state in rescued.values() if state == "dead")
            log.warning("rescued %d jobs with expired leases (%d dead)", len(rescued), dead)
            if len(rescued) < 1000:
                break

    def _prune(self, store: JobStore) -> None:
        settings = self.settings
        total = 0
        while True:
            deleted = store.prune(
                settings.keep_succeeded_seconds, settings.keep_dead_seconds, PRUNE_BATCH
            )
            total += deleted
            if deleted < PRUNE_BATCH or self.stopping.is_set():
                break
        if total:
            log.info("pruned %d finished jobs", total)
