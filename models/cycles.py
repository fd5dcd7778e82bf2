"""Review cycles: the cycle, who takes part, the reviews it asks for, and the notification dedup.

Every table carries ``tenant_id`` and points at its cycle and employees through composite
foreign keys ``(tenant_id, id)``, so a row can never mix tenants.
"""

from datetime import date, datetime
from enum import StrEnum

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    SmallInteger,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from models import db
from models.jobs import Job, JobOnceKey
from models.people import one_of

NOTIFY_REVIEWER_TASK = "hr.notify_reviewer"


class CycleStatus(StrEnum):
    """draft -> active -> closed; draft -> cancelled. Drawn in docs/reference/roles.md."""

    DRAFT = "draft"  # being prepared: details, participants and reviews may change
    ACTIVE = "active"  # participants locked, reviews open, reviewers notified
    CLOSED = "closed"  # no more submissions
    CANCELLED = "cancelled"  # abandoned before activation


class ReviewKind(StrEnum):
    SELF = "self"
    MANAGER = "manager"
    PEER = "peer"


class ReviewStatus(StrEnum):
    PENDING = "pending"  # generated for a draft cycle; the reviewer cannot see it yet
    OPEN = "open"  # the cycle is active: the reviewer may submit
    SUBMITTED = "submitted"


class ReviewCycle(db.Model):
    __tablename__ = "review_cycles"
    __table_args__ = (
        UniqueConstraint("tenant_id", "id"),
        CheckConstraint(one_of("status", CycleStatus), name="status"),
        CheckConstraint("period_start <= period_end", name="period"),
        CheckConstraint("due_date >= period_start", name="due_date"),
        CheckConstraint(
            "status NOT IN ('active', 'closed') OR"
            " (activated_at IS NOT NULL AND participants_locked_at IS NOT NULL)",
            name="activation_recorded",
        ),
        CheckConstraint("(status = 'closed') = (closed_at IS NOT NULL)", name="closed_at"),
        CheckConstraint("reminder_days BETWEEN 0 AND 365", name="reminder_days"),
        Index(None, "tenant_id", "status"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id"))
    name: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'draft'"))
    period_start: Mapped[date]
    period_end: Mapped[date]
    due_date: Mapped[date]
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    activated_at: Mapped[datetime | None]
    activated_by: Mapped[int | None] = mapped_column(BigInteger, ForeignKey("users.id"))
    participants_locked_at: Mapped[datetime | None]
    closed_at: Mapped[datetime | None]
    # The lifecycle reminds reviewers this many days before the due date (hr/lifecycle.py).
    reminder_days: Mapped[int] = mapped_column(SmallInteger, server_default=text("3"))


class CycleParticipant(db.Model):
    __tablename__ = "cycle_participants"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "cycle_id"],
            ["review_cycles.tenant_id", "review_cycles.id"],
            ondelete="CASCADE",
        ),
        ForeignKeyConstraint(["tenant_id", "employee_id"], ["employees.tenant_id", "employees.id"]),
    )

    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id"))
    cycle_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    employee_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)


class Review(db.Model):
    __tablename__ = "reviews"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "cycle_id"],
            ["review_cycles.tenant_id", "review_cycles.id"],
            ondelete="CASCADE",
        ),
        ForeignKeyConstraint(["tenant_id", "reviewer_id"], ["employees.tenant_id", "employees.id"]),
        ForeignKeyConstraint(["tenant_id", "reviewee_id"], ["employees.tenant_id", "employees.id"]),
        UniqueConstraint("cycle_id", "reviewer_id", "reviewee_id"),
        CheckConstraint(one_of("kind", ReviewKind), name="kind"),
        CheckConstraint(one_of("status", ReviewStatus), name="status"),
        CheckConstraint("(kind = 'self') = (reviewer_id = reviewee_id)", name="self_is_self"),
        CheckConstraint("rating BETWEEN 1 AND 5", name="rating"),
        CheckConstraint(
            "(status = 'submitted') = (submitted_at IS NOT NULL AND rating IS NOT NULL)",
            name="submitted",
        ),
        Index(None, "cycle_id", "reviewee_id"),
        Index(None, "tenant_id", "reviewer_id", "status"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id"))
    cycle_id: Mapped[int] = mapped_column(BigInteger)
    # NULL once the person was erased: the rating stays, unlinked (docs/reference/personal-data.md).
    reviewer_id: Mapped[int | None] = mapped_column(BigInteger)
    reviewee_id: Mapped[int | None] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    rating: Mapped[int | None] = mapped_column(SmallInteger)
    comments: Mapped[str] = mapped_column(Text, server_default=text("''"))
    submitted_at: Mapped[datetime | None]


class ReviewNoticeStart(db.Model):
    """The attempt of a reviewer's notification job that a worker thread has started.

    A worker claims jobs ahead of its threads (prefetch): a claimed job is ``running`` in
    ``jobs`` while it still waits in the worker's buffer. The task writes this row as its
    first act, so the cycle page can say "sending" only for the attempt a thread has begun.
    """

    __tablename__ = "review_notice_starts"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "cycle_id"],
            ["review_cycles.tenant_id", "review_cycles.id"],
            ondelete="CASCADE",
        ),
        ForeignKeyConstraint(["tenant_id", "reviewer_id"], ["employees.tenant_id", "employees.id"]),
    )

    # The notification job; no foreign key, as finished jobs are pruned.
    job_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id"))
    cycle_id: Mapped[int] = mapped_column(BigInteger)
    reviewer_id: Mapped[int] = mapped_column(BigInteger)
    attempt: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(server_default=func.now())


# One notification per reviewer and cycle, whatever the calling code does: a second job row for
# the same (tenant, cycle, reviewer) cannot be inserted, in any state of the first, nor after it
# is pruned: the key lives in job_once_keys (migration 0017_table_layout), which the jobs_once_key
# trigger fills in the inserting statement.
notification_dedup_index = Index(
    "jobs_notify_reviewer_key",
    JobOnceKey.tenant_id,
    JobOnceKey.task,
    JobOnceKey.payload["cycle_id"].astext,
    JobOnceKey.payload["reviewer_id"].astext,
    unique=True,
    postgresql_where=JobOnceKey.task == NOTIFY_REVIEWER_TASK,
)

# The cycle page's delivery lookup (tenant, task, cycle), in every partition of jobs.
notification_lookup_index = Index(
    "jobs_notify_reviewer_idx",
    Job.tenant_id,
    Job.task,
    Job.payload["cycle_id"].astext,
    postgresql_where=Job.task == NOTIFY_REVIEWER_TASK,
)
