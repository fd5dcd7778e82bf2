"""The supervisor: a small arbiter that runs one child process per queue.

Modelled on gunicorn's arbiter. Signal handlers only put the signal on a queue; one loop waits
for signals with a timeout, dispatches them, reaps children, restarts a crashed child with
backoff and stops children that outlive the grace period. Two threads do the database work, so
an unreachable database never stalls the loop: the heartbeat (which also learns of a drain
asked through the ``workers`` table, and queues it like a signal) and the leader's maintenance
duties, which run in the supervisor, never in the children.

Children are started as fresh interpreters (fork and exec), so nothing of the supervisor's
threads or database connections leaks into them. Each child is a :class:`Runner` for one queue
that drains on SIGTERM or SIGUSR1, stops at once on SIGQUIT, and drains by itself if the
supervisor dies.

Exit codes the supervisor reads from a child: 0 — the child drained because it was asked (it is
not restarted); EXIT_RECYCLE — it drained because it holds threads stuck in tasks past their
timeout (replaced at once, like gunicorn's worker timeout); EXIT_CONFIG — it cannot boot (the
supervisor stops everything and exits with that code); anything else — a crash (restarted with
backoff).
"""

import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from queue import Empty, SimpleQueue

from jobqueue.connections import Link
from jobqueue.maintenance import Maintainer
from jobqueue.settings import WorkerSettings
from jobqueue.store import JobStore, WorkerIdentity

EXIT_OK = 0
EXIT_UNAVAILABLE = 69  # EX_UNAVAILABLE: the database could not be reached at start
EXIT_SOFTWARE = 70  # EX_SOFTWARE: a bug stopped the runner
EXIT_RECYCLE = 75  # EX_TEMPFAIL: it drained after giving up threads to timed-out tasks
EXIT_CONFIG = 78  # EX_CONFIG: the settings are wrong; restarting will not help

LOOP_SECONDS = 0.5
DRAIN_REQUESTED = 0  # queued, like a signal, by the heartbeat when the console asks for a drain
IGNORED_SIGNALS = (signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
STABLE_SECONDS = 60.0  # a child that ran this long has its restart backoff reset
KILL_MARGIN_SECONDS = 10.0  # past the grace period, before SIGKILL

log = logging.getLogger("jobqueue.supervisor")

ChildCommand = Callable[[str, int], list[str]]  # (queue, supervisor row id) -> argv


@dataclass
class Child:
    queue: str
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    failures: int = 0
    next_start: float = 0.0
    finished: bool = False  # drained on request: not restarted

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class Supervisor:
    def __init__(self, settings: WorkerSettings, child_command: ChildCommand) -> None:
        self.settings = settings
        self.child_command = child_command
        self.children = {queue: Child(queue) for queue in settings.queues}
        self.signals: SimpleQueue[int] = SimpleQueue()
        self.stopping = False
        self.exit_code = EXIT_OK
        self.kill_deadline: float | None = None
        self.row_id: int | None = None
        hostname = socket.gethostname()
        self.identity = WorkerIdentity(
            name=f"{hostname}:{os.getpid()}:supervisor",
            hostname=hostname,
            pid=os.getpid(),
            parent_id=None,
            queue=None,
            threads=sum(settings.queues.values()),
        )
        self._done = threading.Event()
        self._link = Link(
            settings.database_url,
            "supervisor",
            self._done,
            prepare_threshold=settings.prepare_after,
            pooled=settings.pooled,
        )
        self._heartbeat_thread = threading.Thread(
            target=self._heartbeat_loop, name="heartbeat", daemon=True
        )
        self._maintainer = Maintainer(settings, self.identity.name, self._done)
        self._maintainer_thread = threading.Thread(
            target=self._maintainer.run, name="maintainer", daemon=True
        )

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, *IGNORED_SIGNALS):
            signal.signal(signum, lambda signum, _frame: self.signals.put(signum))
        self.row_id = self._link.call(lambda store: store.register_worker(self.identity))
        self._heartbeat_thread.start()
        if self.settings.maintenance:
            self._maintainer_thread.start()
        queues = ", ".join(f"{name}={threads}" for name, threads in self.settings.queues.items())
        log.info("supervisor %s started; queues %s", self.identity.name, queues)
        while True:
            if not self.stopping:
                self.spawn_missing_children()
            try:
                self.dispatch(self.signals.get(timeout=LOOP_SECONDS))
            except Empty:
                pass
            self.reap_children()
            if self.stopping:
                if not any(child.alive for child in self.children.values()):
                    break
                self.kill_stale_children()
            elif all(child.finished for child in self.children.values()):
                log.info("every child drained on request; stopping")
                self.stopping = True
        self._done.set()
        for thread in (self._heartbeat_thread, self._maintainer_thread):
            if thread.is_alive():
                thread.join(10)  # the maintainer gives up the leadership, if it held it
        self._set_state("stopped")
        self._link.close()
        log.info("supervisor %s stopped", self.identity.name)
        return self.exit_code

    def dispatch(self, signum: int) -> None:
        if signum == DRAIN_REQUESTED:
            if not self.stopping:
                log.info("drain requested through the console")
                self.stop(graceful=True)
            return
        name = signal.Signals(signum).name
        if signum in IGNORED_SIGNALS:
            log.info("received %s: ignored (settings are read at start only)", name)
        elif signum == signal.SIGQUIT or self.stopping:
            log.info("received %s: stopping children at once", name)
            self.stop(graceful=False)
        else:
            log.info("received %s: draining children", name)
            self.stop(graceful=True)

    def stop(self, *, graceful: bool) -> None:
        """Graceful: each child drains within the grace period (SIGUSR1, which never escalates,
        so a child that also got systemd's SIGTERM drains once). Otherwise: SIGQUIT, at once."""
        if not self.stopping:
            self.stopping = True
            self.kill_deadline = (
                time.monotonic() + self.settings.grace_seconds + KILL_MARGIN_SECONDS
            )
            self._set_state("draining")
        for child in self.children.values():
            if child.alive and child.process is not None:
                child.process.send_signal(signal.SIGUSR1 if graceful else signal.SIGQUIT)

    # -- children ------------------------------------------------------------------------------

    def spawn_missing_children(self) -> None:
        now = time.monotonic()
        for child in self.children.values():
            if child.alive or child.finished or now < child.next_start:
                continue
            assert self.row_id is not None  # noqa: S101 - registered before the loop starts
            child.process = subprocess.Popen(  # noqa: S603 - our own interpreter and script
                self.child_command(child.queue, self.row_id)
            )
            child.started_at = now
            log.info("started child %d for queue %s", child.process.pid, child.queue)

    def reap_children(self) -> None:
        now = time.monotonic()
        for child in self.children.values():
            if child.process is None or child.process.poll() is None:
                continue
            code, pid = child.process.returncode, child.process.pid
            child.process = None
            if self.stopping:
                log.info("child %d for queue %s exited with %d", pid, child.queue, code)
            elif code == EXIT_OK:
                log.info("child %d for queue %s drained on request", pid, child.queue)
                child.finished = True
            elif code == EXIT_RECYCLE:
                log.info(
                    "child %d for queue %s recycled: it gave up threads to timed-out tasks; "
                    "starting a new one",
                    pid,
                    child.queue,
                )
                child.next_start = now
            elif code == EXIT_CONFIG:
                log.error(
                    "child %d for queue %s cannot boot (exit %d); stopping for good",
                    pid,
                    child.queue,
                    code,
                )
                self.exit_code = EXIT_CONFIG
                self.stop(graceful=True)
            else:
                if now - child.started_at >= STABLE_SECONDS:
                    child.failures = 0
                child.failures += 1
                backoff = min(
                    self.settings.restart_backoff_max_seconds, 2.0 ** (child.failures - 1)
                )
                child.next_start = now + backoff
                log.warning(
                    "child %d for queue %s died (%s); restarting in %gs",
                    pid,
                    child.queue,
                    _describe_exit(code),
                    backoff,
                )

    def kill_stale_children(self) -> None:
        if self.kill_deadline is None or time.monotonic() < self.kill_deadline:
            return
        for child in self.children.values():
            if child.alive and child.process is not None:
                log.error("child %d outlived the grace period: killing it", child.process.pid)
                child.process.kill()

    # -- registry ------------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        """Record the supervisor's heartbeat; queue a drain asked through the workers table."""
        link = Link(
            self.settings.database_url,
            "supervisor heartbeat",
            self._done,
            prepare_threshold=self.settings.prepare_after,
            pooled=self.settings.pooled,
        )
        row_id = self.row_id
        assert row_id is not None  # noqa: S101 - started after registering
        while not self._done.wait(self.settings.heartbeat_seconds):
            state = "draining" if self.stopping else "running"
            # A supervisor runs no jobs itself: its children report theirs.
            asked = link.call(
                partial(JobStore.worker_heartbeat, worker_id=row_id, state=state, in_flight=0),
                tries=1,
            )
            if asked:
                self.signals.put(DRAIN_REQUESTED)
        link.close()

    def _set_state(self, state: str) -> None:
        if self.row_id is not None:
            row_id = self.row_id
            self._link.call(lambda store: store.set_worker_state(row_id, state), tries=1)


def _describe_exit(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit {code}"
