"""Generating reviews (pure plan and in the database) and submitting them."""

from typing import Any

import psycopg
import pytest
from sqlalchemy.orm import Session

from hr.cycles import close_cycle
from hr.errors import InvalidInput, NotFound, StateConflict
from hr.review_plan import Assignment, GeneratedReview, Rework, plan_reviews, rework_reviews
from hr.reviews import generate_reviews, submit_review
from models.cycles import ReviewKind
from tests.hr.conftest import Org
from tests.support.factories import make_cycle

Conn = psycopg.Connection[Any]


def test_plan_asks_for_self_manager_and_rotating_peer_reviews() -> None:
    # 1 manages 2, 3 and 4; 5 has no manager.
    people = {1: None, 2: 1, 3: 1, 4: 1, 5: None}
    plan = {(a.reviewer_id, a.reviewee_id, a.kind) for a in plan_reviews(people, peers=1)}
    assert {(p, p, ReviewKind.SELF) for p in people} <= plan
    assert {(1, p, ReviewKind.MANAGER) for p in (2, 3, 4)} <= plan
    peers = {(r, e) for r, e, kind in plan if kind == ReviewKind.PEER}
    assert peers == {(3, 2), (4, 3), (2, 4), (5, 1), (1, 5)}
    # Everyone writes as many peer reviews as they receive.
    assert sorted(r for r, _ in peers) == sorted(e for _, e in peers)


def test_plan_never_asks_more_peers_than_the_team_has() -> None:
    plan = plan_reviews({1: None, 2: 1, 3: 1}, peers=5)
    assert sum(1 for a in plan if a.kind == ReviewKind.PEER) == 2 + 0  # (2, 3), (3, 2)
    with pytest.raises(InvalidInput, match="between 0 and 5"):
        plan_reviews({1: None}, peers=6)


def test_generation_replaces_the_previous_reviews(session: Session, org: Org, conn: Conn) -> None:
    cycle = make_cycle(session, org.tenant, org.people, peers=0)
    session.commit()
    without_peers = conn.execute("SELECT count(*) FROM reviews").fetchone()
    created = generate_reviews(session, org.tenant.id, cycle.id, peers=2)
    session.commit()
    assert conn.execute("SELECT count(*) FROM reviews").fetchone() == (created,)
    assert created > without_peers[0]  # type: ignore[index]


def test_generation_needs_participants_and_a_draft(session: Session, org: Org) -> None:
    empty = make_cycle(session, org.tenant)
    with pytest.raises(InvalidInput, match="no participants yet"):
        generate_reviews(session, org.tenant.id, empty.id, peers=0)
    active = make_cycle(session, org.tenant, org.people, activate_as=org.admin)
    with pytest.raises(StateConflict, match="cannot be given new reviews: it is active"):
        generate_reviews(session, org.tenant.id, active.id, peers=0)


def test_a_reviewer_submits_an_open_review_once(session: Session, org: Org, conn: Conn) -> None:
    cycle = make_cycle(session, org.tenant, org.people, activate_as=org.admin)
    session.commit()
    review_id, reviewer = conn.execute(
        "SELECT id, reviewer_id FROM reviews WHERE cycle_id = %s AND kind = 'manager' LIMIT 1",
        (cycle.id,),
    ).fetchone()  # type: ignore[misc]
    submit_review(session, org.tenant.id, reviewer, review_id, 4, "  Solid year.  ")
    session.commit()
    row = conn.execute(
        "SELECT status, rating, comments, submitted_at IS NOT NULL FROM reviews WHERE id = %s",
        (review_id,),
    ).fetchone()
    assert row == ("submitted", 4, "Solid year.", True)
    with pytest.raises(StateConflict, match="already submitted"):
        submit_review(session, org.tenant.id, reviewer, review_id, 5, "again")
    session.rollback()
    with pytest.raises(NotFound):  # somebody else's review
        submit_review(session, org.tenant.id, reviewer + 1, review_id, 5, "mine?")
    session.rollback()
    with pytest.raises(InvalidInput, match="from 1 to 5"):
        submit_review(session, org.tenant.id, reviewer, review_id, 6, "too good")


def test_no_submission_after_the_cycle_is_closed(session: Session, org: Org, conn: Conn) -> None:
    cycle = make_cycle(session, org.tenant, org.people, activate_as=org.admin)
    close_cycle(session, org.tenant.id, cycle.id)
    session.commit()
    review_id, reviewer = conn.execute(
        "SELECT id, reviewer_id FROM reviews WHERE cycle_id = %s LIMIT 1", (cycle.id,)
    ).fetchone()  # type: ignore[misc]
    with pytest.raises(StateConflict, match="is closed: reviews can no longer be submitted"):
        submit_review(session, org.tenant.id, reviewer, review_id, 3, "late")


def test_a_rework_drops_a_manager_review_whose_writer_is_no_longer_the_manager() -> None:
    # 1 managed 2 and 3 when the reviews were generated; 2 now reports to 4. 3 leaves.
    reviews = [
        GeneratedReview(10, 2, 2, "self"), GeneratedReview(11, 3, 3, "self"),
        GeneratedReview(12, 1, 2, "manager"), GeneratedReview(13, 1, 3, "manager"),
        GeneratedReview(14, 3, 2, "peer"), GeneratedReview(15, 2, 3, "peer"),
    ]  # fmt: skip
    rework = rework_reviews(reviews, {2: 4}, newcomers=set())
    assert (rework.kept, sorted(rework.dropped)) == ([10], [11, 12, 13, 14, 15])
    assert rework.added == [Assignment(4, 2, ReviewKind.MANAGER)]


def test_a_rework_of_a_cycle_without_reviews_adds_none() -> None:
    assert rework_reviews([], {1: None, 2: 1}, newcomers={2}) == Rework([], [], [])
