"""A tenant's retention policy, as HR admins set it, and what its runs removed.

Saving a policy also makes sure the maintenance leader schedules the retention job
(``schedules`` row ``hr.apply_retention``, once a day on the ``default`` queue, owned by the
system tenant): no tenant with a policy, no schedule needed, and none is made.
"""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from console.audit import record
from hr.tasks import APPLY_RETENTION, IMPORTS_QUEUE
from models import User
from models.audit import AuditAction, AuditTarget

RUNS_SHOWN = 10

SAVE = """
INSERT INTO privacy_settings (tenant_id, comment_years, audit_detail_years)
VALUES (:tenant_id, :comment_years, :audit_detail_years)
ON CONFLICT (tenant_id) DO UPDATE
SET comment_years = EXCLUDED.comment_years, audit_detail_years = EXCLUDED.audit_detail_years,
    updated_at = now()
"""
SCHEDULE = """
INSERT INTO schedules (name, queue, tenant_id, every)
SELECT :task, :queue, id, interval '1 day' FROM tenants WHERE slug = 'system'
ON CONFLICT (name) DO NOTHING
"""


@dataclass(frozen=True, slots=True)
class Policy:
    comment_years: int | None
    audit_detail_years: int | None


@dataclass(frozen=True, slots=True)
class Run:
    ran_at: datetime
    as_of: datetime
    comments_removed: int
    audit_details_removed: int


def policy_of(session: Session, tenant_id: int) -> Policy:
    row = session.execute(
        text("SELECT comment_years, audit_detail_years FROM privacy_settings"
             " WHERE tenant_id = :tenant_id"),
        {"tenant_id": tenant_id},
    ).one_or_none()  # fmt: skip
    return Policy(*row) if row else Policy(None, None)


def save_policy(session: Session, actor: User, tenant_id: int, policy: Policy) -> None:
    """Store the tenant's policy, schedule the retention job, audit the change (not committed)."""
    values = {"tenant_id": tenant_id, "comment_years": policy.comment_years,
              "audit_detail_years": policy.audit_detail_years}  # fmt: skip
    session.execute(text(SAVE), values)
    session.execute(text(SCHEDULE), {"task": APPLY_RETENTION, "queue": IMPORTS_QUEUE})
    record(session, actor, AuditAction.RETENTION_POLICY, AuditTarget.TENANT, tenant_id,
           tenant_id=tenant_id, details=values)  # fmt: skip


def recent_runs(session: Session, tenant_id: int) -> list[Run]:
    """The tenant's last retention runs, newest first."""
    rows = session.execute(
        text("SELECT ran_at, as_of, comments_removed, audit_details_removed FROM retention_runs"
             " WHERE tenant_id = :tenant_id ORDER BY id DESC LIMIT :limit"),
        {"tenant_id": tenant_id, "limit": RUNS_SHOWN},
    )  # fmt: skip
    return [Run(*row) for row in rows]
