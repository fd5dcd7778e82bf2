"""Per-minute job counters, kept in memory by each worker and flushed as deltas.

A worker counts what its attempts ended with — succeeded, failed (a retry was scheduled), dead,
released — and their run and wait times, keyed by (queue, minute, tenant). Every few seconds
the deltas go to ``job_stats_minute`` in one UPSERT; if that fails they are merged back and
sent with the next flush, so nothing is counted twice or lost while the process lives.
"""

import threading
from dataclasses import dataclass, field
from datetime import datetime

StatsKey = tuple[str, datetime, int]  # queue, minute (database time), tenant id


@dataclass(slots=True)
class Counters:
    succeeded: int = 0
    failed: int = 0
    dead: int = 0
    released: int = 0
    runtime_sum: float = 0.0
    runtime_max: float = 0.0
    wait_sum: float = 0.0
    wait_max: float = 0.0

    def add_runtime(self, runtime: float, wait: float) -> None:
        self.runtime_sum += runtime
        self.runtime_max = max(self.runtime_max, runtime)
        self.wait_sum += wait
        self.wait_max = max(self.wait_max, wait)

    def merge(self, other: "Counters") -> None:
        self.succeeded += other.succeeded
        self.failed += other.failed
        self.dead += other.dead
        self.released += other.released
        self.runtime_sum += other.runtime_sum
        self.runtime_max = max(self.runtime_max, other.runtime_max)
        self.wait_sum += other.wait_sum
        self.wait_max = max(self.wait_max, other.wait_max)


OUTCOME_FIELDS = {"succeeded": "succeeded", "available": "failed", "dead": "dead"}


@dataclass
class StatsRecorder:
    _counters: dict[StatsKey, Counters] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def finished(
        self, key: StatsKey, new_state: str, runtime: float | None, wait: float | None
    ) -> None:
        """Count an attempt that ended in ``new_state`` ('available' means a retry is due)."""
        with self._lock:
            counters = self._counters.setdefault(key, Counters())
            name = OUTCOME_FIELDS[new_state]
            setattr(counters, name, getattr(counters, name) + 1)
            if runtime is not None and wait is not None:
                counters.add_runtime(runtime, wait)

    def released(self, key: StatsKey) -> None:
        with self._lock:
            self._counters.setdefault(key, Counters()).released += 1

    def take(self) -> dict[StatsKey, Counters]:
        """Everything counted since the last take; the recorder starts again from zero."""
        with self._lock:
            taken, self._counters = self._counters, {}
        return taken

    def give_back(self, taken: dict[StatsKey, Counters]) -> None:
        """Merge deltas that could not be written, so the next flush carries them."""
        with self._lock:
            for key, counters in taken.items():
                self._counters.setdefault(key, Counters()).merge(counters)
