"""Where cycles stand: the list's summaries and the detail page's progress per person.

All counts are computed by PostgreSQL in one statement per table shown.
"""

from dataclasses import dataclass
from datetime import date

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, aliased

from models import CycleParticipant, Employee, Review, ReviewCycle, Tenant
from models.cycles import ReviewKind, ReviewStatus

SUBMITTED = Review.status == ReviewStatus.SUBMITTED


@dataclass(frozen=True, slots=True)
class CycleSummary:
    id: int
    name: str
    status: str
    organisation: str
    period_start: date
    period_end: date
    due_date: date
    participants: int
    reviews: int
    submitted: int

    @property
    def percent(self) -> int:
        return round(100 * self.submitted / self.reviews) if self.reviews else 0


@dataclass(frozen=True, slots=True)
class PersonProgress:
    employee_id: int
    name: str
    email: str
    department: str
    reviews: int
    submitted: int
    self_submitted: bool = False
    manager_submitted: bool = False

    @property
    def done(self) -> bool:
        return self.submitted == self.reviews


def cycle_summaries(session: Session, cycles: Select[tuple[ReviewCycle]]) -> list[CycleSummary]:
    """One summary per cycle that ``cycles`` selects (already scoped by the caller), newest
    first."""
    participants = (
        select(func.count())
        .where(CycleParticipant.cycle_id == ReviewCycle.id)
        .correlate(ReviewCycle)
        .scalar_subquery()
    )
    reviews = select(func.count()).where(Review.cycle_id == ReviewCycle.id).correlate(ReviewCycle)
    query = (
        cycles.with_only_columns(
            ReviewCycle.id,
            ReviewCycle.name,
            ReviewCycle.status,
            Tenant.name,
            ReviewCycle.period_start,
            ReviewCycle.period_end,
            ReviewCycle.due_date,
            participants,
            reviews.scalar_subquery(),
            reviews.where(SUBMITTED).scalar_subquery(),
        )
        .join(Tenant, Tenant.id == ReviewCycle.tenant_id)
        .order_by(ReviewCycle.period_start.desc(), ReviewCycle.id.desc())
    )
    return [CycleSummary(*row) for row in session.execute(query)]


def status_counts(session: Session, cycle: ReviewCycle) -> dict[str, int]:
    """Reviews of the cycle per status; every status present, zero if none."""
    counts = dict.fromkeys(ReviewStatus, 0)
    rows = session.execute(
        select(Review.status, func.count())
        .where(Review.cycle_id == cycle.id)
        .group_by(Review.status)
    )
    counts.update({status: total for status, total in rows})
    return counts


def participant_count(session: Session, cycle: ReviewCycle) -> int:
    return session.scalar(select(func.count()).where(CycleParticipant.cycle_id == cycle.id)) or 0


def reviewer_progress(session: Session, cycle: ReviewCycle) -> list[PersonProgress]:
    """Each reviewer of the cycle with how many of their reviews are submitted, by name."""
    return _progress(session, cycle, Review.reviewer_id)


def reviewee_progress(session: Session, cycle: ReviewCycle) -> list[PersonProgress]:
    """Each reviewee with their reviews' progress, and whether the self and manager reviews
    are in."""
    return _progress(session, cycle, Review.reviewee_id, per_kind=True)


def _progress(
    session: Session, cycle: ReviewCycle, person: object, per_kind: bool = False
) -> list[PersonProgress]:
    employee = aliased(Employee)
    columns = [
        employee.id,
        employee.name,
        employee.email,
        employee.department,
        func.count(),
        func.count().filter(SUBMITTED),
    ]
    if per_kind:
        columns += [
            func.bool_or(SUBMITTED & (Review.kind == ReviewKind.SELF)),
            func.bool_or(SUBMITTED & (Review.kind == ReviewKind.MANAGER)),
        ]
    # The cycle was loaded through the tenant scope, and the composite foreign keys keep its
    # reviews and their employees in its tenant: the cycle id alone selects the right rows.
    query = (
        select(*columns)
        .select_from(Review)
        .join(employee, employee.id == person)
        .where(Review.cycle_id == cycle.id)
        .group_by(employee.id)
        .order_by(employee.name, employee.id)
    )
    return [PersonProgress(*row) for row in session.execute(query)]
