"""Checks of the engine's tables after a run, shared by the tests and the chaos run.

- :func:`stats_against_truth`: ``job_stats_minute`` against what ``job_attempts`` says
  happened, per queue, minute and tenant;
- :func:`ledger_report`: the runs a test task recorded in a ledger against the attempt rows,
  sorted the way Jepsen's queue checker sorts a history: lost, unexpected, and repeated runs
  with the reason the attempt rows give for each.
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import psycopg

Conn = psycopg.Connection[Any]
StatsRow = tuple[int, int, int, int]  # succeeded, failed (a retry followed), dead, released

TRUTH = """
SELECT j.queue, date_trunc('minute', a.finished_at), j.tenant_id,
       count(*) FILTER (WHERE a.outcome = 'succeeded'),
       count(*) FILTER (WHERE a.outcome IN ('failed', 'lease_expired')
                        AND NOT (j.state = 'dead' AND a.attempt = j.attempt)),
       count(*) FILTER (WHERE j.state = 'dead' AND a.attempt = j.attempt),
       count(*) FILTER (WHERE a.outcome = 'released')
FROM job_attempts a JOIN jobs j ON j.id = a.job_id
GROUP BY 1, 2, 3
"""

ROLLED_UP = """
SELECT queue, minute, tenant_id, succeeded, failed, dead, released
FROM job_stats_minute
WHERE succeeded + failed + dead + released > 0
"""


def stats_against_truth(
    conn: Conn,
) -> dict[tuple[Any, ...], tuple[StatsRow | None, StatsRow | None]]:
    """Every (queue, minute, tenant) where the per-minute stats differ from the attempt rows:
    {key: (counted, truth)}; empty when they agree."""
    truth = {tuple(row[:3]): tuple(row[3:]) for row in conn.execute(TRUTH)}
    counted = {tuple(row[:3]): tuple(row[3:]) for row in conn.execute(ROLLED_UP)}
    return {
        key: (counted.get(key), truth.get(key))  # type: ignore[misc]
        for key in truth.keys() | counted.keys()
        if counted.get(key) != truth.get(key)
    }


@dataclass
class LedgerReport:
    """What a ledgered run did, by job."""

    jobs: int = 0
    succeeded: int = 0
    lost: list[int] = field(default_factory=list)  # acknowledged, not succeeded
    never_ran: list[int] = field(default_factory=list)  # succeeded with no run in the ledger
    unexpected: list[int] = field(default_factory=list)  # ran, but never enqueued
    repeated: Counter[str] = field(default_factory=Counter)  # extra runs, by the attempt's fate
    unexplained: list[tuple[int, int, str]] = field(default_factory=list)  # (job, attempt, why)
    left_running: int = 0

    @property
    def valid(self) -> bool:
        return not (
            self.lost or self.never_ran or self.unexpected or self.unexplained or self.left_running
        )


LEDGER_RUNS = """
SELECT l.job_id, l.attempt, l.worker, a.outcome, a.worker, j.state, j.attempt
FROM {ledger} l
LEFT JOIN job_attempts a ON a.job_id = l.job_id AND a.attempt = l.attempt
LEFT JOIN jobs j ON j.id = l.job_id
ORDER BY l.job_id, l.attempt
"""


def ledger_report(
    conn: Conn,
    enqueued: set[int],
    interrupted: set[str],
    ledger: str = "chaos_ledger",
) -> LedgerReport:
    """Check a ledgered run: each enqueued job succeeded; each succeeded job's run is in the
    ledger once, from its succeeded attempt; every other run in the ledger belongs to an
    attempt that the rows say was cut short (``lease_expired`` or ``released``) by a process
    named in ``interrupted`` (killed or frozen while it ran), or that failed after its effect
    committed (``failed``, when a connection fault hit the task's own commit)."""
    report = LedgerReport(jobs=len(enqueued))
    states = dict(conn.execute("SELECT id, state FROM jobs").fetchall())
    report.lost = sorted(job for job in enqueued if states.get(job) != "succeeded")
    report.succeeded = sum(1 for job in enqueued if states.get(job) == "succeeded")
    report.left_running = sum(1 for state in states.values() if state == "running")
    winners: Counter[int] = Counter()
    ran: set[int] = set()
    for job_id, attempt, _, outcome, attempt_worker, state, _ in conn.execute(
        LEDGER_RUNS.format(ledger=ledger)  # our own table name, not input
    ):
        ran.add(job_id)
        if job_id not in enqueued:
            report.unexpected.append(job_id)
        elif outcome == "succeeded" and state == "succeeded":
            winners[job_id] += 1
        elif outcome in ("lease_expired", "released") and attempt_worker in interrupted:
            report.repeated[f"{outcome} (process killed or frozen)"] += 1
        elif outcome == "failed":
            report.repeated["failed after its effect committed (connection fault)"] += 1
        else:
            report.unexplained.append((job_id, attempt, f"attempt {outcome} by {attempt_worker}"))
    report.never_ran = sorted(
        job for job in enqueued if states.get(job) == "succeeded" and not winners[job]
    )
    for job_id, runs in winners.items():
        if runs > 1:
            report.unexplained.append((job_id, 0, f"{runs} runs of its succeeded attempt"))
    report.unexpected = sorted(set(report.unexpected))
    return report
