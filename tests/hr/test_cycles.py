"""Drafting, participants, cancel and close: state checks, and tenancy held by the schema."""

from datetime import date
from typing import Any

import psycopg
import pytest
from sqlalchemy.orm import Session

from hr.cycles import (
    CycleDetails,
    cancel_cycle,
    change_participants,
    close_cycle,
    create_cycle,
    update_cycle,
)
from hr.errors import InvalidInput, NotFound, StateConflict
from tests.hr.conftest import Org
from tests.support.db import scalar
from tests.support.factories import make_cycle, make_employees, make_tenant

Conn = psycopg.Connection[Any]


@pytest.mark.parametrize(
    ("details", "problem"),
    [
        (("H1", date(2026, 6, 30), date(2026, 1, 1), date(2026, 7, 1)), "end on or after"),
        (("H1", date(2026, 1, 1), date(2026, 6, 30), date(2025, 12, 1)), "due date cannot be"),
        (("  ", date(2026, 1, 1), date(2026, 6, 30), date(2026, 7, 1)), "name needs"),
        (
            ("H1\r\nBcc: all@x.example", date(2026, 1, 1), date(2026, 6, 30), date(2026, 7, 1)),
            "name must be one line",
        ),
        (("H1\u2028two", date(2026, 1, 1), date(2026, 6, 30), date(2026, 7, 1)), "one line"),
    ],
)
def test_details_are_checked(
    session: Session, org: Org, details: tuple[Any, ...], problem: str
) -> None:
    with pytest.raises(InvalidInput, match=problem):
        create_cycle(session, org.tenant.id, CycleDetails(*details))


def review_rows(conn: Conn, cycle_id: int) -> dict[tuple[int, int], tuple[int, str]]:
    """{(reviewer, reviewee): (review id, kind)} of a cycle."""
    rows = conn.execute(
        "SELECT reviewer_id, reviewee_id, id, kind FROM reviews WHERE cycle_id = %s", (cycle_id,)
    )
    return {(reviewer, reviewee): (id_, kind) for reviewer, reviewee, id_, kind in rows}


def test_a_participant_change_keeps_the_reviews_that_still_apply_once_agreed(
    session: Session, org: Org, conn: Conn
) -> None:
    # The tree (spans of 3): 0 manages 1-3, 1 manages 4-6, 2 manages 7-9, 3 manages 10-11.
    ids = [person.id for person in org.people]
    cycle = make_cycle(session, org.tenant, org.people[:9], peers=1)
    session.commit()
    before = review_rows(conn, cycle.id)
    assert len(before) == 25  # 9 self, 8 manager, 8 peer (teams 1-3, 4-6, 7-8)

    # Removing 5 drops what involves 5: the self-review, 1's review of 5, and 5's and 6's peer
    # reviews in the rotation 4 <- 5 <- 6 <- 4. Asked without agreement: nothing happens.
    asked = change_participants(session, org.tenant.id, cycle.id, set(), {ids[5]})
    session.commit()
    assert (asked.applied, asked.reviews_dropped, asked.reviews_kept) == (False, 4, 21)
    assert "drops 4 generated reviews that no longer apply; the other 21 stay" in asked.warning
    assert review_rows(conn, cycle.id) == before
    assert scalar(conn, "SELECT count(*) FROM cycle_participants") == 9

    done = change_participants(session, org.tenant.id, cycle.id, set(), {ids[5]}, agreed_drops=4)
    session.commit()
    assert (done.applied, done.removed, done.reviews_added) == (True, 1, 0)
    dropped = {(ids[5], ids[5]), (ids[1], ids[5]), (ids[5], ids[4]), (ids[6], ids[5])}
    assert review_rows(conn, cycle.id) == {k: v for k, v in before.items() if k not in dropped}

    # A newcomer drops nothing: no question asked. 10 gets a self and a manager review; then 11
    # joins 10's team, and the two review each other.
    joined = change_participants(session, org.tenant.id, cycle.id, {ids[10]}, set())
    assert (joined.applied, joined.reviews_added, joined.reviews_dropped) == (True, 2, 0)
    teammate = change_participants(session, org.tenant.id, cycle.id, {ids[11]}, set())
    session.commit()
    assert (teammate.applied, teammate.reviews_added) == (True, 4)
    after = review_rows(conn, cycle.id)
    assert {pair: kind for pair, (_, kind) in after.items() if ids[11] in pair} == {
        (ids[11], ids[11]): "self", (ids[3], ids[11]): "manager",
        (ids[10], ids[11]): "peer", (ids[11], ids[10]): "peer",
    }  # fmt: skip
    assert len(after) == 21 + 2 + 4
    assert "Generated reviews: 21 kept, 0 dropped, 2 added." in joined.summary

    unchanged = change_participants(session, org.tenant.id, cycle.id, {ids[11]}, set())
    assert unchanged.summary == "No change to the participants."


def test_participants_change_only_in_a_draft(session: Session, org: Org, conn: Conn) -> None:
    active = make_cycle(session, org.tenant, org.people, activate_as=org.admin)
    session.commit()
    with pytest.raises(StateConflict, match="cannot be given other participants: it is active"):
        change_participants(session, org.tenant.id, active.id, set(), {org.people[0].id})
    session.rollback()
    count = conn.execute("SELECT count(*) FROM cycle_participants WHERE cycle_id = %s",
                         (active.id,)).fetchone()  # fmt: skip
    assert count == (len(org.people),)


def test_another_tenants_employee_cannot_join(session: Session, org: Org, conn: Conn) -> None:
    other = make_tenant(session)
    stranger = make_employees(session, other, 1)[0]
    cycle = make_cycle(session, org.tenant)
    session.commit()
    with pytest.raises(InvalidInput, match=f"no such employees: {stranger.id}"):
        change_participants(session, org.tenant.id, cycle.id, {stranger.id}, set())
    session.rollback()
    # And the schema refuses it whatever the code does: the foreign key is (tenant_id, id).
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="employee_id_fkey"):
        conn.execute(
            "INSERT INTO cycle_participants (tenant_id, cycle_id, employee_id) VALUES (%s, %s, %s)",
            (org.tenant.id, cycle.id, stranger.id),
        )
    details = CycleDetails("x", date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 2))
    with pytest.raises(NotFound):  # another tenant's cycle does not exist for this tenant
        update_cycle(session, other.id, cycle.id, details)


def test_cancel_a_draft_and_close_an_active_cycle(session: Session, org: Org, conn: Conn) -> None:
    draft = make_cycle(session, org.tenant, org.people)
    active = make_cycle(session, org.tenant, org.people, activate_as=org.admin)
    with pytest.raises(StateConflict, match="cannot be closed: it is draft"):
        close_cycle(session, org.tenant.id, draft.id)
    with pytest.raises(StateConflict, match="cannot be cancelled: it is active"):
        cancel_cycle(session, org.tenant.id, active.id)
    cancel_cycle(session, org.tenant.id, draft.id)
    close_cycle(session, org.tenant.id, active.id)
    session.commit()
    rows = conn.execute(
        "SELECT id, status, closed_at IS NOT NULL FROM review_cycles ORDER BY id"
    ).fetchall()
    assert rows == [(draft.id, "cancelled", False), (active.id, "closed", True)]
