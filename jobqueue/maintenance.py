"""Maintenance: rescue that every process does, and the duties of one leader.

Every maintainer (one per supervisor, and one per ``--single`` worker), every round:

- the **rescuer** returns jobs whose lease has expired to their queue (or to ``dead``), counting
  them in the per-minute stats in the same statement. Any number of processes may rescue at
  once, since ``FOR UPDATE SKIP LOCKED`` gives each expired row to one of them; so rescue never
  waits for one process to be alive and responsive;
- it marks workers that stopped heartbeating ``lost`` (idempotent, so anyone may).

One maintainer at a time, the **leader**, also samples queue depth once a minute, keeps the
history partitions (creates them ahead, drops the expired ones whole), prunes the old finished
jobs no partition drop takes (dead ones, stragglers), stats and worker rows, and enqueues the
jobs of ``schedules`` whose time has come (one job per period each: a daily retention job,
say), every round; where autovacuum
will not vacuum the churning tables (off on the server or for a table, which every maintainer
checks and warns about at its first round), it VACUUMs them every ``vacuum_seconds``; and,
autovacuum or not, it VACUUMs the claim's table ``jobs_live`` whenever ``vacuum_dead_rows``
dead rows wait in it: autovacuum visits a database once per ``autovacuum_naptime`` (a minute
by default), in which a busy queue leaves hundreds of thousands of dead rows for every claim
to walk past.

Leadership is a lease row in ``leaders`` (holder, term, expires_at, all in database time),
renewed every round and taken over by anyone once it has expired; each leader-only write names
the term it believes it holds and writes nothing if that term is over, so a leader that was
frozen past its lease and wakes up cannot write: it notices at its next renewal and steps down.
The vacuum is the exception: not fenced, and harmless if two processes run it.
"""

import logging
import random
import threading
import time

from jobqueue import telemetry
from jobqueue.connections import Link
from jobqueue.settings import WorkerSettings
from jobqueue.store import JobStore, Term

RESCUE_BATCH = 1000
PRUNE_BATCH = 5000
# jobs_live is analyzed by the leader once it holds at least this many rows and more than twice
# what its statistics know (a burst the planner has not seen: see live_table_outgrown)
ANALYZE_OUTGROWN_ROWS = 10_000
MAINTENANCE = "maintenance"  # the leaders row of the maintenance duties

log = logging.getLogger("jobqueue.maintenance")


class Maintainer:
    def __init__(self, settings: WorkerSettings, name: str, stop: threading.Event) -> None:
        self.settings = settings
        self.name = name
        self.stop = stop
        self.term: Term | None = None  # the leadership term held, as far as this process knows
        self.rounds = 0  # completed rounds (tests wait on it)
        self._sampled_minute = -1  # wall-clock period of the last depth sample
        self._depth: tuple[float, list[tuple[str, str, float]]] = (float("-inf"), [])
        telemetry.observe_queue_depth(self._depth_readings)
        self._next_prune = 0.0
        self._vacuum_gaps: list[tuple[str, str]] | None = None  # None until checked
        self._next_vacuum = 0.0
        self._link = Link(
            settings.database_url,
            "maintainer",
            stop,
            prepare_threshold=settings.prepare_after,
            pooled=settings.pooled,
        )

    @property
    def is_leader(self) -> bool:
        return self.term is not None

    def run(self) -> None:
        """Loop until ``stop`` is set; then give up the leadership, if held."""
        while not self.stop.is_set():
            try:
                self._link.call(self.round, tries=1)
            except Exception:
                # A bug or an unexpected database error: log it, stop leading (the next round
                # may win again) and carry on; rescue must not die with one bad round.
                log.exception("maintenance round failed")
                self.term = None
            jitter = random.uniform(0.8, 1.2)  # noqa: S311 - spreading load, not security
            self.stop.wait(self.settings.sweep_seconds * jitter)
        self._resign()
        self._link.close()

    def round(self, store: JobStore) -> None:
        """One round: rescue and mark lost workers; then, as leader, the leader's duties."""
        if self._vacuum_gaps is None:
            self._check_autovacuum(store)
        self._rescue(store)
        lost = store.mark_lost_workers(self.settings.lost_after_seconds)
        if lost:
            log.warning("marked %d silent workers lost: %s", len(lost), ", ".join(lost))
        term = self._lead(store)
        if term is not None:
            self._leader_duties(store, term)
        self.rounds += 1

    def _rescue(self, store: JobStore) -> None:
        while rescued := store.rescue_expired(RESCUE_BATCH):
            dead = sum(1 for job in rescued if job.state == "dead")
            workers = ", ".join(sorted({job.worker for job in rescued}))
            log.warning(
                "rescued %d jobs with expired leases (%d now dead) from %s",
                len(rescued),
                dead,
                workers,
            )
            if len(rescued) < RESCUE_BATCH:
                break

    def _lead(self, store: JobStore) -> Term | None:
        """Renew the term held, or try to win one; returns the term this round may use."""
        ttl = self.settings.leader_lease_seconds
        if self.term is not None and not store.renew(self.term, ttl):
            current = store.leader(MAINTENANCE)
            log.warning(
                "%s lost the maintenance leadership (term %d is over; %s); stepping down",
                self.name,
                self.term.number,
                "nobody leads now"
                if current is None or not current["live"]
                else f"{current['holder']} leads in term {current['term']}",
            )
            self.term = None
        if self.term is None:
            self.term = store.elect(MAINTENANCE, self.name, ttl)
            if self.term is not None:
                log.info("%s leads maintenance in term %d", self.name, self.term.number)
                self._sampled_minute = -1
                self._next_prune = 0.0
        return self.term

    def _leader_duties(self, store: JobStore, term: Term) -> None:
        for name, job_id in store.enqueue_due_schedules(term):
            log.info("enqueued scheduled job %d (%s)", job_id, name)
        period = int(time.time() // self.settings.depth_sample_seconds)
        if period != self._sampled_minute:  # once per period, aligned to the clock
            store.sample_depth(term)
            self._sampled_minute = period
        now = time.monotonic()
        if now >= self._next_prune:
            self._prune(store, term)
            self._next_prune = now + self.settings.prune_seconds
        if self._vacuum_gaps and now >= self._next_vacuum:
            started = time.monotonic()
            store.vacuum_hot_tables()
            log.info("vacuumed the churning tables in %.2fs", time.monotonic() - started)
            self._next_vacuum = time.monotonic() + self.settings.vacuum_seconds
        if store.analyze_live_table_if_outgrown(ANALYZE_OUTGROWN_ROWS):
            log.info("analyzed jobs_live: it held far more rows than its statistics knew")
        threshold = self.settings.vacuum_dead_rows
        if threshold and (dead := store.live_dead_rows()) >= threshold:
            started = time.monotonic()
            store.vacuum_live_table()
            log.debug(
                "vacuumed jobs_live (%d dead rows) in %.2fs", dead, time.monotonic() - started
            )

    def _check_autovacuum(self, store: JobStore) -> None:
        """Warn, once, when autovacuum will not vacuum the churning tables: without vacuum a
        claim walks ever more dead index entries (measured: 1.6M dead rows in jobs after 800,000
        jobs, and one worker's drain down from about 10,000 to 3,700 jobs/s)."""
        self._vacuum_gaps = store.autovacuum_gaps()
        if self._vacuum_gaps:
            reasons = sorted({reason for _, reason in self._vacuum_gaps})
            log.warning(
                "autovacuum will not vacuum %s (%s); the maintenance leader will VACUUM them "
                "every %gs",
                ", ".join(table for table, _ in self._vacuum_gaps),
                "; ".join(reasons),
                self.settings.vacuum_seconds,
            )

    def _prune(self, store: JobStore, term: Term) -> None:
        settings = self.settings
        period = settings.history_partition_seconds
        # Partitions for the next two prune rounds at least, so a finish never lands in the
        # default partition while this leader lives.
        ahead = max(2 * period, period + 2 * settings.prune_seconds)
        for action, partition in store.history_partitions(
            term, period, settings.keep_succeeded_seconds, ahead
        ):
            log.info("%s history partition %s", action, partition)
        total = 0
        while not self.stop.is_set():
            deleted = store.prune(
                term, settings.keep_succeeded_seconds, settings.keep_dead_seconds, PRUNE_BATCH
            )
            total += deleted
            if deleted < PRUNE_BATCH:
                break
        store.prune_stats(term, settings.keep_stats_seconds)
        if total:
            log.info("pruned %d finished jobs", total)

    def _resign(self) -> None:
        term = self.term
        if term is None:
            return
        self.term = None
        if self._link.call(lambda store: store.resign(term), tries=2):
            log.info("%s gave up the maintenance leadership (term %d)", self.name, term.number)

    def _depth_readings(self) -> list[tuple[str, str, float]]:
        """The gauges' values, read when the metrics are collected, by the leader only."""
        if not self.is_leader:
            return []
        taken_at, readings = self._depth
        if time.monotonic() - taken_at > 1.0:  # both gauges are collected together: read once
            link = Link(
                self.settings.database_url,
                "depth gauges",
                self.stop,
                prepare_threshold=self.settings.prepare_after,
                pooled=self.settings.pooled,
            )
            try:
                readings = link.call(JobStore.queue_depth, tries=1) or []
            finally:
                link.close()
            self._depth = (time.monotonic(), readings)
        return readings
