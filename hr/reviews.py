"""Reviews: generating them for a draft cycle (the plan is :mod:`hr.review_plan`), and an
employee submitting one."""

from dataclasses import dataclass
from datetime import date, datetime
from itertools import groupby

from sqlalchemy import Select, delete, func, insert, select
from sqlalchemy.orm import Session, aliased

from hr.cycles import lock_cycle, require_status
from hr.errors import InvalidInput, NotFound, StateConflict
from hr.i18n import gettext as _
from hr.review_plan import plan_reviews
from hr.wording import cycle_status
from models import CycleParticipant, Employee, Review, ReviewCycle
from models.cycles import CycleStatus, ReviewKind, ReviewStatus

MAX_COMMENT_LENGTH = 5000


def generate_reviews(session: Session, tenant_id: int, cycle_id: int, peers: int) -> int:
    """Replace the draft cycle's reviews with a fresh plan; returns how many there are."""
    cycle = lock_cycle(session, tenant_id, cycle_id)
    require_status(cycle, CycleStatus.DRAFT, _("given new reviews"))
    rows = session.execute(
        select(Employee.id, Employee.manager_id)
        .join(CycleParticipant, CycleParticipant.employee_id == Employee.id)
        .where(CycleParticipant.cycle_id == cycle_id, Employee.tenant_id == tenant_id)
    )
    people = {employee_id: manager_id for employee_id, manager_id in rows}
    if not people:
        raise InvalidInput(_("the cycle has no participants yet: choose them first"))
    plan = plan_reviews(people, peers)
    session.execute(delete(Review).where(Review.cycle_id == cycle_id))
    session.execute(
        insert(Review),
        [
            {
                "tenant_id": tenant_id,
                "cycle_id": cycle_id,
                "reviewer_id": item.reviewer_id,
                "reviewee_id": item.reviewee_id,
                "kind": item.kind,
                "status": ReviewStatus.PENDING,
            }
            for item in plan
        ],
    )
    return len(plan)


def submit_review(
    session: Session,
    tenant_id: int,
    reviewer_id: int,
    review_id: int,
    rating: int,
    comments: str,
) -> Review:
    """Record the reviewer's answer to one of their open reviews of an active cycle."""
    if not 1 <= rating <= 5:
        raise InvalidInput(_("the rating must be from 1 to 5"))
    if len(comments) > MAX_COMMENT_LENGTH:
        raise InvalidInput(
            _("comments may have at most %(max)s characters", max=MAX_COMMENT_LENGTH)
        )
    review = session.scalars(
        select(Review)
        .where(
            Review.id == review_id,
            Review.tenant_id == tenant_id,
            Review.reviewer_id == reviewer_id,
        )
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one_or_none()
    if review is None:
        raise NotFound(_("there is no review %(id)s for you", id=review_id))
    # A share lock: a concurrent close (FOR UPDATE) waits for this submission, or wins before it.
    cycle = session.scalars(
        select(ReviewCycle)
        .where(ReviewCycle.id == review.cycle_id)
        .with_for_update(read=True)
        .execution_options(populate_existing=True)
    ).one()
    if cycle.status != CycleStatus.ACTIVE:
        raise StateConflict(
            _(
                "“%(name)s” is %(status)s: reviews can no longer be submitted",
                name=cycle.name,
                status=cycle_status(cycle.status),
            )
        )
    if review.status != ReviewStatus.OPEN:
        raise StateConflict(_("this review was already submitted"))
    review.rating = rating
    review.comments = comments.strip()
    review.status = ReviewStatus.SUBMITTED
    review.submitted_at = func.now()
    return review


@dataclass(frozen=True, slots=True)
class ReviewerTask:
    """One review on a reviewer's list, with what they need to see about it."""

    review_id: int
    status: str
    kind: str
    rating: int | None
    submitted_at: datetime | None
    reviewee_name: str
    reviewee_department: str
    cycle_id: int
    cycle_name: str
    cycle_status: str
    due_date: date


def reviews_of_reviewer(
    session: Session,
    reviews: Select[tuple[Review]],
    reviewer_id: int,
    cycle_id: int | None = None,
) -> list[ReviewerTask]:
    """The reviews ``reviewer_id`` writes in active and closed cycles (drafts stay hidden),
    from ``reviews`` (already scoped by the caller); open ones first, by due date."""
    reviewee = aliased(Employee)
    query = (
        reviews.with_only_columns(
            Review.id,
            Review.status,
            Review.kind,
            Review.rating,
            Review.submitted_at,
            reviewee.name,
            reviewee.department,
            ReviewCycle.id,
            ReviewCycle.name,
            ReviewCycle.status,
            ReviewCycle.due_date,
        )
        .join(ReviewCycle, ReviewCycle.id == Review.cycle_id)
        .join(reviewee, reviewee.id == Review.reviewee_id)
        .where(
            Review.reviewer_id == reviewer_id,
            ReviewCycle.status.in_([CycleStatus.ACTIVE, CycleStatus.CLOSED]),
        )
        .order_by(
            ReviewCycle.status != CycleStatus.ACTIVE,
            ReviewCycle.due_date,
            ReviewCycle.id,
            Review.kind != ReviewKind.SELF,
            reviewee.name,
        )
    )
    if cycle_id is not None:
        query = query.where(Review.cycle_id == cycle_id)
    return [ReviewerTask(*row) for row in session.execute(query)]


def by_cycle(tasks: list[ReviewerTask]) -> list[list[ReviewerTask]]:
    """Consecutive reviews of the same cycle together, in the order given."""
    return [list(group) for _, group in groupby(tasks, key=lambda task: task.cycle_id)]
