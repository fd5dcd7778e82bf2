"""Per-minute rollups that the console's graphs read: job outcomes and queue depth."""

from datetime import datetime

from sqlalchemy import BigInteger, Double, ForeignKey, Index, Integer, Text
from sqlalchemy import text as sql
from sqlalchemy.orm import Mapped, mapped_column

from models import db


class JobStatsMinute(db.Model):
    """What finished in one minute, per queue and tenant; workers flush deltas with an UPSERT."""

    __tablename__ = "job_stats_minute"
    __table_args__ = (
        Index("job_stats_minute_minute_idx", "minute"),  # windows, pruning
        {"postgresql_with": {"fillfactor": "70"}},  # 0014_scale: counter updates stay HOT
    )

    queue: Mapped[str] = mapped_column(Text, primary_key=True)
    minute: Mapped[datetime] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    succeeded: Mapped[int] = mapped_column(Integer, server_default=sql("0"))
    failed: Mapped[int] = mapped_column(Integer, server_default=sql("0"))  # a retry was scheduled
    dead: Mapped[int] = mapped_column(Integer, server_default=sql("0"))
    released: Mapped[int] = mapped_column(Integer, server_default=sql("0"))
    runtime_sum: Mapped[float] = mapped_column(Double, server_default=sql("0"))  # seconds
    runtime_max: Mapped[float] = mapped_column(Double, server_default=sql("0"))
    wait_sum: Mapped[float] = mapped_column(Double, server_default=sql("0"))  # started - available
    wait_max: Mapped[float] = mapped_column(Double, server_default=sql("0"))


class QueueDepthMinute(db.Model):
    """A sample of each queue's depth per tenant, taken once a minute by the leader."""

    __tablename__ = "queue_depth_minute"
    __table_args__ = (Index("queue_depth_minute_minute_idx", "minute"),)

    queue: Mapped[str] = mapped_column(Text, primary_key=True)
    minute: Mapped[datetime] = mapped_column(primary_key=True)
    tenant_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    available: Mapped[int] = mapped_column(Integer, server_default=sql("0"))
    scheduled: Mapped[int] = mapped_column(Integer, server_default=sql("0"))
    running: Mapped[int] = mapped_column(Integer, server_default=sql("0"))
    dead: Mapped[int] = mapped_column(Integer, server_default=sql("0"))
    oldest_available_seconds: Mapped[float | None] = mapped_column(Double)
