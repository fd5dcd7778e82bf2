"""The audit log: every action an operator took in the console (and an HR admin's employee
imports), written in the same transaction as the action itself, so an action and its record
commit or vanish together."""

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Identity, Index, Integer, Text, func
from sqlalchemy import text as sql
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column, relationship

from models import db
from models.people import User, one_of


class AuditAction(StrEnum):
    JOB_REQUEUE = "job.requeue"  # dead or cancelled -> available, with a fresh attempt budget
    JOB_CANCEL = "job.cancel"  # waiting or scheduled -> cancelled
    JOB_RUN_NOW = "job.run_now"  # scheduled or backing off -> visible now
    JOB_DISCARD = "job.discard"  # dead -> cancelled: out of the failures list, kept until pruned
    QUEUE_PAUSE = "queue.pause"
    QUEUE_RESUME = "queue.resume"
    QUEUE_RATE_LIMIT = "queue.rate_limit"  # a queue's rate limit set or cleared
    WORKER_DRAIN = "worker.drain"  # a graceful shutdown asked through the workers table
    EMPLOYEE_IMPORT = "employees.import"  # an HR admin uploaded a CSV file of employees
    EMPLOYEE_VIEW = "employee.view"  # HR opened an employee's record, review comments included
    EMPLOYEE_ERASE = "employee.erase"  # an HR admin erased a person who left (no data kept)
    EMPLOYEE_EXPORT = "employee.export"  # an HR admin asked for everything about a person
    EMPLOYEE_EXPORT_DOWNLOAD = "employee.export_download"  # and downloaded it (details: format)
    RETENTION_POLICY = "retention.policy"  # an HR admin set how long personal data is kept
    WORKFLOW_EVENT = "workflow.event"  # an event (an approval) sent to a waiting execution
    WORKFLOW_CANCEL = "workflow.cancel"  # an unfinished execution cancelled
    WORKFLOW_RESUME = "workflow.resume"  # a failed execution resumed from its failed step


class AuditTarget(StrEnum):
    JOB = "job"  # target_id: the job's id
    FAILURE_GROUP = "failure_group"  # target_id: the fingerprint; details list the job ids
    QUEUE = "queue"  # target_id: the queue's name
    WORKER = "worker"  # target_id: the workers row's id, or "all"
    EMPLOYEE_IMPORT = "employee_import"  # target_id: the employee_imports row's id
    EMPLOYEE = "employee"  # target_id: the employees row's id
    TENANT = "tenant"  # target_id: the tenant's id
    WORKFLOW_EXECUTION = "workflow_execution"  # target_id: the workflow_executions row's id


class AuditEntry(db.Model):
    __tablename__ = "audit_log"
    __table_args__ = (
        CheckConstraint(one_of("action", AuditAction), name="action"),
        CheckConstraint(one_of("target_type", AuditTarget), name="target_type"),
        CheckConstraint("affected >= 0", name="affected"),
        # An HR admin's view of the log: their tenant's entries, newest first (keyset on id).
        Index(None, "tenant_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    at: Mapped[datetime] = mapped_column(server_default=func.now())
    # Who acted; NULL once their account was erased (the entry stays: "an erased account").
    user_id: Mapped[int | None] = mapped_column(BigInteger, ForeignKey("users.id"))
    # The tenant whose jobs the action touched; NULL for platform-wide acts (queues, workers).
    tenant_id: Mapped[int | None] = mapped_column(BigInteger, ForeignKey("tenants.id"))
    action: Mapped[str] = mapped_column(Text)
    target_type: Mapped[str] = mapped_column(Text)
    target_id: Mapped[str] = mapped_column(Text)
    affected: Mapped[int] = mapped_column(Integer, server_default=sql("0"))  # rows changed
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=sql("'{}'::jsonb"))

    user: Mapped[User | None] = relationship(lazy="joined")
