"""Activating a review cycle: one transaction that either happens whole or leaves no trace.

In the caller's transaction, in this order:

1. ``SELECT ... FOR UPDATE`` the cycle. A concurrent activation waits here, then re-reads the
   row, finds it active and is refused (:class:`StateConflict`) without changing anything.
2. Lock the participant list (``participants_locked_at``) and mark the cycle active.
3. Open every review of the cycle.
4. Enqueue one ``hr.notify_reviewer`` job per distinct reviewer on the ``notifications`` queue,
   with the same session, so the jobs are rows of this very transaction (the outbox).
5. Start the cycle's ``review_cycle_lifecycle`` workflow (hr/lifecycle.py), in the same
   transaction: reminders, the due date, calibration, closing and the report.

The caller commits. Until it does, workers see nothing; if anything fails first, the rollback
takes the state change and the jobs with it. The partial unique index
``jobs_notify_reviewer_key`` makes a second notification for the same reviewer and cycle
impossible even if this function were called twice.
"""

from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from hr.cycles import lock_cycle, require_status
from hr.errors import InvalidInput
from hr.i18n import gettext as _
from hr.lifecycle import start_lifecycle
from hr.tasks import NOTIFY_REVIEWER
from jobqueue import JobRequest, enqueue_many
from models import Review
from models.cycles import CycleStatus, ReviewStatus


@dataclass(frozen=True, slots=True)
class Activation:
    cycle_id: int
    reviews_opened: int
    notifications: list[int]  # job ids, one per reviewer
    lifecycle: int  # the review_cycle_lifecycle execution's id


def activate_cycle(session: Session, tenant_id: int, cycle_id: int, actor_id: int) -> Activation:
    """Activate a draft cycle and enqueue its notifications, in the caller's transaction."""
    cycle = lock_cycle(session, tenant_id, cycle_id)
    require_status(cycle, CycleStatus.DRAFT, _("activated"))
    reviewers = session.scalars(
        select(Review.reviewer_id)
        .where(Review.cycle_id == cycle_id, Review.tenant_id == tenant_id)
        .distinct()
        .order_by(Review.reviewer_id)
    ).all()
    if not reviewers:
        raise InvalidInput(
            _("“%(name)s” has no reviews yet: generate them before activating", name=cycle.name)
        )
    cycle.status = CycleStatus.ACTIVE
    cycle.activated_at = func.now()
    cycle.activated_by = actor_id
    cycle.participants_locked_at = func.now()
    opened = session.execute(
        update(Review)
        .where(Review.cycle_id == cycle_id, Review.tenant_id == tenant_id)
        .values(status=ReviewStatus.OPEN)
    ).rowcount
    jobs = enqueue_many(
        session,
        [
            JobRequest(
                NOTIFY_REVIEWER,
                {"cycle_id": cycle_id, "reviewer_id": reviewer_id},
                tenant_id=tenant_id,
            )
            for reviewer_id in reviewers
        ],
    )
    session.flush()
    today = session.scalar(select(func.current_date()))
    lifecycle = start_lifecycle(
        session, tenant_id, cycle_id, cycle.due_date, cycle.reminder_days, today
    )
    return Activation(cycle_id, opened, jobs, lifecycle)
