"""Maintenance that one process at a time does for everyone: the leader's duties.

Whoever holds the leader lock (a session advisory lock, freed if its connection dies) sweeps
expired leases back to their queues, marks silent workers lost, samples queue depth once a
minute and prunes old finished jobs, stats and worker rows. Several hosts can run workers; only
one of them maintains at any moment.
"""

import logging
import random
import threading
import time
from typing import Any

import psycopg

from jobqueue import telemetry
from jobqueue.connections import Link
from jobqueue.settings import WorkerSettings
from jobqueue.stats import StatsRecorder
from jobqueue.store import JobStore

RESCUE_BATCH = 1000
PRUNE_BATCH = 5000

log = logging.getLogger("jobqueue.maintenance")


class Maintainer:
    def __init__(self, settings: WorkerSettings, name: str, stop: threading.Event) -> None:
        self.settings = settings
        self.name = name
        self.stop = stop
        self.is_leader = False
        self.rounds = 0  # completed maintenance rounds as leader (tests wait on it)
        self._stats = StatsRecorder()  # what the sweeper decides counts in the per-minute stats
        self._sampled_minute = -1  # wall-clock minute of the last depth sample
        self._depth: tuple[float, list[tuple[str, str, float]]] = (float("-inf"), [])
        telemetry.observe_queue_depth(self._depth_readings)
        self._next_prune = 0.0
        self._link = Link(settings.database_url, "maintainer", stop)
        self._link.on_connect = self._on_connect

    def run(self) -> None:
        """Loop until ``stop`` is set; the lock is freed by closing the session at the end."""
        while not self.stop.is_set():
            if not self.is_leader:
                self.is_leader = bool(self._link.call(JobStore.try_become_leader, tries=1))
                if self.is_leader:
                    log.info("%s is the maintenance leader", self.name)
            if self.is_leader:  # one try per duty: after a reconnect the lock must be won again
                try:
                    self._link.call(self._maintain, tries=1)
                except Exception:
                    # A bug or an unexpected database error: give up the lock (by closing the
                    # session) so that another process can lead, and try again next round.
                    log.exception("maintenance failed; stepping down")
                    self._link.close()
                    self.is_leader = False
            jitter = random.uniform(0.8, 1.2)  # noqa: S311 - spreading load, not security
            self.stop.wait(self.settings.sweep_seconds * jitter)
        self._link.close()

    def _on_connect(self, _connection: psycopg.Connection[Any]) -> None:
        self.is_leader = False  # a new session holds no lock

    def _maintain(self, store: JobStore) -> None:
        if not self.is_leader:  # the connection was reopened: this session holds no lock
            return
        self._sweep(store)
        lost = store.mark_lost_workers(self.settings.lost_after_seconds)
        if lost:
            log.warning("marked %d silent workers lost: %s", len(lost), ", ".join(lost))
        minute = int(time.time() // self.settings.depth_sample_seconds)
        if minute != self._sampled_minute:  # once per period, aligned to the clock
            store.sample_depth()
            self._sampled_minute = minute
        now = time.monotonic()
        if now >= self._next_prune:
            self._prune(store)
            self._next_prune = now + self.settings.prune_seconds
        self.rounds += 1

    def _depth_readings(self) -> list[tuple[str, str, float]]:
        """The gauges' values, read when the metrics are collected, by the leader only."""
        if not self.is_leader:
            return []
        taken_at, readings = self._depth
        if time.monotonic() - taken_at > 1.0:  # both gauges are collected together: read once
            link = Link(self.settings.database_url, "depth gauges", self.stop)
            try:
                readings = link.call(JobStore.queue_depth, tries=1) or []
            finally:
                link.close()
            self._depth = (time.monotonic(), readings)
        return readings

    def _sweep(self, store: JobStore) -> None:
        while rescued := store.rescue_expired(RESCUE_BATCH):
            for job in rescued:
                self._stats.finished((job.queue, job.minute, job.tenant_id), job.state, None, None)
            dead = sum(1 for job in rescued if job.state == "dead")
            log.warning("rescued %d jobs with expired leases (%d now dead)", len(rescued), dead)
            if len(rescued) < RESCUE_BATCH:
                break
        counted = self._stats.take()
        try:
            store.add_stats(counted)
        except psycopg.Error:
            self._stats.give_back(counted)
            raise

    def _prune(self, store: JobStore) -> None:
        settings = self.settings
        total = 0
        while not self.stop.is_set():
            deleted = store.prune(
                settings.keep_succeeded_seconds, settings.keep_dead_seconds, PRUNE_BATCH
            )
            total += deleted
            if deleted < PRUNE_BATCH:
                break
        store.prune_stats(settings.keep_stats_seconds)
        if total:
            log.info("pruned %d finished jobs", total)
