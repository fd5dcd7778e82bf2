"""The overview's figures, per queue and in total: live counts from the jobs' partial indexes,
outcomes, rates and times from the per-minute stats.

A window of N minutes covers the N whole minutes before the current one plus the current one
so far, so its rate is its count divided by the time it really covers (N minutes and a part):
stable at the start of a minute, and exact once the workers have flushed (every few seconds).
"""

from dataclasses import dataclass, field
from typing import Any

from flask_babel import lazy_gettext as _l

from console import formatting
from jobqueue.inspect import JobInspector, Row

WINDOWS = (1, 5, 60)  # minutes
TIMED_WINDOW = 5  # run and wait times, and the error rate, are over this window
STATE_NAMES = {"paused": _l("paused"), "no live worker": _l("no live worker")}


@dataclass(frozen=True, slots=True)
class Outcomes:
    succeeded: int = 0
    failed: int = 0  # attempts after which a retry was scheduled
    dead: int = 0

    @property
    def attempts(self) -> int:
        return self.succeeded + self.failed + self.dead

    def __add__(self, other: "Outcomes") -> "Outcomes":
        return Outcomes(
            self.succeeded + other.succeeded, self.failed + other.failed, self.dead + other.dead
        )


@dataclass(slots=True)
class QueueFigures:
    queue: str  # empty for the totals
    paused: bool = False
    paused_by: str | None = None
    available: int = 0
    scheduled: int = 0
    running: int = 0
    dead: int = 0
    oldest_waiting_seconds: float | None = None
    live_workers: int = 0
    outcomes: dict[int, Outcomes] = field(default_factory=lambda: {w: Outcomes() for w in WINDOWS})
    runtime_sum: float = 0.0
    runtime_max: float | None = None
    wait_sum: float = 0.0
    wait_max: float | None = None
    into_minute_seconds: float = 0.0

    @property
    def unserved(self) -> bool:
        """Jobs are waiting, scheduled or running, yet no live worker serves the queue: nothing
        will run them (a running job's lease will expire and the job wait like the others)."""
        return self.live_workers == 0 and bool(self.available + self.scheduled + self.running)

    @property
    def state(self) -> str:
        """What the queue's badge says; empty while it is served as it should be."""
        if self.paused:
            return "paused"
        return "no live worker" if self.unserved else ""

    def rate(self, window: int) -> float:
        """Attempts finished per minute over the window."""
        covered_minutes = window + self.into_minute_seconds / 60
        return self.outcomes[window].attempts / covered_minutes

    @property
    def error_rate(self) -> float | None:
        timed = self.outcomes[TIMED_WINDOW]
        return (timed.failed + timed.dead) / timed.attempts if timed.attempts else None

    @property
    def runtime_avg(self) -> float | None:
        attempts = self.outcomes[TIMED_WINDOW].attempts
        return self.runtime_sum / attempts if attempts else None

    @property
    def wait_avg(self) -> float | None:
        attempts = self.outcomes[TIMED_WINDOW].attempts
        return self.wait_sum / attempts if attempts else None

    def values(self) -> dict[str, Any]:
        """The raw figures (for JSON readers other than the page)."""
        return {
            "paused": self.paused,
            "unserved": self.unserved,
            "available": self.available,
            "scheduled": self.scheduled,
            "running": self.running,
            "dead": self.dead,
            "oldest_waiting_seconds": self.oldest_waiting_seconds,
            "live_workers": self.live_workers,
            **{
                f"{outcome}_{window}m": getattr(self.outcomes[window], outcome)
                for window in WINDOWS
                for outcome in ("succeeded", "failed", "dead")
            },
            **{f"rate_{window}m": round(self.rate(window), 3) for window in WINDOWS},
            "error_rate_5m": self.error_rate,
            "runtime_avg_5m": self.runtime_avg,
            "runtime_max_5m": self.runtime_max,
            "wait_avg_5m": self.wait_avg,
            "wait_max_5m": self.wait_max,
        }

    def display(self) -> dict[str, str]:
        """The same figures as the page writes them; keys are the cells' ``data-field``."""
        last_hour = self.outcomes[60]
        return {
            "state": str(STATE_NAMES[self.state]) if self.state else "",
            "available": formatting.count(self.available),
            "scheduled": formatting.count(self.scheduled),
            "running": formatting.count(self.running),
            "dead": formatting.count(self.dead),
            "rate_1m": formatting.rate(self.rate(1)),
            "rate_5m": formatting.rate(self.rate(5)),
            "rate_60m": formatting.rate(self.rate(60)),
            "succeeded_60m": formatting.count(last_hour.succeeded),
            "failed_60m": formatting.count(last_hour.failed),
            "dead_60m": formatting.count(last_hour.dead),
            "error_rate": formatting.percent(self.error_rate),
            "runtime_avg": formatting.seconds(self.runtime_avg),
            "runtime_max": formatting.seconds(self.runtime_max),
            "wait_avg": formatting.seconds(self.wait_avg),
            "wait_max": formatting.seconds(self.wait_max),
            "oldest_waiting": formatting.seconds(self.oldest_waiting_seconds),
            "live_workers": formatting.count(self.live_workers),
        }

    def as_json(self) -> dict[str, Any]:
        return {"queue": self.queue, "values": self.values(), "display": self.display()}


@dataclass(slots=True)
class Overview:
    queues: list[QueueFigures]
    totals: QueueFigures

    @property
    def unserved(self) -> list[str]:
        """The queues with work and no live worker."""
        return [queue.queue for queue in self.queues if queue.unserved]

    def as_json(self) -> dict[str, Any]:
        totals = self.totals.as_json()
        totals["display"]["unserved_queues"] = ", ".join(self.unserved)
        return {"queues": [queue.as_json() for queue in self.queues], "totals": totals}


def overview(inspector: JobInspector, tenant_id: int | None, queue: str | None = None) -> Overview:
    """Every known queue's figures (or one queue's), narrowed to a tenant when one is given."""
    live = inspector.queue_live(tenant_id, queue)
    outcomes = {row["queue"]: row for row in inspector.queue_outcomes(tenant_id, queue)}
    into_minute = next(iter(outcomes.values()), {}).get("into_minute_seconds", 0.0)
    queues = [_queue_figures(row, outcomes.get(row["queue"]), into_minute) for row in live]
    if queue is not None:  # one queue's totals are its own figures, its live workers too
        processes = queues[0].live_workers if queues else 0
    else:
        processes = live[0]["live_processes"] if live else 0
    totals = _totals(queues, live_processes=processes)
    totals.into_minute_seconds = into_minute
    return Overview(queues, totals)


def _queue_figures(live: Row, stats: Row | None, into_minute: float) -> QueueFigures:
    figures = QueueFigures(
        queue=live["queue"],
        paused=live["paused"],
        paused_by=live["paused_by"],
        available=live["available"],
        scheduled=live["scheduled"],
        running=live["running"],
        dead=live["dead"],
        oldest_waiting_seconds=live["oldest_waiting_seconds"],
        live_workers=live["live_workers"],
        into_minute_seconds=into_minute,
    )
    if stats is not None:
        figures.outcomes = {
            window: Outcomes(
                int(stats[f"succeeded_{window}m"] or 0),
                int(stats[f"failed_{window}m"] or 0),
                int(stats[f"dead_{window}m"] or 0),
            )
            for window in WINDOWS
        }
        figures.runtime_sum = stats["runtime_sum_5m"] or 0.0
        figures.runtime_max = stats["runtime_max_5m"]
        figures.wait_sum = stats["wait_sum_5m"] or 0.0
        figures.wait_max = stats["wait_max_5m"]
    return figures


def _totals(queues: list[QueueFigures], live_processes: int) -> QueueFigures:
    totals = QueueFigures(queue="", live_workers=live_processes)
    for figures in queues:
        totals.available += figures.available
        totals.scheduled += figures.scheduled
        totals.running += figures.running
        totals.dead += figures.dead
        totals.oldest_waiting_seconds = _largest(
            totals.oldest_waiting_seconds, figures.oldest_waiting_seconds
        )
        totals.outcomes = {w: totals.outcomes[w] + figures.outcomes[w] for w in WINDOWS}
        totals.runtime_sum += figures.runtime_sum
        totals.runtime_max = _largest(totals.runtime_max, figures.runtime_max)
        totals.wait_sum += figures.wait_sum
        totals.wait_max = _largest(totals.wait_max, figures.wait_max)
    return totals


def _largest(a: float | None, b: float | None) -> float | None:
    present = [value for value in (a, b) if value is not None]
    return max(present) if present else None
