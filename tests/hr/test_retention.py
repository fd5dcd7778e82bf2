"""Retention: a tenant's policy, scheduled by the maintenance leader of a real worker.py and
applied by the retention job, with the clock moved a year ahead by PAUTA_RETENTION_CLOCK_SHIFT,
removes exactly what the policy says; the retention page's counts match the rows."""

import re
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import select

from hr.cycles import close_cycle
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
    post_form,
    seeding,
)
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]


def closed_cycle(session: Any, tenant: Any, people: list[Any], admin: Any) -> int:
    """A closed cycle whose every review was submitted with a comment."""
    cycle = make_cycle(session, tenant, people, activate_as=admin)
    for review in session.scalars(select(Review).where(Review.cycle_id == cycle.id)):
        submit_review(session, tenant.id, review.reviewer_id, review.id, 3, f"note {review.id}")
    close_cycle(session, tenant.id, cycle.id)
    return int(cycle.id)


def comments(conn: Conn, cycle_id: int) -> int:
    """Reviews of the cycle that still have a comment."""
    return int(scalar(conn, "SELECT count(*) FROM reviews WHERE cycle_id = %s AND comments <> ''",
                      cycle_id))  # fmt: skip


def audit_entry(conn: Conn, user_id: int, tenant_id: int, age: str) -> int:
    return int(
        scalar(
            conn,
            "INSERT INTO audit_log (at, user_id, tenant_id, action, target_type, target_id,"
            " details) VALUES (now() - CAST(%s AS interval), %s, %s, 'job.cancel', 'job', '1', %s)"
            " RETURNING id",
            age, user_id, tenant_id, Jsonb({"task": "hr.notify_reviewer"}),
        )
    )  # fmt: skip


def test_retention_removes_exactly_what_the_policy_says_and_the_page_counts_it(
    app: Any, conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    with seeding(app) as session:
        ours, theirs = make_tenant(session), make_tenant(session)
        people, others = make_employees(session, ours, 4), make_employees(session, theirs, 3)
        admin = make_user(session, ours, Role.HR_ADMIN)
        their_admin = make_user(session, theirs, Role.HR_ADMIN)
        old = closed_cycle(session, ours, people, admin)
        recent = closed_cycle(session, ours, people, admin)
        active = make_cycle(session, ours, people, activate_as=admin).id
        review = session.scalars(select(Review).where(Review.cycle_id == active)).first()
        submit_review(session, ours.id, review.reviewer_id, review.id, 4, "still open")
        theirs_old = closed_cycle(session, theirs, others, their_admin)
    # With the clock a year ahead and comments kept 2 years, a cycle closed 18 months ago is
    # past its time and one closed 6 months ago is not; audit details kept 2 years likewise.
    conn.execute("UPDATE review_cycles SET closed_at = now() - interval '18 months'"
                 " WHERE id IN (%s, %s)", (old, theirs_old))  # fmt: skip
    conn.execute("UPDATE review_cycles SET closed_at = now() - interval '6 months' WHERE id = %s",
                 (recent,))  # fmt: skip
    stale = [audit_entry(conn, admin.id, ours.id, "18 months") for _ in range(3)]
    fresh = audit_entry(conn, admin.id, ours.id, "6 months")
    theirs_stale = audit_entry(conn, their_admin.id, theirs.id, "18 months")
    expected_comments = comments(conn, old)
    assert expected_comments > 0 and comments(conn, recent) == expected_comments

    client = app.test_client()
    login_as(client, admin)
    saved = post_form(client, "/people/retention", {"comment_years": "2",
                                                    "audit_detail_years": "2"})  # fmt: skip
    assert saved.status_code == 303
    start_worker(workers, database_url, "--queues", "default=1", "--poll", "0.05",
                 "--sweep", "0.1", tasks="hr.tasks",
                 env={"PAUTA_RETENTION_CLOCK_SHIFT": "1 year"})  # fmt: skip
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM retention_runs") >= 1)

    assert comments(conn, old) == 0
    assert comments(conn, recent) == expected_comments
    assert comments(conn, active) == 1  # not closed: never touched
    assert comments(conn, theirs_old) > 0  # their tenant has no policy
    details = dict(conn.execute("SELECT id, details::text FROM audit_log").fetchall())
    assert [details[entry] for entry in stale] == ["{}"] * 3
    assert details[fresh] != "{}" and details[theirs_stale] != "{}"
    run = conn.execute(
        "SELECT tenant_id, comments_removed, audit_details_removed FROM retention_runs"
    ).fetchall()
    assert run == [(ours.id, expected_comments, 3)]
    page = client.get("/people/retention").get_data(as_text=True)
    assert f"{expected_comments} comments and 3 audit details removed" in page
    assert re.findall(r"data-comments-removed>(\d+)<", page) == [str(expected_comments)]
    # The leader scheduled the next run a day later: one retention job so far.
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE task = 'hr.apply_retention'") == 1
    assert scalar(conn, "SELECT next_run_at > now() + interval '23 hours' FROM schedules")
