"""The worker registry: every supervisor and queue child that runs jobs, and its health."""

from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Identity, Index, Integer, Text
from sqlalchemy import text as sql
from sqlalchemy.orm import Mapped, mapped_column

from jobqueue.states import WorkerState
from models import db


class Worker(db.Model):
    __tablename__ = "workers"
    __table_args__ = (
        CheckConstraint(
            f"state IN ({', '.join(repr(str(state)) for state in WorkerState)})", name="state"
        ),
        Index(
            "workers_live_idx", "queue", postgresql_where=sql("state IN ('running', 'draining')")
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)  # what jobs.locked_by holds
    hostname: Mapped[str] = mapped_column(Text)
    pid: Mapped[int] = mapped_column(Integer)
    parent_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("workers.id", ondelete="CASCADE")
    )
    queue: Mapped[str | None] = mapped_column(Text)  # None for a supervisor
    threads: Mapped[int] = mapped_column(Integer, server_default=sql("0"))
    state: Mapped[str] = mapped_column(Text, server_default=sql("'running'"))
    in_flight: Mapped[int] = mapped_column(Integer, server_default=sql("0"))
    # Threads still stuck in a task that overran its timeout; such a process drains and is
    # replaced.
    abandoned_threads: Mapped[int] = mapped_column(Integer, server_default=sql("0"))
    started_at: Mapped[datetime] = mapped_column(server_default=sql("now()"))
    last_heartbeat_at: Mapped[datetime] = mapped_column(server_default=sql("now()"))
    drain_requested_at: Mapped[datetime | None]
    drain_requested_by: Mapped[str | None] = mapped_column(Text)
    stopped_at: Mapped[datetime | None]
