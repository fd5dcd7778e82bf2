"""Recording operator actions in audit_log, on the session that carries the action itself."""

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from models import AuditEntry, User
from models.audit import AuditAction, AuditTarget


def record(
    session: Session,
    actor: User,
    action: AuditAction,
    target_type: AuditTarget,
    target_id: object,
    *,
    tenant_id: int | None = None,
    affected: int = 1,
    details: dict[str, Any] | None = None,
) -> None:
    session.add(
        AuditEntry(
            user_id=actor.id,
            tenant_id=tenant_id,
            action=action,
            target_type=target_type,
            target_id=str(target_id),
            affected=affected,
            details=details or {},
        )
    )


def record_jobs(
    session: Session,
    actor: User,
    action: AuditAction,
    target_type: AuditTarget,
    target_id: object,
    changed: Sequence[tuple[int, int, str]],
    details: dict[str, Any],
) -> None:
    """One entry per tenant whose jobs ``changed`` ((id, tenant id, queue) each), listing the
    job ids, so each tenant's HR admins see exactly what was done to their jobs."""
    by_tenant: dict[int, list[int]] = defaultdict(list)
    for job_id, tenant_id, _queue in changed:
        by_tenant[tenant_id].append(job_id)
    for tenant_id, job_ids in sorted(by_tenant.items()):
        record(
            session,
            actor,
            action,
            target_type,
            target_id,
            tenant_id=tenant_id,
            affected=len(job_ids),
            details={**details, "job_ids": sorted(job_ids)},
        )
