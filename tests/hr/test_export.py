"""Exporting everything about a person: every row that references them, checked against the
catalogue of foreign keys to employees and users; the request page, the worker, the link."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from hr.export_job import REFERENCES, run_export
from hr.exports import start_export
from models import Employee, Tenant
from models.people import Role
from tests.hr.test_erasure import NAME, build
from tests.support.db import scalar, table_digests
from tests.support.factories import csrf_token, login_as, make_user, post_form, seeding
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]

# (table, column, referenced table) of every foreign key column that holds an employee's or a
# user's id: for a composite key (tenant_id, employee_id), the column paired with the id.
PERSON_KEYS = """
SELECT c.conrelid::regclass::text, a.attname, c.confrelid::regclass::text
FROM pg_constraint c
CROSS JOIN LATERAL unnest(c.conkey, c.confkey) AS k (col, refcol)
JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.col
JOIN pg_attribute r ON r.attrelid = c.confrelid AND r.attnum = k.refcol
WHERE c.contype = 'f' AND c.confrelid IN ('employees'::regclass, 'users'::regclass)
  AND r.attname = 'id'
"""


def test_every_foreign_key_to_a_person_is_covered_by_the_export(conn: Conn) -> None:
    catalogue = set(conn.execute(PERSON_KEYS).fetchall())
    covered = {(r.table, r.column, r.points_at) for r in REFERENCES}
    assert catalogue - covered == set(), "a reference to a person the export leaves out"
    assert covered - catalogue == set(), "an export reference that is no foreign key"


def test_a_new_reference_to_a_person_would_fail_the_coverage(conn: Conn) -> None:
    conn.execute("CREATE TABLE badges (id bigint PRIMARY KEY, holder bigint REFERENCES users)")
    catalogue = set(conn.execute(PERSON_KEYS).fetchall())
    assert catalogue - {(r.table, r.column, r.points_at) for r in REFERENCES} == {
        ("badges", "holder", "users")
    }


@contextmanager
def connecting(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url) as connection:
        yield connection


def test_the_export_holds_every_row_that_references_the_person(
    app: Any, conn: Conn, database_url: str
) -> None:
    world = build(app, conn)
    person_id, account_id = world["person_id"], world["account_id"]
    conn.execute(  # a notice begun, and someone who reports to the person
        "INSERT INTO review_notice_starts (job_id, tenant_id, cycle_id, reviewer_id, attempt)"
        " SELECT id, tenant_id, (payload->>'cycle_id')::bigint, %s, 1 FROM jobs"
        " WHERE payload->>'reviewer_id' = %s",
        (person_id, str(person_id)),
    )
    conn.execute(
        "UPDATE employees SET manager_id = %s WHERE id = (SELECT max(id) FROM employees"
        " WHERE tenant_id = %s AND id <> %s)",
        (person_id, world["tenant_id"], person_id),
    )
    with seeding(app) as session:
        person = session.get_one(Employee, person_id)
        other = session.get_one(Employee, world["admin"].employee_id)
        asker = session.get_one(type(world["admin"]), account_id)
        start_export(session, other, asker)  # the person asked for someone's data
        export = start_export(session, person, world["admin"])

    run_export(lambda: connecting(database_url), world["tenant_id"], export.id)

    document = json.loads(
        json.dumps(scalar(conn, "SELECT content_json FROM data_exports WHERE id = %s", export.id))
    )
    assert document["profile"]["name"] == NAME
    for table, column, points_at in conn.execute(PERSON_KEYS).fetchall():
        ids = [person_id] if points_at == "employees" else [account_id]
        expected = scalar(
            conn, f"SELECT count(*) FROM {table} WHERE {column} = ANY(%s)", ids
        )  # the table and column come from the catalogue
        rows = document["references"][f"{table}.{column}"]
        assert expected > 0, f"the test's person has no {table}.{column}: add one"
        assert len(rows) == expected, (table, column)
        assert all(row[column] in ids for row in rows), (table, column)
    assert all("password_hash" not in row for row in document["references"]["users.employee_id"])
    for comment in world["comments"]:
        assert comment in json.dumps(document, ensure_ascii=False)
    assert document["notifications"] and document["notifications"][0]["attempts"]
    html = scalar(conn, "SELECT content_html FROM data_exports WHERE id = %s", export.id)
    assert NAME in html and world["comments"][0] in html
    assert scalar(conn, "SELECT sections_done = sections_total FROM data_exports WHERE id = %s",
                  export.id)  # fmt: skip


def test_an_hr_admin_asks_follows_the_progress_and_downloads_through_a_worker(
    app: Any, conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    world = build(app, conn)
    person_id = world["person_id"]
    client = app.test_client()
    login_as(client, world["admin"])

    asked = post_form(client, f"/people/{person_id}/exports")

    assert asked.status_code == 303
    page_url = asked.headers["Location"]
    export_id = scalar(conn, "SELECT id FROM data_exports")
    assert page_url.endswith(f"/people/exports/{export_id}")
    assert "queued" in client.get(page_url).get_data(as_text=True)
    start_worker(workers, database_url, "--queues", "default=1", "--poll", "0.05",
                 tasks="hr.tasks")  # fmt: skip
    wait_until(lambda: scalar(conn, "SELECT state FROM data_exports") == "finished")
    page = client.get(page_url).get_data(as_text=True)
    token = scalar(conn, "SELECT token FROM data_exports")
    assert f"/people/exports/download/{token}/json" in page
    assert len(token) >= 43  # 256 random bits

    as_json = client.get(f"/people/exports/download/{token}/json")
    as_html = client.get(f"/people/exports/download/{token}/html")

    assert as_json.status_code == 200 and as_json.json["profile"]["name"] == NAME
    assert "attachment" in as_json.headers["Content-Disposition"]
    assert as_html.status_code == 200 and NAME in as_html.get_data(as_text=True)
    actions = conn.execute(
        "SELECT action, user_id, target_id FROM audit_log WHERE target_type = 'employee'"
        " ORDER BY id"
    ).fetchall()
    asker = world["admin"].id
    assert actions == [
        ("employee.export", asker, str(person_id)),
        ("employee.export_download", asker, str(person_id)),
        ("employee.export_download", asker, str(person_id)),
    ]
    access = client.get(f"/people/{person_id}/access").get_data(as_text=True)
    assert access.count("employee.export_download") == 2

    # Another HR admin of the same tenant: the link is not theirs. An expired link: nobody's.
    with seeding(app) as session:
        tenant = session.get_one(Tenant, world["tenant_id"])
        colleague = make_user(session, tenant, Role.HR_ADMIN)
    other = app.test_client()
    login_as(other, colleague)
    assert other.get(f"/people/exports/download/{token}/json").status_code == 404
    conn.execute("UPDATE data_exports SET expires_at = now() - interval '1 second'")
    assert client.get(f"/people/exports/download/{token}/json").status_code == 404
    assert scalar(conn, "SELECT count(*) FROM audit_log WHERE action = %s",
                  "employee.export_download") == 2  # fmt: skip


def test_the_link_expires_seven_days_after_the_request_by_default(app: Any, conn: Conn) -> None:
    world = build(app, conn)
    with seeding(app) as session:
        start_export(session, session.get_one(Employee, world["person_id"]), world["admin"])
    assert scalar(conn, "SELECT expires_at - created_at FROM data_exports").days == 7


@pytest.mark.parametrize(("who", "status"), [("their_admin", 404), ("staff", 403),
                                             ("employee", 403)])  # fmt: skip
def test_only_an_hr_admin_of_the_persons_tenant_may_export(
    app: Any, conn: Conn, who: str, status: int
) -> None:
    world = build(app, conn)
    client = app.test_client()
    login_as(client, world[who])
    token = csrf_token(client, "/my/reviews")
    before = table_digests(conn)
    answer = client.post(f"/people/{world['person_id']}/exports", data={"csrf_token": token})
    assert answer.status_code == status
    assert table_digests(conn) == before
