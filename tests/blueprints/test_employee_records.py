"""An employee's record: HR reads it (review comments included) and every reading is an audit
row (who, whom, when); an HR admin lists who accessed a person's data."""

from typing import Any

import psycopg
from sqlalchemy import select

from hr.reviews import submit_review
from models import Review
from models.people import Role
from tests.support.db import scalar
from tests.support.factories import (
    login_as,
    make_cycle,
    make_employees,
    make_tenant,
    make_user,
    seeding,
)

Conn = psycopg.Connection[Any]
COMMENT = "Carried the migration alone; should delegate more."


def org(app: Any) -> dict[str, Any]:
    """Two tenants; in ours an active cycle where the manager reviewed the second person."""
    with seeding(app) as session:
        ours, theirs = make_tenant(session), make_tenant(session)
        people = make_employees(session, ours, 4)
        admin = make_user(session, ours, Role.HR_ADMIN)
        staff = make_user(session, ours, Role.HR_STAFF)
        employee = make_user(session, ours, Role.EMPLOYEE, employee=people[2])
        their_admin = make_user(session, theirs, Role.HR_ADMIN)
        cycle = make_cycle(session, ours, people, activate_as=admin)
        review = next(r for r in _reviews(session, cycle.id) if r.reviewee_id == people[1].id
                      and r.reviewer_id == people[0].id)  # fmt: skip
        submit_review(session, ours.id, people[0].id, review.id, 4, COMMENT)
    return {
        "person": people[1], "manager": people[0], "admin": admin, "staff": staff,
        "employee": employee, "their_admin": their_admin,
    }  # fmt: skip


def _reviews(session: Any, cycle_id: int) -> list[Any]:
    return list(session.scalars(select(Review).where(Review.cycle_id == cycle_id)))


def views(conn: Conn) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT user_id, tenant_id, target_id, at FROM audit_log"
        " WHERE action = 'employee.view' AND target_type = 'employee' ORDER BY id"
    ).fetchall()


def test_hr_reading_a_record_sees_the_comments_and_leaves_an_audit_row(
    app: Any, conn: Conn
) -> None:
    world = org(app)
    person, staff = world["person"], world["staff"]
    client = app.test_client()
    login_as(client, staff)
    before = scalar(conn, "SELECT now()")

    page = client.get(f"/people/{person.id}")

    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert COMMENT in html and world["manager"].name in html
    [(user_id, tenant_id, target_id, at)] = views(conn)
    assert (user_id, tenant_id, target_id) == (staff.id, person.tenant_id, str(person.id))
    assert at >= before
    # The manager's record shows the same review among those written, and is logged too.
    assert COMMENT in client.get(f"/people/{world['manager'].id}").get_data(as_text=True)
    assert [row[2] for row in views(conn)] == [str(person.id), str(world["manager"].id)]


def test_the_hr_admin_lists_who_accessed_a_persons_data(app: Any, conn: Conn) -> None:
    world = org(app)
    person = world["person"]
    staff = app.test_client()
    login_as(staff, world["staff"])
    staff.get(f"/people/{person.id}")
    staff.get(f"/people/{person.id}")
    staff.get(f"/people/{world['manager'].id}")  # another person: not on this list

    admin = app.test_client()
    login_as(admin, world["admin"])
    page = admin.get(f"/people/{person.id}/access").get_data(as_text=True)

    assert page.count(world["staff"].email) == 2
    assert world["admin"].email not in page  # the admin only listed; they read nothing
    assert staff.get(f"/people/{person.id}/access").status_code == 403


def test_other_tenants_and_employees_read_nothing_and_leave_no_row(app: Any, conn: Conn) -> None:
    world = org(app)
    person = world["person"]
    outsider = app.test_client()
    login_as(outsider, world["their_admin"])
    assert outsider.get(f"/people/{person.id}").status_code == 404
    assert outsider.get(f"/people/{person.id}/access").status_code == 404
    employee = app.test_client()
    login_as(employee, world["employee"])
    assert employee.get(f"/people/{person.id}").status_code == 403
    assert employee.get("/people/").status_code == 403
    assert views(conn) == []
