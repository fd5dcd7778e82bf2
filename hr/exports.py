"""Asking for a person's data (from the page or the command line) and handing it out.

Asking stores a ``data_exports`` row with a fresh unguessable token and enqueues its job
(``hr.export_employee``) in the caller's transaction; the job builds the files
(:mod:`hr.export_job`). The download link names the token; it answers only to the HR admin who
asked, only until ``expires_at`` (7 days by default), and each use is audited.
"""

import secrets
from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from console.audit import record
from hr.export_job import SECTIONS
from hr.tasks import EXPORT_EMPLOYEE
from jobqueue import enqueue
from models import Employee, Job, User
from models.audit import AuditAction, AuditTarget
from models.privacy import DataExport, ExportState

DEFAULT_LINK_DAYS = 7
UNDER_WAY = (ExportState.QUEUED, ExportState.RUNNING)
JOB_OVER = ("succeeded", "dead", "cancelled")


def link_days(setting: str) -> int:
    """``PAUTA_EXPORT_LINK_DAYS`` as a number of days (1 to 365); the default if it is not."""
    try:
        days = int(setting)
    except ValueError:
        return DEFAULT_LINK_DAYS
    return days if 1 <= days <= 365 else DEFAULT_LINK_DAYS


def start_export(
    session: Session, employee: Employee, actor: User | None, link_days: int = DEFAULT_LINK_DAYS
) -> DataExport:
    """Store the request and enqueue its job (not committed); audited when an HR admin asks."""
    export = DataExport(
        tenant_id=employee.tenant_id,
        employee_id=employee.id,
        requested_by=actor.id if actor else None,
        token=secrets.token_urlsafe(32),
        expires_at=func.now() + timedelta(days=link_days),
        sections_total=SECTIONS,
    )
    session.add(export)
    session.flush()
    export.job_id = enqueue(
        session, EXPORT_EMPLOYEE, {"export_id": export.id}, tenant_id=employee.tenant_id
    )
    if actor is not None:
        record(session, actor, AuditAction.EMPLOYEE_EXPORT, AuditTarget.EMPLOYEE, employee.id,
               tenant_id=employee.tenant_id, details={"export_id": export.id})  # fmt: skip
    session.flush()
    session.refresh(export)
    return export


def exports_of(session: Session, employee: Employee) -> list[DataExport]:
    return list(
        session.scalars(
            select(DataExport)
            .where(DataExport.tenant_id == employee.tenant_id,
                   DataExport.employee_id == employee.id)
            .order_by(DataExport.id.desc())
        )
    )  # fmt: skip


def downloadable(session: Session, token: str, user: User) -> DataExport | None:
    """The finished, unexpired export this token names, if ``user`` asked for it; else None."""
    return session.scalars(
        select(DataExport).where(
            DataExport.token == token,
            DataExport.tenant_id == user.tenant_id,
            DataExport.requested_by == user.id,
            DataExport.state == ExportState.FINISHED,
            DataExport.expires_at > func.now(),
        )
    ).one_or_none()


def record_download(session: Session, export: DataExport, user: User, kind: str) -> None:
    record(session, user, AuditAction.EMPLOYEE_EXPORT_DOWNLOAD, AuditTarget.EMPLOYEE,
           export.employee_id, tenant_id=export.tenant_id, affected=0,
           details={"export_id": export.id, "format": kind})  # fmt: skip


def job_over(session: Session, export: DataExport) -> str | None:
    """How the job of an export still under way ended, if it did (it will not move any more)."""
    if export.state not in UNDER_WAY:
        return None
    state = session.scalar(
        select(Job.state).where(Job.id == export.job_id, Job.tenant_id == export.tenant_id)
    )
    if state is None:
        return "pruned"
    return state if state in JOB_OVER else None


def expired(session: Session, export: DataExport) -> bool:
    return bool(session.scalar(select(DataExport.expires_at <= func.now()).where(
        DataExport.id == export.id)))  # fmt: skip
