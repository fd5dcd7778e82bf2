"""Reading the employee directory of one tenant: for choosing a cycle's participants."""

from dataclasses import dataclass

from sqlalchemy import Select, select
from sqlalchemy.orm import Session, aliased

from hr.i18n import gettext as _
from models import CycleParticipant, Employee


@dataclass(frozen=True, slots=True)
class DirectoryEntry:
    id: int
    name: str
    email: str
    department: str
    manager_name: str | None

    @property
    def label(self) -> str:
        if self.manager_name:
            return _(
                "%(name)s — %(department)s, reports to %(manager)s",
                name=self.name,
                department=self.department,
                manager=self.manager_name,
            )
        return f"{self.name} — {self.department}"


def departments(session: Session, tenant_id: int) -> list[str]:
    return list(
        session.scalars(
            select(Employee.department)
            .where(Employee.tenant_id == tenant_id)
            .distinct()
            .order_by(Employee.department)
        )
    )


def managers(session: Session, tenant_id: int) -> list[Employee]:
    """Employees who have at least one report, by name."""
    report = aliased(Employee)
    has_reports = select(report.id).where(
        report.tenant_id == tenant_id, report.manager_id == Employee.id
    )
    return list(
        session.scalars(
            select(Employee)
            .where(Employee.tenant_id == tenant_id, has_reports.exists())
            .order_by(Employee.name)
        )
    )


def employees(
    session: Session,
    tenant_id: int,
    *,
    under_manager: int | None = None,
    department: str | None = None,
) -> list[DirectoryEntry]:
    """The tenant's employees by name; ``under_manager`` keeps that manager's reports, direct
    and indirect (the manager not included); ``department`` keeps one department."""
    manager = aliased(Employee)
    query: Select[tuple[int, str, str, str, str | None]] = (
        select(Employee.id, Employee.name, Employee.email, Employee.department, manager.name)
        .outerjoin(manager, manager.id == Employee.manager_id)
        .where(Employee.tenant_id == tenant_id)
        .order_by(Employee.name, Employee.id)
    )
    if under_manager is not None:
        tree = (
            select(Employee.id)
            .where(Employee.tenant_id == tenant_id, Employee.manager_id == under_manager)
            .cte("reports", recursive=True)
        )
        below = aliased(Employee)
        tree = tree.union_all(
            select(below.id).where(below.tenant_id == tenant_id, below.manager_id == tree.c.id)
        )
        query = query.where(Employee.id.in_(select(tree.c.id)))
    if department:
        query = query.where(Employee.department == department)
    return [DirectoryEntry(*row) for row in session.execute(query)]


def participant_ids(session: Session, cycle_id: int) -> set[int]:
    return set(
        session.scalars(
            select(CycleParticipant.employee_id).where(CycleParticipant.cycle_id == cycle_id)
        )
    )
