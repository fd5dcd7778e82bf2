"""SQLAlchemy models: tables, constraints and indexes, and nothing else."""

from datetime import datetime

from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import DateTime, MetaData
from sqlalchemy.orm import DeclarativeBase, registry

NAMING_CONVENTION = {
    "ix": "%(table_name)s_%(column_0_N_name)s_idx",
    "uq": "%(table_name)s_%(column_0_N_name)s_key",
    "ck": "%(table_name)s_%(constraint_name)s_check",
    "fk": "%(table_name)s_%(column_0_N_name)s_fkey",
    "pk": "%(table_name)s_pkey",
}


class Base(DeclarativeBase):
    registry = registry(
        metadata=MetaData(naming_convention=NAMING_CONVENTION),
        type_annotation_map={datetime: DateTime(timezone=True)},
    )


db = SQLAlchemy(model_class=Base)

from models.audit import AuditEntry  # noqa: E402
from models.cycles import CycleParticipant, Review, ReviewCycle, ReviewNoticeStart  # noqa: E402
from models.imports import EmployeeImport, EmployeeImportRow  # noqa: E402
from models.jobs import Job, JobAttempt, JobOnceKey, Queue, Schedule  # noqa: E402
from models.leadership import Leader  # noqa: E402
from models.people import Employee, User  # noqa: E402
from models.privacy import DataExport, PrivacySettings, RetentionRun  # noqa: E402
from models.stats import JobStatsMinute, QueueDepthMinute  # noqa: E402
from models.tenancy import Tenant  # noqa: E402
from models.throttle import LoginThrottle  # noqa: E402
from models.workers import Worker  # noqa: E402

__all__ = [
    "AuditEntry",
    "CycleParticipant",
    "DataExport",
    "Employee",
    "EmployeeImport",
    "EmployeeImportRow",
    "Job",
    "JobAttempt",
    "JobOnceKey",
    "JobStatsMinute",
    "Leader",
    "LoginThrottle",
    "PrivacySettings",
    "Queue",
    "QueueDepthMinute",
    "RetentionRun",
    "Review",
    "ReviewCycle",
    "ReviewNoticeStart",
    "Schedule",
    "Tenant",
    "User",
    "Worker",
    "db",
]
