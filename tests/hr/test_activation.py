"""Activation: one transaction with its outbox; refused when not a draft; dedup by index."""

import threading
from typing import Any

import psycopg
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

import hr.activation
from hr.activation import activate_cycle
from hr.errors import InvalidInput, StateConflict
from hr.tasks import NOTIFY_REVIEWER
from models import Review, ReviewCycle
from tests.hr.conftest import Org
from tests.support.db import scalar
from tests.support.factories import make_cycle
from tests.support.processes import wait_until

pytestmark = pytest.mark.pooled  # also through PgBouncer (tests/conftest.py)

Conn = psycopg.Connection[Any]


def cycle_row(conn: Conn, cycle_id: int) -> tuple[Any, ...]:
    row = conn.execute(
        "SELECT status, activated_at, participants_locked_at FROM review_cycles WHERE id = %s",
        (cycle_id,),
    ).fetchone()
    assert row is not None
    return tuple(row)


def review_statuses(conn: Conn, cycle_id: int) -> dict[str, int]:
    rows = conn.execute(
        "SELECT status, count(*) FROM reviews WHERE cycle_id = %s GROUP BY 1", (cycle_id,)
    )
    return dict(rows.fetchall())


def test_activation_opens_reviews_and_enqueues_one_notification_per_distinct_reviewer(
    session: Session, org: Org, conn: Conn
) -> None:
    cycle = make_cycle(session, org.tenant, org.people, peers=1)
    session.commit()
    reviewers = set(session.scalars(select(Review.reviewer_id).where(Review.cycle_id == cycle.id)))
    reviews = review_statuses(conn, cycle.id)["pending"]
    assert reviews > len(reviewers)  # several reviews per reviewer, one e-mail each

    activation = activate_cycle(session, org.tenant.id, cycle.id, org.admin.id)
    session.commit()

    status, activated_at, locked_at = cycle_row(conn, cycle.id)
    assert (status, activated_at is not None, locked_at is not None) == ("active", True, True)
    assert review_statuses(conn, cycle.id) == {"open": reviews}
    assert activation.reviews_opened == reviews
    jobs = conn.execute(
        "SELECT (payload->>'reviewer_id')::bigint, payload, queue, tenant_id, max_attempts, state"
        " FROM jobs WHERE task = %s",
        (NOTIFY_REVIEWER,),
    ).fetchall()
    assert {job[0] for job in jobs} == reviewers
    assert len(jobs) == len(reviewers) == len(activation.notifications)
    assert all(job[1]["cycle_id"] == cycle.id for job in jobs)
    assert {(job[2], job[3], job[4], job[5]) for job in jobs} == {
        ("notifications", org.tenant.id, 5, "available")
    }


def test_a_cycle_that_is_no_longer_a_draft_is_refused_and_nothing_changes(
    session: Session, org: Org, conn: Conn
) -> None:
    cycle = make_cycle(session, org.tenant, org.people, activate_as=org.admin)
    session.commit()
    before = (cycle_row(conn, cycle.id), review_statuses(conn, cycle.id))
    jobs = scalar(conn, "SELECT count(*) FROM jobs")

    with pytest.raises(StateConflict, match="cannot be activated: it is active, not draft"):
        activate_cycle(session, org.tenant.id, cycle.id, org.admin.id)
    session.rollback()

    assert (cycle_row(conn, cycle.id), review_statuses(conn, cycle.id)) == before
    assert scalar(conn, "SELECT count(*) FROM jobs") == jobs


def test_a_cycle_without_reviews_cannot_be_activated(
    session: Session, org: Org, conn: Conn
) -> None:
    cycle = make_cycle(session, org.tenant)
    session.commit()
    with pytest.raises(InvalidInput, match="has no reviews yet"):
        activate_cycle(session, org.tenant.id, cycle.id, org.admin.id)
    session.rollback()
    assert cycle_row(conn, cycle.id)[0] == "draft"


def test_a_failure_after_the_reviews_and_the_jobs_are_written_leaves_no_trace(
    session: Session, org: Org, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    cycle = make_cycle(session, org.tenant, org.people)
    session.commit()
    before = review_statuses(conn, cycle.id)
    seen_inside: dict[str, Any] = {}

    def enqueue_then_fail(connection: Any, requests: Any) -> list[int]:
        ids = real_enqueue_many(connection, requests)
        # Inside the transaction everything is written: the cycle, the reviews and the jobs.
        seen_inside["status"] = session.scalar(
            select(ReviewCycle.status).where(ReviewCycle.id == cycle.id)
        )
        seen_inside["open"] = len(
            session.scalars(select(Review.id).where(Review.status == "open")).all()
        )
        seen_inside["jobs"] = len(ids)
        raise RuntimeError("injected failure before commit")

    real_enqueue_many = hr.activation.enqueue_many
    monkeypatch.setattr(hr.activation, "enqueue_many", enqueue_then_fail)
    with pytest.raises(RuntimeError, match="injected failure"):
        activate_cycle(session, org.tenant.id, cycle.id, org.admin.id)
    session.rollback()

    # Everyone writes a self-review, so every participant is a reviewer.
    assert seen_inside == {
        "status": "active",
        "open": sum(before.values()),
        "jobs": len(org.people),
    }
    assert cycle_row(conn, cycle.id) == ("draft", None, None)
    assert review_statuses(conn, cycle.id) == before
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def test_a_second_activation_waits_for_the_first_and_is_then_refused(
    app: Any, session: Session, org: Org, conn: Conn
) -> None:
    cycle = make_cycle(session, org.tenant, org.people)
    session.commit()
    first = activate_cycle(session, org.tenant.id, cycle.id, org.admin.id)  # holds the row lock
    outcome: list[BaseException | None] = []

    def second_activation() -> None:
        with app.app_context():
            from models import db

            try:
                activate_cycle(db.session(), org.tenant.id, cycle.id, org.admin.id)
                db.session.commit()
                outcome.append(None)
            except StateConflict as error:
                db.session.rollback()
                outcome.append(error)

    thread = threading.Thread(target=second_activation)
    thread.start()
    wait_until(
        lambda: (
            scalar(
                conn,
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND query LIKE '%%review_cycles%%FOR UPDATE%%'",
            )
            == 1
        ),
        message="the second activation never waited on the cycle's row lock",
    )
    session.commit()
    thread.join(10)

    assert len(outcome) == 1 and isinstance(outcome[0], StateConflict)
    reviewers = scalar(
        conn, "SELECT count(DISTINCT reviewer_id) FROM reviews WHERE cycle_id = %s", cycle.id
    )
    notices = "SELECT count(*) FROM jobs WHERE task = 'hr.notify_reviewer'"
    assert scalar(conn, notices) == reviewers == len(first.notifications)
    # one lifecycle, started by the activation that won, with its one slice job
    assert scalar(conn, "SELECT count(*) FROM workflow_executions") == 1
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue = 'workflows'") == 1


def test_a_duplicate_notification_row_is_refused_by_the_unique_index(
    session: Session, org: Org, conn: Conn
) -> None:
    cycle = make_cycle(session, org.tenant, org.people, activate_as=org.admin)
    session.commit()
    reviewer = scalar(conn, "SELECT min(reviewer_id) FROM reviews WHERE cycle_id = %s", cycle.id)
    # The first notification has even finished: the index holds for every state.
    conn.execute("UPDATE jobs SET state = 'succeeded', finished_at = now()")
    with pytest.raises(psycopg.errors.UniqueViolation, match="jobs_notify_reviewer_key"):
        conn.execute(
            "INSERT INTO jobs (tenant_id, queue, task, payload) VALUES (%s, 'other', %s, %s)",
            (
                org.tenant.id,
                NOTIFY_REVIEWER,
                psycopg.types.json.Jsonb(
                    {"reviewer_id": reviewer, "cycle_id": cycle.id, "extra": "ignored"}
                ),
            ),
        )
    # Another reviewer, or the same one in another tenant's cycle, is a different key.
    conn.execute(
        "INSERT INTO jobs (tenant_id, queue, task, payload) VALUES (%s, 'notifications', %s, %s)",
        (
            org.tenant.id,
            NOTIFY_REVIEWER,
            psycopg.types.json.Jsonb({"cycle_id": cycle.id, "reviewer_id": -1}),
        ),
    )
