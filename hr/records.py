"""An employee's record as HR reads it (profile, the reviews they wrote and received, with the
comments) and who has read it.

Reading a record writes an audit entry (who, whom, when) in the same transaction as the read's
answer is committed: the record page commits it before it answers, so a record shown is a
record logged. An HR admin lists those entries for one employee (:func:`access_log`).
"""

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from console.audit import record
from models import AuditEntry, Employee, Review, ReviewCycle, User
from models.audit import AuditAction, AuditTarget

ACCESS_SHOWN = 500  # newest entries on the access page


@dataclass(frozen=True, slots=True)
class ReviewLine:
    id: int
    cycle_id: int
    cycle_name: str
    cycle_status: str
    kind: str
    status: str
    other: (
        str | None
    )  # the reviewer (of one received) or the reviewee (of one written); None: erased
    rating: int | None
    comments: str
    submitted_at: datetime | None


@dataclass(frozen=True, slots=True)
class EmployeeRecord:
    employee: Employee
    manager: str | None
    accounts: list[User]
    received: list[ReviewLine]
    written: list[ReviewLine]


@dataclass(frozen=True, slots=True)
class Access:
    at: datetime
    who: str | None  # the account's name and e-mail; None once the account was erased
    role: str | None
    action: str


def read_record(session: Session, actor: User, employee: Employee) -> EmployeeRecord:
    """The employee's record; audits the reading (not committed)."""
    record(session, actor, AuditAction.EMPLOYEE_VIEW, AuditTarget.EMPLOYEE, employee.id,
           tenant_id=employee.tenant_id, affected=0)  # fmt: skip
    manager = None
    if employee.manager_id is not None:
        manager = session.scalar(
            select(Employee.name).where(
                Employee.tenant_id == employee.tenant_id, Employee.id == employee.manager_id
            )
        )
    accounts = session.scalars(
        select(User)
        .where(User.tenant_id == employee.tenant_id, User.employee_id == employee.id)
        .order_by(User.id)
    )
    return EmployeeRecord(
        employee,
        manager,
        list(accounts),
        _reviews(session, employee, Review.reviewee_id, Review.reviewer_id),
        _reviews(session, employee, Review.reviewer_id, Review.reviewee_id),
    )


def _reviews(
    session: Session, employee: Employee, mine: object, theirs: object
) -> list[ReviewLine]:
    other = aliased(Employee)
    rows = session.execute(
        select(
            Review.id,
            Review.cycle_id,
            ReviewCycle.name,
            ReviewCycle.status,
            Review.kind,
            Review.status,
            other.name,
            Review.rating,
            Review.comments,
            Review.submitted_at,
        )
        .join(ReviewCycle, ReviewCycle.id == Review.cycle_id)
        .outerjoin(other, other.id == theirs)
        .where(Review.tenant_id == employee.tenant_id, mine == employee.id)
        .order_by(ReviewCycle.period_start.desc(), Review.id)
    )
    return [ReviewLine(*row) for row in rows]


def access_log(session: Session, employee: Employee) -> list[Access]:
    """Who read, exported or erased this employee's data, newest first."""
    rows = session.execute(
        select(AuditEntry.at, User.name, User.email, User.role, AuditEntry.action)
        .outerjoin(User, User.id == AuditEntry.user_id)
        .where(
            AuditEntry.tenant_id == employee.tenant_id,
            AuditEntry.target_type == AuditTarget.EMPLOYEE,
            AuditEntry.target_id == str(employee.id),
        )
        .order_by(AuditEntry.id.desc())
        .limit(ACCESS_SHOWN)
    )
    return [
        Access(at, f"{name} <{email}>" if name is not None else None, role, action)
        for at, name, email, role, action in rows
    ]


def employees_of(session: Session, tenant_id: int) -> list[Employee]:
    """The tenant's employees by name."""
    query = select(Employee).where(Employee.tenant_id == tenant_id)
    return list(session.scalars(query.order_by(Employee.name, Employee.id)))
