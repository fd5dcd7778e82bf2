"""The engine's tables: queues, jobs and the attempt history.

The engine itself reads and writes them with the SQL in jobqueue/queries.sql; these models
declare the schema (for migrations) and serve read-only pages.
"""

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Double,
    ForeignKey,
    Index,
    Integer,
    Sequence,
    SmallInteger,
    Text,
    false,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import INTERVAL, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from jobqueue.states import AttemptOutcome, JobState
from models import db


def _one_of(column: str, values: type[JobState] | type[AttemptOutcome]) -> str:
    return f"{column} IN ({', '.join(repr(str(value)) for value in values)})"


class Queue(db.Model):
    __tablename__ = "queues"
    __table_args__ = (
        CheckConstraint("rate_limit > 0", name="rate_limit"),
        CheckConstraint("rate_period_seconds > 0::double precision", name="rate_period_seconds"),
    )

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    paused: Mapped[bool] = mapped_column(server_default=false())
    paused_at: Mapped[datetime | None]
    paused_by: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    # At most rate_limit claims per rate_period_seconds, across every worker: a token bucket that
    # the claim refills, spends and locks (rate_tokens as of rate_refilled_at).
    rate_limit: Mapped[int | None] = mapped_column(Integer)
    rate_period_seconds: Mapped[float] = mapped_column(Double, server_default=text("1"))
    rate_tokens: Mapped[float] = mapped_column(Double, server_default=text("0"))
    rate_refilled_at: Mapped[datetime] = mapped_column(server_default=func.now())
    rate_limit_set_by: Mapped[str | None] = mapped_column(Text)  # None: from pauta.toml


class Job(db.Model):
    """A job. ``jobs`` is partitioned by LIST (state) (migration 0017_table_layout): the claim's
    ``jobs_live`` (available, running), ``jobs_dead``, and ``jobs_done`` (succeeded, cancelled)
    partitioned in turn by RANGE (finished_at), one partition per ``history_partition_seconds``
    that the maintenance leader creates ahead and drops whole. The indexes of each partition
    (the claim's, the lease's, the unique key's on jobs_live; the dead-letter ones on jobs_dead)
    and their storage parameters are the migration's, listed in docs/reference/schema.md: a
    model declares the partitioned parent only. No constraint makes ``id`` unique (a unique
    index of a partitioned table must hold the partition key): ids come from one sequence."""

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(_one_of("state", JobState), name="state"),
        CheckConstraint("max_attempts > 0", name="max_attempts"),
        CheckConstraint("timeout_seconds > 0::double precision", name="timeout_seconds"),
        CheckConstraint(
            "(state = 'running') = (locked_by IS NOT NULL)"
            " AND (state = 'running') = (lease_expires_at IS NOT NULL)",
            name="running_has_lease",
        ),
        # Every partition's index on id: jobs by id, wherever their state put them.
        Index("jobs_id_idx", "id"),
        # The console's "Error contains" filter: trigrams of the errors there are (migration
        # 0009_console_search; missing where the server lacks pg_trgm, and the console then
        # bounds the search).
        Index(
            "jobs_error_search_idx",
            "last_error",
            postgresql_using="gin",
            postgresql_ops={"last_error": "gin_trgm_ops"},
            postgresql_where=text("last_error IS NOT NULL"),
        ),
        {"postgresql_partition_by": "LIST (state)"},
    )

    # primary_key for the ORM only (see above); the default is nextval('jobs_id_seq')
    id: Mapped[int] = mapped_column(BigInteger, Sequence("jobs_id_seq"), primary_key=True)
    # a tenants.id, by the tenant check's triggers (0021_tenant_check), not a foreign key
    tenant_id: Mapped[int] = mapped_column(BigInteger)
    queue: Mapped[str] = mapped_column(Text)
    task: Mapped[str] = mapped_column(Text)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    priority: Mapped[int] = mapped_column(SmallInteger, server_default=text("0"))
    state: Mapped[str] = mapped_column(Text, server_default=text("'available'"))
    attempt: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    max_attempts: Mapped[int] = mapped_column(Integer, server_default=text("5"))
    available_at: Mapped[datetime] = mapped_column(server_default=func.now())
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    lease_expires_at: Mapped[datetime | None]
    locked_by: Mapped[str | None] = mapped_column(Text)
    last_error: Mapped[str | None] = mapped_column(Text)
    unique_key: Mapped[str | None] = mapped_column(Text)
    trace_context: Mapped[dict[str, str] | None] = mapped_column(JSONB)
    # Seconds an attempt may run, given at enqueue; else the task's, else the worker's default.
    timeout_seconds: Mapped[float | None] = mapped_column(Double)
    # Someone asked to cancel the job while it ran; its worker passes that on to the task.
    cancel_requested_at: Mapped[datetime | None]


class JobAttempt(db.Model):
    """One attempt of a job. Partitioned by RANGE (finished_at) in the periods of jobs_done's
    partitions, dropped with them; no foreign key to jobs (whose id is not unique by
    constraint), and (job_id, attempt) is the ORM's key, indexed (``job_attempts_job_id_idx``),
    not a constraint. The attempts of a job that outlives its attempts' partition (dead, running
    again) are copied to ``job_attempts_default`` before the partition is dropped."""

    __tablename__ = "job_attempts"
    __table_args__ = (
        CheckConstraint(_one_of("outcome", AttemptOutcome), name="outcome"),
        Index("job_attempts_job_id_idx", "job_id", "attempt"),
        {"postgresql_partition_by": "RANGE (finished_at)"},
    )

    job_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)
    worker: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]
    outcome: Mapped[str] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    traceback: Mapped[str | None] = mapped_column(Text)
    duration: Mapped[timedelta] = mapped_column(INTERVAL)
    trace_id: Mapped[str | None] = mapped_column(Text)


class JobOnceKey(db.Model):
    """The key of a job that may be inserted once ever (a reviewer's notification, reminder or
    escalation per cycle and round), written by the trigger ``jobs_once_key`` in the inserting
    statement and kept when the job is finished and gone: its unique indexes (named as they were
    on jobs before 0017_table_layout; the notification's is in models/cycles.py) refuse a second
    job with the same key."""

    __tablename__ = "job_once_keys"
    __table_args__ = (
        Index(
            "jobs_remind_reviewer_key",
            "tenant_id",
            text("(payload ->> 'cycle_id')"),
            text("(payload ->> 'reviewer_id')"),
            text("(payload ->> 'round')"),
            unique=True,
            postgresql_where=text("task = 'hr.remind_reviewer'"),
        ),
        Index(
            "jobs_escalate_calibration_key",
            "tenant_id",
            text("(payload ->> 'cycle_id')"),
            text("(payload ->> 'user_id')"),
            text("(payload ->> 'round')"),
            unique=True,
            postgresql_where=text("task = 'hr.escalate_calibration'"),
        ),
    )

    job_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id", ondelete="CASCADE"))
    task: Mapped[str] = mapped_column(Text)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class Schedule(db.Model):
    """A job the maintenance leader enqueues every ``every`` (jobqueue/maintenance.py)."""

    __tablename__ = "schedules"
    __table_args__ = (CheckConstraint("every >= interval '1 second'", name="every"),)

    name: Mapped[str] = mapped_column(Text, primary_key=True)  # the task enqueued
    queue: Mapped[str] = mapped_column(Text)
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id", ondelete="CASCADE"))
    every: Mapped[timedelta] = mapped_column(INTERVAL)
    next_run_at: Mapped[datetime] = mapped_column(server_default=func.now())
    last_job_id: Mapped[int | None] = mapped_column(BigInteger)  # no foreign key: jobs are pruned
