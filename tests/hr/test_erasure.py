"""Erasing a person who left: through the page, as an HR admin; then a full pg_dump of the
database holds neither their name, nor their addresses, nor a comment they wrote or received,
and the closed cycle's statistics are what they were."""

import hashlib
import subprocess
from typing import Any

import psycopg
import pytest
from sqlalchemy import select

from hr.cycles import close_cycle
from hr.export_job import collect
from hr.exports import start_export
from hr.imports import start_import
from hr.reviews import submit_review
from models import Employee, Review
from models.people import Role
from tests.support.db import scalar, table_digests
from tests.support.factories import (
    csrf_token,
    login_as,
    make_cycle,
    make_employees,
    make_tenant,
    make_user,
    post_form,
    seeding,
)

Conn = psycopg.Connection[Any]
NAME = "Zuleica Bettencourt-Amaral"
EMAIL = "zuleica.amaral@ours.example"
LOGIN = "zuleica.login@ours.example"

STATISTICS = """
SELECT c.id, c.status,
       (SELECT count(*) FROM cycle_participants p WHERE p.cycle_id = c.id),
       (SELECT json_agg(json_build_array(kind, status, n, total, mean) ORDER BY kind, status)
        FROM (SELECT kind, status, count(*) n, sum(rating) total, round(avg(rating), 6) mean
              FROM reviews r WHERE r.cycle_id = c.id GROUP BY kind, status) per_kind)
FROM review_cycles c ORDER BY c.id
"""


def build(app: Any, conn: Conn, *, active: bool = False) -> dict[str, Any]:
    """Our tenant: the person (an HR admin who activated a cycle and imported a file naming
    them) took part in a closed cycle, every review of it submitted with its own comment; with
    ``active``, they also take part in an active one. Their address is in an old job error, an
    attempt, an audit entry and the log-in throttle."""
    with seeding(app) as session:
        ours, theirs = make_tenant(session), make_tenant(session)
        people = make_employees(session, ours, 6, span=2)
        person = people[2]
        person.name, person.email = NAME, EMAIL
        account = make_user(session, ours, Role.HR_ADMIN, employee=person, email=LOGIN)
        account.name = NAME
        admin = make_user(session, ours, Role.HR_ADMIN, employee=people[1])
        users = {
            "admin": admin,
            "staff": make_user(session, ours, Role.HR_STAFF),
            "employee": make_user(session, ours, Role.EMPLOYEE, employee=people[4]),
            "their_admin": make_user(session, theirs, Role.HR_ADMIN),
        }
        closed = make_cycle(session, ours, people, peers=2, activate_as=account)
        for review in session.scalars(select(Review).where(Review.cycle_id == closed.id)):
            comment = f"Comment {review.id}: {review.reviewer_id} on {review.reviewee_id}"
            submit_review(session, ours.id, review.reviewer_id, review.id, 1 + review.id % 5,
                          comment)  # fmt: skip
        close_cycle(session, ours.id, closed.id)
        if active:
            make_cycle(session, ours, people[:4], activate_as=admin)
        make_cycle(session, ours, people[1:4])  # a draft: forgotten at erasure
        csv = f"name,email,department,manager_email\n{NAME},{EMAIL},Ops,\nAl Bo,al@x.example,Ops,\n"
        start_import(session, ours.id, "people.csv", csv.encode(), account)
        tenant_id, person_id, account_id = ours.id, person.id, account.id
    notice = scalar(conn, "SELECT min(id) FROM jobs WHERE payload->>'reviewer_id' = %s",
                    str(person_id))  # fmt: skip
    old_error = f"SMTPRecipientsRefused: 550 <{EMAIL}> unknown ({NAME})"
    conn.execute("UPDATE jobs SET last_error = %s WHERE id = %s", (old_error, notice))
    conn.execute(
        "INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome,"
        " error, traceback, duration) VALUES (%s, 1, 'w', now(), now(), 'failed', %s, %s, '1s')",
        (notice, old_error, f"Traceback ...\n{old_error}"),
    )
    conn.execute(
        "INSERT INTO audit_log (user_id, tenant_id, action, target_type, target_id, details)"
        " VALUES (%s, %s, 'job.discard', 'job', %s, %s)",
        (admin.id, tenant_id, notice, psycopg.types.json.Jsonb({"last_error": old_error})),
    )
    conn.execute(
        "INSERT INTO login_throttle VALUES ('account', %s, 2, now() + interval '5 minutes')",
        (hashlib.sha256(LOGIN.encode()).hexdigest(),),
    )
    comments = conn.execute(
        "SELECT comments FROM reviews"
        " WHERE comments <> '' AND (reviewer_id = %s OR reviewee_id = %s)",
        (person_id, person_id),
    ).fetchall()
    others = conn.execute(
        "SELECT comments FROM reviews WHERE comments <> '' AND reviewer_id <> %s"
        " AND reviewee_id <> %s",
        (person_id, person_id),
    ).fetchall()
    return {
        "tenant_id": tenant_id, "person_id": person_id, "account_id": account_id, **users,
        "comments": [c for (c,) in comments], "others": [c for (c,) in others],
    }  # fmt: skip


def dump(database_url: str) -> str:
    return subprocess.run(
        ["pg_dump", "--no-owner", database_url], capture_output=True, text=True, check=True
    ).stdout


def erase(app: Any, user: Any, person_id: int) -> Any:
    client = app.test_client()
    login_as(client, user)
    page = f"/people/{person_id}/erase"
    return post_form(client, page, {"confirmed": "1"}, token_from="/my/reviews")


def test_after_erasure_a_full_dump_holds_nothing_of_the_person_and_statistics_hold(
    app: Any, conn: Conn, database_url: str
) -> None:
    world = build(app, conn)
    with seeding(app) as session:  # an export of their data, built
        export = start_export(session, session.get_one(Employee, world["person_id"]), None)
    with psycopg.connect(database_url) as connection:
        document = collect(connection, world["tenant_id"], world["person_id"])
        connection.execute("UPDATE data_exports SET content_json = %s WHERE id = %s",
                           (psycopg.types.json.Jsonb(document), export.id))  # fmt: skip
    before = dump(database_url)
    assert NAME in before and EMAIL in before and LOGIN in before  # the dump can see them
    assert world["comments"] and all(comment in before for comment in world["comments"])
    statistics = conn.execute(STATISTICS).fetchall()

    answer = erase(app, world["admin"], world["person_id"])

    assert answer.status_code == 303, answer.get_data(as_text=True)
    after = dump(database_url)
    assert NAME not in after
    assert EMAIL not in after and LOGIN not in after
    assert [c for c in world["comments"] if c in after] == []
    assert world["others"] and all(comment in after for comment in world["others"])
    closed_before, *_ = statistics
    closed_after, *_ = conn.execute(STATISTICS).fetchall()
    assert closed_after == closed_before  # the closed cycle: participants, counts, ratings
    assert scalar(conn, "SELECT count(*) FROM users WHERE id = %s", world["account_id"]) == 0
    assert scalar(conn, "SELECT count(*) FROM data_exports") == 0
    assert scalar(conn, "SELECT count(*) FROM login_throttle WHERE scope = 'account'") == 0
    person = conn.execute(
        "SELECT name, email, department FROM employees WHERE id = %s", (world["person_id"],)
    ).fetchone()
    pid = world["person_id"]
    assert person == (f"Erased person {pid}", f"erased-{pid}@erased.invalid", "")
    entry = conn.execute(
        "SELECT user_id, tenant_id, target_id, details::text FROM audit_log"
        " WHERE action = 'employee.erase'"
    ).fetchone()
    assert entry is not None
    assert entry[:3] == (world["admin"].id, world["tenant_id"], str(pid))
    assert f"Erased person {pid}" in entry[3]
    # The cycle the person activated, the import they ran, their audit entries: still there.
    assert (
        scalar(
            conn,
            "SELECT count(*) FROM review_cycles WHERE status = 'closed' AND activated_by IS NULL",
        )
        == 1
    )
    assert scalar(conn, "SELECT count(*) FROM audit_log WHERE user_id IS NULL") >= 1


def test_erasure_is_refused_while_the_person_takes_part_in_an_active_cycle(
    app: Any, conn: Conn
) -> None:
    world = build(app, conn, active=True)
    client = app.test_client()
    login_as(client, world["admin"])
    before = table_digests(conn)
    form = client.get(f"/people/{world['person_id']}/erase").get_data(as_text=True)
    assert "takes part in the active cycle" in form and "Erase for good" not in form

    answer = post_form(client, f"/people/{world['person_id']}/erase", {"confirmed": "1"})

    assert answer.status_code == 303
    page = client.get(answer.headers["Location"]).get_data(as_text=True)
    assert "takes part in the active cycle" in page
    assert table_digests(conn) == before


@pytest.mark.parametrize(("who", "status"), [("their_admin", 404), ("staff", 403),
                                             ("employee", 403)])  # fmt: skip
def test_only_an_hr_admin_of_the_persons_tenant_may_erase(
    app: Any, conn: Conn, who: str, status: int
) -> None:
    world = build(app, conn)
    client = app.test_client()
    login_as(client, world[who])
    token = csrf_token(client, "/my/reviews")
    before = table_digests(conn)
    page = f"/people/{world['person_id']}/erase"
    assert client.get(page).status_code == status
    answer = client.post(page, data={"confirmed": "1", "csrf_token": token})
    assert answer.status_code == status
    assert table_digests(conn) == before


def test_an_unconfirmed_post_asks_first_and_changes_nothing(app: Any, conn: Conn) -> None:
    world = build(app, conn)
    client = app.test_client()
    login_as(client, world["admin"])
    before = table_digests(conn)
    page = post_form(client, f"/people/{world['person_id']}/erase").get_data(as_text=True)
    assert f"Erase {NAME}?" in page and 'name="confirmed" value="1"' in page
    assert table_digests(conn) == before
    with seeding(app) as session:
        assert session.get(Employee, world["person_id"]).name == NAME  # type: ignore[union-attr]
