"""Data requests (a person's data exported on request, LGPD art. 18, II and V) and retention
(each tenant's policy, and what each run removed)."""

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from models import db
from models.people import one_of


class ExportState(StrEnum):
    """queued -> running -> finished | failed, as an employee import."""

    QUEUED = "queued"
    RUNNING = "running"  # the job reads section after section
    FINISHED = "finished"  # the files are stored; the link works until expires_at
    FAILED = "failed"


class DataExport(db.Model):
    """Everything about one employee, built by a job (hr/export_job.py), downloaded through an
    unguessable link by the HR admin who asked, until it expires."""

    __tablename__ = "data_exports"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "employee_id"],
            ["employees.tenant_id", "employees.id"],
            ondelete="CASCADE",
        ),
        CheckConstraint(one_of("state", ExportState), name="state"),
        CheckConstraint("sections_done BETWEEN 0 AND sections_total", name="progress"),
        CheckConstraint(
            "(state IN ('finished', 'failed')) = (finished_at IS NOT NULL)", name="finished_at"
        ),
        Index(None, "tenant_id", "employee_id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id"))
    employee_id: Mapped[int] = mapped_column(BigInteger)
    # The HR admin who asked; None: asked from the command line.
    requested_by: Mapped[int | None] = mapped_column(BigInteger, ForeignKey("users.id"))
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    # The download link's secret (256 random bits); only the requester's session may use it.
    token: Mapped[str] = mapped_column(Text, unique=True)
    expires_at: Mapped[datetime]
    state: Mapped[str] = mapped_column(Text, server_default=text("'queued'"))
    sections_total: Mapped[int] = mapped_column(Integer)
    sections_done: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    job_id: Mapped[int | None] = mapped_column(BigInteger)  # no foreign key: jobs are pruned
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    content_json: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    content_html: Mapped[str | None] = mapped_column(Text)


class PrivacySettings(db.Model):
    """A tenant's retention policy (hr/retention.py); NULL keeps the data for good."""

    __tablename__ = "privacy_settings"
    __table_args__ = (
        CheckConstraint("comment_years BETWEEN 1 AND 100", name="comment_years"),
        CheckConstraint("audit_detail_years BETWEEN 1 AND 100", name="audit_detail_years"),
    )

    tenant_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    comment_years: Mapped[int | None] = mapped_column(Integer)  # from the cycle's closing
    audit_detail_years: Mapped[int | None] = mapped_column(Integer)  # from the entry
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now())


class RetentionRun(db.Model):
    """What one run of the retention job removed from one tenant (counts only)."""

    __tablename__ = "retention_runs"
    __table_args__ = (Index(None, "tenant_id", "id"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id", ondelete="CASCADE"))
    ran_at: Mapped[datetime] = mapped_column(server_default=func.now())
    as_of: Mapped[datetime]  # the database's time, moved by PAUTA_RETENTION_CLOCK_SHIFT
    comments_removed: Mapped[int] = mapped_column(Integer)
    audit_details_removed: Mapped[int] = mapped_column(Integer)
    job_id: Mapped[int | None] = mapped_column(BigInteger)  # no foreign key: jobs are pruned
