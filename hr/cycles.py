"""A cycle's life outside activation: drafting, choosing participants, cancelling, closing.

Every change takes the cycle's row lock first (``SELECT ... FOR UPDATE``), so it serializes with
activation and with itself: a participant list cannot change while a cycle is being activated.
Nothing here commits; the caller does.
"""

from dataclasses import dataclass
from datetime import date

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session

from hr.errors import InvalidInput, NotFound, StateConflict
from hr.i18n import gettext as _
from hr.review_plan import GeneratedReview, Rework, rework_reviews
from hr.text import is_one_line
from hr.wording import cycle_status
from models import CycleParticipant, Employee, Review, ReviewCycle
from models.cycles import CycleStatus, ReviewStatus

MAX_NAME_LENGTH = 200
# The name is the subject of every reviewer's e-mail: a line break there would break them all.


@dataclass(frozen=True, slots=True)
class CycleDetails:
    """What HR types about a cycle."""

    name: str
    period_start: date
    period_end: date
    due_date: date

    def check(self) -> None:
        if not self.name.strip() or len(self.name) > MAX_NAME_LENGTH:
            raise InvalidInput(_("the name needs 1 to %(max)s characters", max=MAX_NAME_LENGTH))
        if not is_one_line(self.name):
            raise InvalidInput(
                _("the name must be one line, without line breaks or control characters")
            )
        if self.period_end < self.period_start:
            raise InvalidInput(_("the period must end on or after its first day"))
        if self.due_date < self.period_start:
            raise InvalidInput(_("the due date cannot be before the period starts"))


@dataclass(frozen=True, slots=True)
class ParticipantChange:
    """A change of participants, made (``applied``) or waiting for the user to agree to the
    generated reviews it drops."""

    added: int
    removed: int
    reviews_kept: int
    reviews_dropped: int  # generated reviews that no longer apply
    reviews_added: int  # for newcomers, and anyone left without their self or manager review
    applied: bool

    @property
    def warning(self) -> str:
        """What the change would do, for the user to agree to before it is made."""
        counts = {
            "added": self.added,
            "removed": self.removed,
            "dropped": self.reviews_dropped,
            "new": self.reviews_added,
            "kept": self.reviews_kept,
        }
        if self.reviews_added and self.reviews_kept:
            return _(
                "Adding %(added)s and removing %(removed)s participants drops %(dropped)s "
                "generated reviews that no longer apply; %(new)s will be added; the other "
                "%(kept)s stay.",
                **counts,
            )
        if self.reviews_added:
            return _(
                "Adding %(added)s and removing %(removed)s participants drops %(dropped)s "
                "generated reviews that no longer apply; %(new)s will be added.",
                **counts,
            )
        if self.reviews_kept:
            return _(
                "Adding %(added)s and removing %(removed)s participants drops %(dropped)s "
                "generated reviews that no longer apply; the other %(kept)s stay.",
                **counts,
            )
        return _(
            "Adding %(added)s and removing %(removed)s participants drops %(dropped)s "
            "generated reviews that no longer apply.",
            **counts,
        )

    @property
    def summary(self) -> str:
        """One sentence for the user, once made."""
        if not (self.added or self.removed):
            return _("No change to the participants.")
        text = _(
            "%(added)s participants added, %(removed)s removed.",
            added=self.added,
            removed=self.removed,
        )
        if self.reviews_dropped or self.reviews_added:
            text += " " + _(
                "Generated reviews: %(kept)s kept, %(dropped)s dropped, %(added)s added.",
                kept=self.reviews_kept,
                dropped=self.reviews_dropped,
                added=self.reviews_added,
            )
        return text


def lock_cycle(session: Session, tenant_id: int, cycle_id: int) -> ReviewCycle:
    """The cycle, row-locked until the transaction ends, re-read from the database."""
    cycle = session.scalars(
        select(ReviewCycle)
        .where(ReviewCycle.id == cycle_id, ReviewCycle.tenant_id == tenant_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).one_or_none()
    if cycle is None:
        raise NotFound(_("there is no review cycle %(id)s", id=cycle_id))
    return cycle


def require_status(cycle: ReviewCycle, expected: CycleStatus, action: str) -> None:
    """Refuse ``action`` unless the (locked) cycle is in state ``expected``."""
    if cycle.status != expected:
        raise StateConflict(
            _(
                "“%(name)s” cannot be %(action)s: it is %(status)s, not %(expected)s. Nothing "
                "was changed.",
                name=cycle.name,
                action=action,
                status=cycle_status(cycle.status),
                expected=cycle_status(expected),
            )
        )


def create_cycle(session: Session, tenant_id: int, details: CycleDetails) -> ReviewCycle:
    details.check()
    cycle = ReviewCycle(
        tenant_id=tenant_id,
        name=details.name.strip(),
        status=CycleStatus.DRAFT,
        period_start=details.period_start,
        period_end=details.period_end,
        due_date=details.due_date,
    )
    session.add(cycle)
    session.flush()
    return cycle


def update_cycle(
    session: Session, tenant_id: int, cycle_id: int, details: CycleDetails
) -> ReviewCycle:
    details.check()
    cycle = lock_cycle(session, tenant_id, cycle_id)
    require_status(cycle, CycleStatus.DRAFT, _("edited"))
    cycle.name = details.name.strip()
    cycle.period_start = details.period_start
    cycle.period_end = details.period_end
    cycle.due_date = details.due_date
    return cycle


def change_participants(
    session: Session,
    tenant_id: int,
    cycle_id: int,
    add: set[int],
    remove: set[int],
    *,
    agreed_drops: int = 0,
) -> ParticipantChange:
    """Add and remove employees (ids of the cycle's tenant) while the cycle is a draft.

    The generated reviews are reworked (:func:`hr.review_plan.rework_reviews`): those that still
    apply stay. A change that drops reviews is made only if ``agreed_drops`` is the number it
    drops, i.e. once the user has been told; otherwise nothing changes and the result says
    ``applied=False``.
    """
    cycle = lock_cycle(session, tenant_id, cycle_id)
    require_status(cycle, CycleStatus.DRAFT, _("given other participants"))
    add, remove = add - remove, remove - add
    known = set(
        session.scalars(
            select(Employee.id).where(Employee.tenant_id == tenant_id, Employee.id.in_(add))
        )
    )
    if unknown := add - known:
        raise InvalidInput(
            _("no such employees: %(ids)s", ids=", ".join(map(str, sorted(unknown))))
        )
    current = set(
        session.scalars(
            select(CycleParticipant.employee_id).where(CycleParticipant.cycle_id == cycle_id)
        )
    )
    to_add, to_remove = add - current, remove & current
    rework = _rework(session, tenant_id, cycle_id, current, to_add, to_remove)
    change = ParticipantChange(
        len(to_add),
        len(to_remove),
        len(rework.kept),
        len(rework.dropped),
        len(rework.added),
        applied=not rework.dropped or agreed_drops == len(rework.dropped),
    )
    if change.applied:
        _apply(session, tenant_id, cycle_id, to_add, to_remove, rework)
    return change


def _rework(
    session: Session,
    tenant_id: int,
    cycle_id: int,
    current: set[int],
    to_add: set[int],
    to_remove: set[int],
) -> Rework:
    reviews = [
        GeneratedReview(*row)
        for row in session.execute(
            select(Review.id, Review.reviewer_id, Review.reviewee_id, Review.kind).where(
                Review.cycle_id == cycle_id, Review.tenant_id == tenant_id
            )
        )
    ]
    if not reviews or not (to_add or to_remove):  # no change: the reviews stay as they are
        return Rework([review.id for review in reviews], [], [])
    participants = (current | to_add) - to_remove
    managers = session.execute(
        select(Employee.id, Employee.manager_id).where(
            Employee.tenant_id == tenant_id, Employee.id.in_(participants)
        )
    )
    return rework_reviews(reviews, {person: manager for person, manager in managers}, to_add)


def _apply(
    session: Session,
    tenant_id: int,
    cycle_id: int,
    to_add: set[int],
    to_remove: set[int],
    rework: Rework,
) -> None:
    if to_add:
        session.execute(
            insert(CycleParticipant),
            [{"tenant_id": tenant_id, "cycle_id": cycle_id, "employee_id": e} for e in to_add],
        )
    if to_remove:
        session.execute(
            delete(CycleParticipant).where(
                CycleParticipant.cycle_id == cycle_id,
                CycleParticipant.employee_id.in_(to_remove),
            )
        )
    if rework.dropped:
        session.execute(delete(Review).where(Review.id.in_(rework.dropped)))
    if rework.added:
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
                for item in rework.added
            ],
        )


def cancel_cycle(session: Session, tenant_id: int, cycle_id: int) -> ReviewCycle:
    """Abandon a draft; its participants and reviews stay for the record."""
    cycle = lock_cycle(session, tenant_id, cycle_id)
    require_status(cycle, CycleStatus.DRAFT, _("cancelled"))
    cycle.status = CycleStatus.CANCELLED
    return cycle


def close_cycle(session: Session, tenant_id: int, cycle_id: int) -> ReviewCycle:
    """End an active cycle: reviews not yet submitted can no longer be."""
    cycle = lock_cycle(session, tenant_id, cycle_id)
    require_status(cycle, CycleStatus.ACTIVE, _("closed"))
    cycle.status = CycleStatus.CLOSED
    cycle.closed_at = func.now()
    return cycle
