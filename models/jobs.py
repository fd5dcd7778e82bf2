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
    Identity,
    Index,
    Integer,
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
        # The claim query filters and orders by exactly these columns. The tenant rides along
        # (not a key) so the console counts a tenant's waiting jobs from the index alone.
        Index(
            "jobs_claim_idx",
            "queue",
            "priority",
            "available_at",
            "id",
            postgresql_where=text("state = 'available'"),
            postgresql_include=["tenant_id"],
        ),
        # The fair claim's (job_claim_fair): the tenants with waiting jobs in a queue, and each
        # tenant's jobs in claim order.
        Index(
            "jobs_claim_tenant_idx",
            "queue",
            "tenant_id",
            "priority",
            "available_at",
            "id",
            postgresql_where=text("state = 'available'"),
        ),
        # The lease sweeper's index.
        Index("jobs_lease_idx", "lease_expires_at", postgresql_where=text("state = 'running'")),
        # Finished jobs by age, for pruning.
        Index(
            "jobs_finished_idx",
            "finished_at",
            postgresql_where=text("state IN ('succeeded', 'dead', 'cancelled')"),
        ),
        # Dead jobs per queue, for the dead-letter views and counts (per tenant: included).
        Index(
            "jobs_dead_idx",
            "queue",
            "finished_at",
            postgresql_where=text("state = 'dead'"),
            postgresql_include=["tenant_id"],
        ),
        # Dead jobs by the fingerprint of their error (see job_error_pattern in migration
        # 0005_console): the console's failure groups are ranges of it.
        Index(
            "jobs_dead_fingerprint_idx",
            # (written as PostgreSQL prints it back, so that `db check` sees no difference)
            text("md5((task || '\n'::text) || job_error_pattern(last_error))"),
            "id",
            postgresql_where=text("state = 'dead'"),
        ),
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
        # A unique key holds while its job is waiting or running.
        Index(
            "jobs_unique_key_idx",
            "tenant_id",
            "unique_key",
            unique=True,
            postgresql_where=text("unique_key IS NOT NULL AND state IN ('available', 'running')"),
        ),
        # A high-churn table: vacuum it often so the claim index does not fill with dead entries.
        {
            "postgresql_with": {
                "autovacuum_vacuum_scale_factor": "0.01",
                "autovacuum_vacuum_threshold": "1000",
                "autovacuum_vacuum_insert_scale_factor": "0.05",
                "autovacuum_analyze_scale_factor": "0.02",
                # 0014_scale: room for a row's next version on its page; unthrottled vacuum
                "fillfactor": "90",
                "autovacuum_vacuum_cost_delay": "0",
            }
        },
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id"))
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
    __tablename__ = "job_attempts"
    __table_args__ = (CheckConstraint(_one_of("outcome", AttemptOutcome), name="outcome"),)

    job_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)
    worker: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]
    outcome: Mapped[str] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    traceback: Mapped[str | None] = mapped_column(Text)
    duration: Mapped[timedelta] = mapped_column(INTERVAL)
    trace_id: Mapped[str | None] = mapped_column(Text)


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
