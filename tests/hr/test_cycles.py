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


def test_participants_change_only_in_a_draft_and_stale_reviews_go(
    session: Session, org: Org, conn: Conn
) -> None:
    cycle = make_cycle(session, org.tenant, org.people[:6])
    change = change_participants(session, org.tenant.id, cycle.id, {org.people[7].id}, set())
    assert (change.added, change.removed, change.reviews_discarded > 0) == (1, 0, True)
    assert "generate them again" in change.summary
    unchanged = change_participants(session, org.tenant.id, cycle.id, {org.people[7].id}, set())
    assert unchanged.summary == "No change to the participants."

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
