"""Delivery of a cycle's notifications, read from the engine's rows (``jobs``, ``job_attempts``).

Each reviewer's e-mail is one ``hr.notify_reviewer`` job; its state says where the e-mail is,
except that a worker claims jobs ahead of its threads (prefetch): a ``running`` job is being
sent only once the task has recorded the attempt's start in ``review_notice_starts``; before
that it is still waiting, "queued". The look-up by (tenant, task, cycle) is served by the dedup
index ``jobs_notify_reviewer_key``. Always scoped to the cycle's tenant.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, Select, func, select
from sqlalchemy.orm import Session

from hr.tasks import NOTIFY_REVIEWER
from models import Job, JobAttempt, ReviewCycle, ReviewNoticeStart

# Notifications that may still change by themselves: the cycle page keeps refreshing for them.
PENDING = frozenset({"queued", "sending", "retrying"})


@dataclass(frozen=True, slots=True)
class Delivery:
    job_id: int
    reviewer_id: int
    state: str
    attempt: int
    max_attempts: int
    available_at: datetime
    finished_at: datetime | None
    last_error: str | None
    waiting: bool  # available_at is still in the future (database time)
    started: bool  # a worker thread has begun this attempt (not just claimed it)

    @property
    def status(self) -> str:
        """queued, sending, retrying, delivered, dead or cancelled."""
        if self.state == "available":
            return "retrying" if self.attempt else "queued"
        if self.state == "running":
            return "sending" if self.started else "queued"
        return {"succeeded": "delivered"}.get(self.state, self.state)

    @property
    def next_try_at(self) -> datetime | None:
        return self.available_at if self.status == "retrying" else None


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    attempt: int
    started_at: datetime
    finished_at: datetime
    outcome: str
    error: str | None
    duration: timedelta


def _deliveries(cycle: ReviewCycle) -> Select[Any]:
    return (
        select(
            Job.id,
            Job.payload["reviewer_id"].astext.cast(BigInteger),
            Job.state,
            Job.attempt,
            Job.max_attempts,
            Job.available_at,
            Job.finished_at,
            Job.last_error,
            Job.available_at > func.now(),
            func.coalesce(ReviewNoticeStart.attempt == Job.attempt, False),
        )
        .outerjoin(ReviewNoticeStart, ReviewNoticeStart.job_id == Job.id)
        .where(
            Job.tenant_id == cycle.tenant_id,
            Job.task == NOTIFY_REVIEWER,
            Job.payload["cycle_id"].astext == str(cycle.id),
        )
    )


def deliveries(session: Session, cycle: ReviewCycle) -> dict[int, Delivery]:
    """The notification of each reviewer of ``cycle``, by reviewer id."""
    return {row[1]: Delivery(*row) for row in session.execute(_deliveries(cycle))}


def delivery(session: Session, cycle: ReviewCycle, job_id: int) -> Delivery | None:
    """One notification job of ``cycle``; None if the id is not one of them."""
    row = session.execute(_deliveries(cycle).where(Job.id == job_id)).one_or_none()
    return None if row is None else Delivery(*row)


def delivery_attempts(session: Session, job_id: int) -> list[DeliveryAttempt]:
    """The attempts of a notification job (found with :func:`delivery` first), oldest first."""
    rows = session.execute(
        select(
            JobAttempt.attempt,
            JobAttempt.started_at,
            JobAttempt.finished_at,
            JobAttempt.outcome,
            JobAttempt.error,
            JobAttempt.duration,
        )
        .where(JobAttempt.job_id == job_id)
        .order_by(JobAttempt.attempt)
    )
    return [DeliveryAttempt(*row) for row in rows]


def still_pending(found: dict[int, Delivery]) -> bool:
    """Whether any notification may still change state by itself."""
    return any(item.status in PENDING for item in found.values())


def delivery_counts(found: dict[int, Delivery]) -> dict[str, int]:
    """How many notifications are in each status."""
    counts: dict[str, int] = {}
    for item in found.values():
        counts[item.status] = counts.get(item.status, 0) + 1
    return counts
