"""The runner: one process serving one or more queues.

Parts, each a thread with its own database connection:

- a **consumer** per queue: its fetch loop claims batches for free slots (threads + prefetch)
  and hands jobs to the queue's pool of worker threads;
- the **completer** writes attempt results in batches, one fenced statement per batch that
  also counts them in the per-minute stats; a batch the database refuses for a reason other
  than the connection is written row by row, so one bad row cannot lose the others;
- the **heartbeat** extends the leases of every job this process holds, in one statement
  (learning which of them someone asked to cancel, which it tells their tasks), and records the
  process's own heartbeat in ``workers`` (and learns whether a drain was asked);
  a beat that fails is retried at once, with backoff, well before the leases are at risk;
- the **watchdog** ends attempts past their timeout (``timed_out``): their leases are no longer
  renewed, their threads are given up, and the process drains to be replaced (``recycle``);
- the **listener** LISTENs for new-job notifications and claims for that queue at once, on
  its own connection to ``listen_url`` (or DATABASE_URL); behind a transaction pooler with no
  ``listen_url`` there is none, and the fetch loops poll with backoff (:class:`PollBackoff`);
- with ``maintenance`` on (a single-process worker), the rescuer and the bid for the leader's
  duties of :mod:`jobqueue.maintenance`; under the supervisor, the supervisor runs them.

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
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from queue import Empty, SimpleQueue
from typing import Any, NamedTuple

import psycopg
from psycopg_pool import ConnectionPool

from jobqueue import telemetry
from jobqueue.connections import CONNECT_OPTIONS, Link
from jobqueue.cooperative import Group, GroupSize, HeldConnection
from jobqueue.execution import AttemptControl, run_job, timed_out
from jobqueue.maintenance import Maintainer
from jobqueue.registry import TaskRegistry, registry
from jobqueue.settings import WorkerSettings, parse_rate
from jobqueue.store import AttemptResult, ClaimedJob, JobStore, WorkerIdentity, Written
from jobqueue.text import TextLimits

NOTIFY_CHANNEL = "pauta_jobs"
RESULT_BATCH = 1000
NO_QUEUE = ""  # not a queue name (enqueue refuses it): the claim run only to plan it claims here
WATCH_SECONDS = 0.1  # how often the watchdog looks for attempts past their timeout

log = logging.getLogger("jobqueue.runner")

Claimed = tuple[list[ClaimedJob], float]  # a claim's jobs and their payloads' mean bytes


class Prefetch:
    """How many jobs beyond its threads a consumer claims ahead.

    Enough, for short jobs, that the threads do not wait for the next claim's round trip; none
    for long jobs, which would otherwise wait in this process's buffer while another worker is
    idle. The estimate follows moving averages of the jobs' run time and the claim's latency,
    and never exceeds the ``prefetch`` setting, nor, in payload bytes, ``prefetch_bytes``
    (``budget``): a job's payload is reckoned at the largest claim's mean lately (a claim of
    larger payloads counts at once, one of smaller ones brings it down slowly), so that jobs
    of big payloads are not claimed ahead by the hundred.
    """

    SMOOTHING = 0.2

    def __init__(self, threads: int, maximum: int, budget: int) -> None:
        self.threads = threads
        self.maximum = maximum
        self.budget = budget  # bytes of payload JSON
        self.runtime: float | None = None  # seconds, moving average; None until a job ran
        self.claim_latency = 0.001  # seconds, moving average
        self.payload_bytes: float | None = None  # a job's, as above; None until a claim found one

    def observe_runtime(self, seconds: float) -> None:
        # Worker threads race here; under the GIL a lost update only delays the average.
        previous = self.runtime
        self.runtime = (
            seconds if previous is None else previous + self.SMOOTHING * (seconds - previous)
        )

    def observe_claim(self, seconds: float) -> None:
        self.claim_latency += self.SMOOTHING * (seconds - self.claim_latency)

    def observe_payloads(self, mean: float) -> None:
        """A claim whose jobs' payloads were ``mean`` bytes each."""
        previous = self.payload_bytes
        if previous is None or mean > previous:
            self.payload_bytes = mean
        else:
            self.payload_bytes = previous + self.SMOOTHING * (mean - previous)

    def amount(self) -> int:
        if self.runtime is None or self.maximum == 0:
            return 0
        # What the threads get through during two claim round trips.
        wanted = 2 * self.threads * self.claim_latency / max(self.runtime, 1e-6)
        if self.payload_bytes:
            wanted = min(wanted, self.budget / self.payload_bytes)
        return min(self.maximum, math.floor(wanted))


class Running(NamedTuple):
    """An attempt a worker thread is running (a named tuple: one is made for every attempt)."""

    job: ClaimedJob
    control: AttemptControl
    thread: threading.Thread


POLL_FLOOR_SECONDS = 0.05  # the first poll after a claim that found work, without LISTEN


class PollBackoff:
    """How long a fetch loop waits before claiming again: from ``floor`` after a claim that
    found work, doubling at each empty claim up to ``poll_seconds``, each wait drawn from 0.8
    to 1.2 times that (so many workers do not poll in step)."""

    def __init__(self, floor: float) -> None:
        self.floor = floor
        self.empty = 0  # empty claims since the last one that found work

    def reset(self) -> None:
        self.empty = 0

    def next(self, poll_seconds: float) -> float:
        base: float = min(poll_seconds, self.floor * 2 ** min(self.empty, 30))
        self.empty += 1
        return base * random.uniform(0.8, 1.2)  # noqa: S311 - spreading load, not security


class Consumer:
    """Claims the jobs of one queue and runs them on a pool of threads."""

    def __init__(self, runner: "Runner", queue: str, threads: int) -> None:
        self.runner = runner
        self.queue = queue
        self.threads = threads
        # A task that batches (the largest batch of the tasks registered on this queue) has its
        # attempts run in groups, each group on one thread: the queue then holds a group's
        # worth of jobs a thread.
        batch = max((task.batch for task in runner.tasks if task.queue == queue), default=1)
        self.group_size = GroupSize(batch, runner.settings.group_target_seconds)
        self.prefetch = Prefetch(threads, runner.settings.prefetch, runner.settings.prefetch_bytes)
        self.wake = threading.Event()
        # the queue's rate limit as (starts, period seconds), learnt at start and each heartbeat
        self.rate_limit: tuple[int, float] | None = None
        self._buffer: SimpleQueue[ClaimedJob | None] = SimpleQueue()
        self._outstanding = 0  # claimed by this consumer and not yet handed to the completer
        self._lock = threading.Lock()
        # started and not yet finished (nor timed out), by (job id, attempt)
        self._running: dict[tuple[int, int], Running] = {}
        self._abandoned = False
        # worker threads given up to a task past its timeout, until (if ever) it returns
        self._stuck: set[threading.Thread] = set()
        self._link = runner._link(f"fetch[{queue}]", runner.stopping, claims=True)
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
        # Without LISTEN, a claim that found jobs is followed by quick polls that grow back to
        # poll_seconds while the queue stays empty; with it, notifications wake the loop.
        backoff = PollBackoff(settings.poll_seconds if self.runner.listens else POLL_FLOOR_SECONDS)
        # One try per claim: a claim that fails goes back through the renewal check below
        # instead of retrying until the database answers and claiming at once.
        claim_once = partial(self._link.call, tries=1)
        while not self.runner.stopping.is_set():
            self.wake.clear()
            if self.runner.renewing() and self._claim_with(claim_once):
                backoff.reset()
                continue  # the queue may hold more: top up again as soon as slots free up
            self.wake.wait(min(backoff.next(settings.poll_seconds), self._refill_seconds()))
        self._link.close()

    def slots(self) -> int:
        """Jobs this queue runs or holds at once: a thread's, or a group's on each thread and
        one more group waiting (so that a thread done with its group finds the next one whole in
        the buffer, instead of the first jobs of a claim still being handed over)."""
        size = self.group_size.size()
        return self.threads * size + (size if size > 1 else 0)

    def _refill_seconds(self) -> float:
        """For a rate-limited queue, half the time its bucket takes to fill (it holds a quarter
        of the limit): claiming that often spends the tokens before the bucket caps them."""
        if self.rate_limit is None:
            return math.inf
        starts, period = self.rate_limit
        return max(starts / 4, 1) / (starts / period) / 2

    def claim_now(self, store: JobStore) -> None:
        """Claim on the caller's connection at once: the listener calls this when a job of this
        queue has just been committed, which saves a thread's wake-up on the way to the job.
        While this consumer holds no job, a queue without a rate limit is claimed by
        ``job_claim_sole`` first: a queue that was idle holds that one job, and takes it without
        the full claim's walks (see ``_claim_with``)."""
        if not self.runner.stopping.is_set():
            self._claim_with(lambda claim: claim(store), sole_first=self.rate_limit is None)

    def prepare_claim(self, store: JobStore) -> None:
        """Run the claim for no job on ``store``'s connection, which prepares and plans it there
        (and loads what the server needs to plan it): the first real claim, when the listener is
        woken for a job, then finds its plan made. It claims in a queue no job can be in (its
        name is not a queue name), so it locks and writes nothing, not even a rate-limited
        queue's bucket; the plan, generic, is the same for every queue. So for
        ``job_claim_sole``, the listener's first claim of a job."""
        self._claim(store, 0, NO_QUEUE)
        self._claim(store, 1, NO_QUEUE, sole_first=True)

    def _claim(
        self, store: JobStore, limit: int, queue: str | None = None, sole_first: bool = False
    ) -> Claimed:
        settings = self.runner.settings
        return store.claim_measured(
            self.queue if queue is None else queue,
            limit,
            self.runner.worker_id,
            settings.lease_seconds,
            settings.fair_tenants,
            sole_first,
        )

    def _claim_with(
        self, run: Callable[[Callable[[JobStore], Claimed]], Any], sole_first: bool = False
    ) -> bool:
        """Claim for the free slots, running the claim through ``run`` (a connection's way of
        calling a store). Returns True when every slot asked for was filled.

        Slots are reserved before the claim and the unused ones given back after it, so the
        fetcher and the listener can claim at the same time without exceeding the capacity.
        ``sole_first`` (the listener's) runs ``job_claim_sole`` before the full claim, but only
        while the consumer holds no job: one that holds some is draining a queue that likely
        holds more, where the sole claim would only add a statement before the full one.
        """
        with self._lock:
            slots = self.slots()
            free = slots + self.prefetch.amount() - self._outstanding
            if free <= 0 or self._buffer.qsize() >= slots:
                return False
            sole_first = sole_first and self._outstanding == 0
            self._outstanding += free
        runner = self.runner
        jobs: list[ClaimedJob] = []
        payload_bytes = 0.0
        started = time.perf_counter()
        lease_from = time.monotonic()  # the lease runs from no later than this
        try:
            claimed = run(lambda store: self._claim(store, free, sole_first=sole_first))
            jobs, payload_bytes = claimed or ([], 0.0)
        finally:
            with self._lock:
                self._outstanding -= free - len(jobs)
        self.prefetch.observe_claim(time.perf_counter() - started)
        if jobs:
            self.prefetch.observe_payloads(payload_bytes)
            runner.hold(jobs, lease_from)
            for job in jobs:
                self._buffer.put(job)
        return len(jobs) == free

    # -- running -------------------------------------------------------------------------------

    def _work_loop(self) -> None:
        held = HeldConnection(self.runner.task_connection)
        try:
            self._work(held)
        finally:
            held.give_back()

    def _work(self, held: HeldConnection) -> None:
        runner = self.runner
        while True:
            try:
                job = self._buffer.get_nowait()
            except Empty:
                held.give_back()  # an idle thread holds no connection
                job = self._buffer.get()
            if job is None:
                return
            task = runner.tasks.get(job.task)
            if task is not None and task.batch > 1:
                size = min(task.batch, self.group_size.size())
                self._run_group(self._take_group(job, size), held)
                continue
            held.give_back()  # a job alone borrows from the pool: at most one a thread
            control = self._start(job)
            if control is None:
                continue
            result = run_job(
                job,
                runner.tasks,
                runner.worker_id,
                runner.task_connection,
                runner.text_limits,
                control,
            )
            self._end(job, result)

    def _take_group(self, first: ClaimedJob, size: int) -> list[ClaimedJob]:
        """``first`` and up to ``size - 1`` more jobs of its task waiting in the buffer; the
        others taken on the way (another task's, the stop signal) go back in."""
        group = [first]
        others: list[ClaimedJob | None] = []
        while len(group) < size:
            try:
                job = self._buffer.get_nowait()
            except Empty:
                break
            if job is not None and job.task == first.task:
                group.append(job)
            else:
                others.append(job)
        for job in others:
            self._buffer.put(job)
        return group

    def _run_group(self, jobs: list[ClaimedJob], held: HeldConnection) -> None:
        runner = self.runner
        started = [(job, control) for job in jobs if (control := self._start(job)) is not None]
        if not started:
            return
        group = Group(held.lend)
        began = time.perf_counter()
        results = group.run(
            [
                partial(
                    run_job,
                    job,
                    runner.tasks,
                    runner.worker_id,
                    group.connection,
                    runner.text_limits,
                    control,
                )
                for job, control in started
            ]
        )
        self.group_size.observe(time.perf_counter() - began, len(started))
        for (job, _), result in zip(started, results, strict=True):
            self._end(job, result)

    def _start(self, job: ClaimedJob) -> AttemptControl | None:
        """Count ``job`` as running on this thread; None when it must not start."""
        runner = self.runner
        if not runner.lease_may_hold(job):
            # This process stalled (frozen, paused) past the job's lease while the job
            # waited in the buffer: it has been or will be rescued, so it must not start.
            log.warning(
                "job %d attempt %d not started: its lease may have expired while this "
                "process was stalled",
                job.id,
                job.attempt,
            )
            runner.forget_job(job)
            with self._lock:
                self._outstanding -= 1
            return None
        control = AttemptControl.start(runner.timeout_of(job))
        if runner.cancel_was_requested(job):  # learnt while the job waited in the buffer
            control.cancel.set()
        with self._lock:
            self._running[job.id, job.attempt] = Running(job, control, threading.current_thread())
        return control

    def _end(self, job: ClaimedJob, result: AttemptResult) -> None:
        """Hand a finished attempt's result to the completer (unless it came too late)."""
        runner = self.runner
        with self._lock:
            timed_out = self._running.pop((job.id, job.attempt), None) is None
            if timed_out:  # the watchdog wrote its result: this one is too late
                self._stuck.discard(threading.current_thread())
            else:
                self._outstanding -= 1
            abandoned = self._abandoned
        if timed_out:
            log.info("job %d attempt %d returned after its timeout", job.id, job.attempt)
            return
        self.prefetch.observe_runtime(result.duration)
        if not abandoned:
            runner.submit(result)
        if self._buffer.qsize() < self.slots():  # the fetcher has room to claim again
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
        """True while a worker thread runs a job (a thread stuck past its timeout does not
        count: nothing will be written for it)."""
        with self._lock:
            stuck = set(self._stuck)
        return any(worker.is_alive() and worker not in stuck for worker in self._workers)

    def request_cancel(self, attempts: set[tuple[int, int]]) -> None:
        """Tell the tasks running these attempts that someone asked to cancel their jobs."""
        with self._lock:
            for key in attempts & self._running.keys():
                self._running[key].control.cancel.set()

    def stuck_threads(self) -> int:
        with self._lock:
            return len(self._stuck)

    def expire(self, now: float) -> list["Running"]:
        """Take the attempts past their timeout out of the running set and give up their
        threads; the caller writes their results."""
        with self._lock:
            expired = [item for item in self._running.values() if item.control.expires <= now]
            for item in expired:
                del self._running[item.job.id, item.job.attempt]
                self._outstanding -= 1
                self._stuck.add(item.thread)
        return expired

    def abandon_running(self) -> list[tuple[ClaimedJob, float]]:
        """At the deadline: the jobs still running, with how long they ran; their threads'
        results will no longer be written."""
        now = time.monotonic()
        with self._lock:
            self._abandoned = True
            return [(item.job, now - item.control.started) for item in self._running.values()]


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
        # a worker thread was given up to a task past its timeout: drain, to be replaced
        self.recycle = threading.Event()
        self._watching = threading.Event()  # cleared to stop the watchdog
        self.text_limits = TextLimits(settings.error_max_bytes, settings.traceback_max_bytes)
        self._results: SimpleQueue[AttemptResult | None] = SimpleQueue()
        # (job id, attempt) claimed and not yet written back, which the heartbeat renews, with
        # the monotonic time from which its lease last ran (its claim or its last renewal)
        self._held: dict[tuple[int, int], float] = {}
        self._cancels: set[tuple[int, int]] = set()  # held attempts asked to stop
        self._held_lock = threading.Lock()
        self._renewed_at = time.monotonic()  # the last heartbeat that got through
        self._cut_off = False  # the heartbeat has not got through for too long: no claims
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
        self.listens = settings.notify_url is not None  # else the fetch loops poll
        self._listener = threading.Thread(target=self._guard(self._listen_loop), name="listener")
        self._watchdog = threading.Thread(target=self._guard(self._watch_loop), name="watchdog")
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
        link.call(self._configure_rate_limits)
        link.call(self._learn_rate_limits)
        link.close()
        self._watching.set()
        self._renewed_at = time.monotonic()  # registered: the database answers now
        parts = [self._completer, self._heartbeat, self._watchdog, *self._daemons]
        if self.listens:
            parts.append(self._listener)
        else:
            log.info(
                "worker %s: no LISTEN (DATABASE_URL is a transaction pooler and PAUTA_LISTEN_URL "
                "is unset); polling every %g to %gs with jitter",
                self.worker_id,
                POLL_FLOOR_SECONDS,
                self.settings.poll_seconds,
            )
        for thread in parts:
            thread.start()
        if self.listens:
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
        if self.listens:
            self._listener.join()  # it may be claiming: its jobs must be in the buffers first
        unstarted = [job for c in self.consumers.values() for job in c.take_unstarted()]
        self._release([(job, False, 0.0) for job in unstarted])
        while any(c.busy() for c in self.consumers.values()):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.hurry.wait(min(remaining, 0.05)):
                break
        self._watching.clear()  # its results must reach the completer before the end
        self._watchdog.join()
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
        self._heartbeat.join()
        self._set_state("stopped")
        if self._pool is not None:
            self._pool.close()
        log.info("worker %s stopped", self.worker_id)

    def _configure_rate_limits(self, store: JobStore) -> None:
        """Write each served queue's limit from the settings (pauta.toml), where the console has
        not set one: the claims of every worker then enforce it through the queue's row."""
        for queue in self.settings.queues:
            rate = self.settings.rate_limits.get(queue)
            limit, period = (None, 1.0) if rate is None else parse_rate(queue, rate)
            store.configure_rate_limit(queue, limit, period)

    def _learn_rate_limits(self, store: JobStore) -> None:
        """Which of this process's queues have a rate limit now, for the fetch loops' pacing
        (the claim itself enforces the limit, whatever the runner knows)."""
        limits = store.rate_limits(list(self.consumers))
        for name, consumer in self.consumers.items():
            consumer.rate_limit = limits.get(name)

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

    def _link(
        self,
        name: str,
        stop: threading.Event | None = None,
        *,
        url: str | None = None,
        max_delay: float = 5.0,
        claims: bool = False,
    ) -> Link:
        """A connection to DATABASE_URL (or ``url``) with the settings' prepare threshold; its
        retries end when ``stop`` (by default ``hurry``) is set. A link that ``claims`` runs
        nothing but claims (and LISTEN), and reuses their generic plans (see :class:`Link`)."""
        return Link(
            url or self.settings.database_url,
            name,
            self.hurry if stop is None else stop,
            max_delay=max_delay,
            prepare_threshold=self.settings.prepare_after,
            pooled=self.settings.pooled,
            reuse_plans=claims,
        )

    def _set_state(self, state: str) -> None:
        if self.row_id is None:
            return
        row_id = self.row_id
        with self._held_lock:
            in_flight = len(self._held)
        abandoned = self.abandoned_threads()
        link = self._link("registry")
        link.call(
            lambda store: store.set_worker_state(row_id, state, in_flight, abandoned), tries=3
        )
        link.close()

    # -- bookkeeping shared by the parts -------------------------------------------------------

    def hold(self, jobs: list[ClaimedJob], lease_from: float) -> None:
        with self._held_lock:
            self._held.update(((job.id, job.attempt), lease_from) for job in jobs)

    def renewing(self) -> bool:
        """False while the heartbeat has not got through for two periods: the database (or
        the network to it) is out of reach, leases are not being renewed, and whatever this
        process claimed now might be rescued from it before it ran. Claims stop until a beat
        gets through again; the jobs already held are left to their leases and fences."""
        silent = time.monotonic() - self._renewed_at
        cut_off = silent > 2 * self.settings.heartbeat_seconds
        if cut_off != self._cut_off:
            self._cut_off = cut_off
            if cut_off:
                log.warning(
                    "worker %s: leases not renewed for %.1fs (the database is out of reach); "
                    "not claiming until a heartbeat gets through",
                    self.worker_id,
                    silent,
                )
            else:
                log.info("worker %s: the heartbeat got through again; claiming", self.worker_id)
        return not cut_off

    def lease_may_hold(self, job: ClaimedJob) -> bool:
        """False when the job's lease has run out by this process's clock (monotonic, which
        goes on while the process is stopped) since its claim or last renewal."""
        with self._held_lock:
            lease_from = self._held.get((job.id, job.attempt))
        if lease_from is None:  # the heartbeat learnt it was lost
            return False
        return time.monotonic() - lease_from < self.settings.lease_seconds

    def cancel_was_requested(self, job: ClaimedJob) -> bool:
        with self._held_lock:
            return (job.id, job.attempt) in self._cancels

    def forget_job(self, job: ClaimedJob) -> None:
        self._forget([(job.id, job.attempt)])

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
                    kwargs={**CONNECT_OPTIONS, "prepare_threshold": self.settings.prepare_after},
                )
        with self._pool.connection() as connection:
            yield connection

    def _release(self, jobs: list[tuple[ClaimedJob, bool, float]]) -> None:
        if not jobs:
            return
        link = self._link("release")
        rows = [(job.id, job.attempt, started, ran) for job, started, ran in jobs]
        released = link.call(lambda store: store.release(rows, self.worker_id), tries=5)
        link.close()
        self._forget((job.id, job.attempt) for job, _, _ in jobs)
        if released is None:
            log.error("could not release %d jobs; their leases will expire", len(jobs))
            return
        log.info("gave back %d jobs (%d had started)", len(jobs), len(released))

    def _forget(self, attempts: Iterable[tuple[int, int]]) -> None:
        with self._held_lock:
            for attempt in attempts:
                self._held.pop(attempt, None)
                self._cancels.discard(attempt)

    def timeout_of(self, job: ClaimedJob) -> float:
        """Seconds the attempt may run: the job's own timeout, else its task's, else the
        worker's default."""
        if job.timeout_seconds is not None:
            return job.timeout_seconds
        task = self.tasks.get(job.task)
        if task is not None and task.timeout is not None:
            return task.timeout
        return self.settings.timeout_seconds

    def abandoned_threads(self) -> int:
        return sum(consumer.stuck_threads() for consumer in self.consumers.values())

    # -- watchdog ------------------------------------------------------------------------------

    def _watch_loop(self) -> None:
        """End attempts that run past their timeout: write them ``timed_out`` (retried or dead
        by their policy), stop renewing their leases and give up their threads. Python cannot
        stop a thread, so the process then drains and exits to be replaced (``recycle``)."""
        while self._watching.is_set():
            now = time.monotonic()
            for consumer in self.consumers.values():
                for item in consumer.expire(now):
                    self._time_out(item)
            time.sleep(WATCH_SECONDS)

    def _time_out(self, item: "Running") -> None:
        job = item.job
        self._forget([(job.id, job.attempt)])  # the heartbeat no longer renews its lease
        task = self.tasks.get(job.task)
        delay = task.retry.delay(job.attempt) if task is not None else 0.0
        frame = sys._current_frames().get(item.thread.ident or -1)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else None
        self.submit(timed_out(job, item.control, delay, stack, self.text_limits))
        log.warning(
            "job %d attempt %d timed out after %gs; thread %s abandoned, this process will "
            "drain and be replaced",
            job.id,
            job.attempt,
            item.control.timeout,
            item.thread.name,
        )
        self.stopping.set()  # claim nothing more, not even this job's retry
        self.recycle.set()

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
        try:
            written = link.call(lambda store: store.finish(batch, self.worker_id))
        except Exception as error:  # the database refused a row, not the connection
            log.error(
                "could not write %d results together (%s: %s); writing them one by one",
                len(batch),
                type(error).__name__,
                str(error).strip().splitlines()[0] if str(error).strip() else "",
            )
            written = self._write_one_by_one(link, batch)
        if written is None:
            log.error("could not write %d results before the deadline", len(batch))
            return
        self._forget((result.job_id, result.attempt) for result in batch)
        instruments = telemetry.job_metrics()
        processed: Counter[tuple[str, str, str]] = Counter()  # counted once per batch
        times: list[tuple[str, str, float, float]] = []  # recorded once per batch
        debug = job_log.isEnabledFor(logging.DEBUG)
        for result in batch:
            fate = written.get((result.job_id, result.attempt))
            if fate is None:  # refused even alone: its lease will expire and it will run again
                continue
            if fate.how == "lost":
                log.warning(
                    "lost job %d attempt %d: its lease was taken over; result discarded",
                    result.job_id,
                    result.attempt,
                    extra=_job_fields(result, "lost", self.worker_id),
                )
                continue
            if fate.how == "written_before":
                log.info(
                    "job %d attempt %d: its result had been written before the connection broke",
                    result.job_id,
                    result.attempt,
                )
                continue
            outcome = "retry" if fate.state == "available" else str(fate.state)
            if instruments is not None:
                job = result.job
                processed[job.queue, job.task, outcome] += 1
                times.append((job.queue, job.task, result.duration, result.wait))
            if outcome == "cancelled":
                job_log.info(
                    "job %d attempt %d cancelled (%s)",
                    result.job_id,
                    result.attempt,
                    result.outcome,
                    extra=_job_fields(result, outcome, self.worker_id),
                )
            elif outcome == "succeeded":
                if debug:  # the record's fields cost more than the check
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
        if instruments is not None:
            instruments.record_times(times)
            for (queue, task, outcome), count in processed.items():
                instruments.count(queue, task, outcome, count)

    def _write_one_by_one(
        self, link: Link, batch: list[AttemptResult]
    ) -> dict[tuple[int, int], Written] | None:
        """Write each result alone; one the database still refuses is written once more
        without its error text, and if that fails too it is left to expire and run again."""
        written: dict[tuple[int, int], Written] = {}
        for result in batch:
            for attempt in (result, _without_text(result)):
                try:
                    write = partial(JobStore.finish, results=[attempt], worker=self.worker_id)
                    answer = link.call(write)
                except Exception as error:
                    log.error(
                        "could not write the result of job %d attempt %d (%s)",
                        result.job_id,
                        result.attempt,
                        type(error).__name__,
                    )
                    continue
                if answer is None:
                    return None  # stopping, and the database is unreachable
                written.update(answer)
                break
        return written

    # -- heartbeat -----------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        """Renew leases and this worker's row every heartbeat, until the very end of a drain,
        so in-flight jobs keep their leases. A beat that fails (the connection broke, or the
        server rolled it back) is retried within ``Link.call``, with backoff capped at a
        quarter of the heartbeat, so a lease is renewed well before it can expire."""
        settings = self.settings
        link = self._link("heartbeat", self.closing, max_delay=settings.heartbeat_seconds / 4)
        while not self.closing.wait(settings.heartbeat_seconds):
            link.call(self._beat)
        link.close()

    def _beat(self, store: JobStore) -> None:
        with self._held_lock:
            held = sorted(self._held)
        if held:
            renewed_from = time.monotonic()
            fates = store.extend_leases(held, self.worker_id, self.settings.lease_seconds)
            cancels = {pair for pair, fate in fates.items() if fate == "cancel_requested"}
            with self._held_lock:
                for pair, fate in fates.items():
                    if fate in ("extended", "cancel_requested") and pair in self._held:
                        self._held[pair] = renewed_from
                new_cancels = (cancels & self._held.keys()) - self._cancels
                self._cancels |= new_cancels
            for job_id, attempt in sorted(new_cancels):
                log.info("job %d attempt %d: cancel requested", job_id, attempt)
            if new_cancels:
                for consumer in self.consumers.values():
                    consumer.request_cancel(new_cancels)
            lost = [pair for pair, fate in fates.items() if fate == "lost"]
            for job_id, attempt in lost:
                log.warning("lost job %d attempt %d: its lease was taken over", job_id, attempt)
            self._forget(lost)  # its result, if it comes, will be fenced out
        self._learn_rate_limits(store)
        state = "draining" if self.stopping.is_set() else "running"
        abandoned = self.abandoned_threads()
        drain = self.row_id is not None and store.worker_heartbeat(
            self.row_id, state, len(held), abandoned
        )
        self._renewed_at = time.monotonic()
        if drain:
            if not self.drain_requested.is_set():
                log.info("worker %s: drain requested through the console", self.worker_id)
            self.drain_requested.set()

    # -- listener ------------------------------------------------------------------------------

    def _listen_loop(self) -> None:
        link = self._link("listener", self.stopping, url=self.settings.notify_url, claims=True)
        link.on_connect = self._on_listen_connect
        while not self.stopping.is_set():
            link.call(self._receive_notifications)
        link.close()

    def _receive_notifications(self, store: JobStore) -> None:
        # Leave the generator after the first notification: it holds the connection, and the
        # claim runs on this same connection right away. Later ones wait in psycopg's backlog.
        woken = {notice.payload for notice in store.connection.notifies(timeout=0.5, stop_after=1)}
        if not woken and store.connection.prepare_threshold is not None:
            # Half a second without a job: plan the claim again now if an ANALYZE or VACUUM of
            # the job tables (the leader's, autovacuum's) threw its cached plan away since the
            # last claim, so that the next job's claim does not plan it (1.6 ms here; the first
            # pickup after an idle spell was 3 to 4 ms, against 1 ms). A link that prepares
            # nothing (behind a pooler) keeps no plan to renew.
            self._prepare_listener_claim(store)
        for queue in woken:
            consumer = self.consumers.get(queue)
            if consumer is not None:
                consumer.claim_now(store)

    def _prepare_listener_claim(self, store: JobStore) -> None:
        first = next(iter(self.consumers.values()), None)
        if first is not None:  # one claim statement serves every queue
            first.prepare_claim(store)

    def _on_listen_connect(self, connection: psycopg.Connection[Any]) -> None:
        self._prepare_listener_claim(JobStore(connection))
        connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
        self._listening.set()
        for consumer in self.consumers.values():  # notifications may have been missed
            consumer.wake.set()


job_log = logging.getLogger("jobqueue.jobs")


def _without_text(result: AttemptResult) -> AttemptResult:
    """The result with its error text replaced by a note that it could not be stored."""
    note = "the attempt's error could not be stored; see the worker's log"
    return result._replace(error=note if result.error is not None else None, traceback=None)


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
