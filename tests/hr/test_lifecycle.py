"""The review cycle's lifecycle end to end, with days shortened by settings: activation through
the web app, real worker.py processes, a real SMTP server on loopback. Reminders go only to the
reviewers with open reviews, once each; calibration times out and HR admins get one escalation
each; a late approval is refused; the approval closes the cycle and compiles the report."""

import csv
import io
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

import psycopg
import pytest

from models.people import Role
from tests.support.db import scalar
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
from tests.support.processes import WorkerProcess, start_worker, wait_until
from tests.support.smtp import SmtpServer

Conn = psycopg.Connection[Any]
DAY = 2.0  # seconds in a day, for this test
TIMEOUT_DAYS = 1.5  # the calibration timeout: 3 s


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer().start()
    yield server
    server.stop()


def subjects(smtp: SmtpServer, prefix: str) -> list[str]:
    return [str(m["To"]) for m in smtp.messages if str(m["Subject"]).startswith(prefix)]


def lifecycle_status(conn: Conn) -> str:
    return str(scalar(conn, "SELECT status FROM workflow_executions"))


def open_wait(conn: Conn) -> Any:
    return conn.execute(
        "SELECT kind, key FROM workflow_waits WHERE satisfied_at IS NULL"
    ).fetchone()


def test_a_cycles_life_from_activation_to_its_report(
    app: Any, client: Any, conn: Conn, database_url: str, workers: list[WorkerProcess],
    smtp: SmtpServer, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("PAUTA_CYCLE_DAY_SECONDS", str(DAY))
    monkeypatch.setenv("PAUTA_CALIBRATION_TIMEOUT_DAYS", str(TIMEOUT_DAYS))
    with seeding(app) as session:
        tenant = make_tenant(session)
        people = make_employees(session, tenant, 6)
        admin = make_user(session, tenant, Role.HR_ADMIN)
        second_admin = make_user(session, tenant, Role.HR_ADMIN)
        cycle = make_cycle(session, tenant, people, due_date=date.today() + timedelta(days=2))
        session.execute(__import__("sqlalchemy").text("UPDATE review_cycles SET reminder_days = 1"))
    login_as(client, admin)
    detail = f"/cycles/{cycle.id}"
    activated = post_form(client, f"{detail}/activate", {"confirmed": "1"}, token_from=detail)
    assert activated.status_code == 303
    # Before the reminder (one day, 2 s, from now): reviewer 0 submits everything.
    done_reviewer = scalar(
        conn, "SELECT min(reviewer_id) FROM reviews WHERE cycle_id = %s", cycle.id
    )
    conn.execute(
        "UPDATE reviews SET status = 'submitted', rating = 4, submitted_at = now()"
        " WHERE cycle_id = %s AND reviewer_id = %s",
        (cycle.id, done_reviewer),
    )
    pending = {
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT e.email FROM reviews r JOIN employees e ON e.id = r.reviewer_id"
            " WHERE r.cycle_id = %s AND r.status = 'open'",
            (cycle.id,),
        )
    }
    env = {**smtp.env, "PAUTA_MAIL_RETRY_BASE_SECONDS": "0.2"}
    start_worker(workers, database_url, "--single", "--queues", "notifications=2,workflows=2",
                 "--poll", "0.1", tasks="hr.tasks", env=env)  # fmt: skip
    wait_until(lambda: open_wait(conn) == ("sleep", None), timeout=10)
    page = client.get(detail).get_data(as_text=True)
    assert "data-lifecycle=" in page and "to remind reviewers with open reviews" in page

    # The reminders: one each, only to reviewers with open reviews.
    wait_until(lambda: len(subjects(smtp, "Reminder:")) == len(pending), timeout=30)
    reminded = sorted(m.split("<")[-1].rstrip(">") for m in subjects(smtp, "Reminder:"))
    assert reminded == sorted(pending)
    # The due date passes; calibration times out once: one escalation per HR admin.
    wait_until(lambda: len(subjects(smtp, "Calibration overdue")) == 2, timeout=30)
    assert sorted(subjects(smtp, "Calibration overdue")) == sorted(
        [admin.email, second_admin.email]
    )
    wait_until(lambda: open_wait(conn) == ("event", "calibration#2"), timeout=10)
    page = client.get(detail).get_data(as_text=True)
    assert "Waiting for HR calibration (“calibration#2”)" in page

    # A late decision on the first wait is refused and changes nothing.
    late = post_form(client, f"{detail}/calibration",
                     {"decision": "approve", "key": "calibration"}, token_from=detail)  # fmt: skip
    assert "timed out at" in client.get(late.headers["Location"]).get_data(as_text=True)
    # Send back with a comment, then approve.
    comment = {"decision": "send_back", "comment": "Recheck Q3 ratings"}
    back = post_form(client, f"{detail}/calibration", comment, token_from=detail)
    assert "delivered" in client.get(back.headers["Location"]).get_data(as_text=True)
    wait_until(lambda: open_wait(conn) == ("event", "calibration#3"), timeout=10)
    approve = post_form(client, f"{detail}/calibration", {"decision": "approve"},
                        token_from=detail)  # fmt: skip
    assert "delivered" in client.get(approve.headers["Location"]).get_data(as_text=True)
    again = {"decision": "approve", "key": "calibration#3"}
    twice = post_form(client, f"{detail}/calibration", again, token_from=detail)
    refusal = client.get(twice.headers["Location"]).get_data(as_text=True)
    # refused as decided, or (if the worker already finished it) as waiting for nothing
    assert "already decided by" in refusal or "it waits for nothing" in refusal

    wait_until(lambda: lifecycle_status(conn) == "succeeded", timeout=20)
    assert scalar(conn, "SELECT status FROM review_cycles WHERE id = %s", cycle.id) == "closed"
    output = scalar(conn, "SELECT output FROM workflow_executions")
    assert output["reminded"] == len(pending)
    assert output["escalations"] >= 1 and output["approved_by"] == admin.email
    page = client.get(detail).get_data(as_text=True)
    assert "Finished: the cycle is closed" in page and "Recheck Q3 ratings" in page
    report = client.get(f"{detail}/report.csv")
    assert report.status_code == 200
    rows = list(csv.DictReader(io.StringIO(report.get_data(as_text=True))))
    assert len(rows) == 6
    submitted = "SELECT count(*) FROM reviews WHERE cycle_id = %s AND status = 'submitted'"
    assert sum(int(row["submitted"]) for row in rows) == scalar(conn, submitted, cycle.id)
    total = "SELECT count(*) FROM reviews WHERE cycle_id = %s"
    assert sum(int(row["reviews"]) for row in rows) == scalar(conn, total, cycle.id)
    assert client.get(f"{detail}/report").status_code == 200
    # Each e-mail reached the sink once: the notices, the reminders, the escalations.
    escalations = 2 * output["escalations"]
    notices = scalar(conn, "SELECT count(*) FROM jobs WHERE task = 'hr.notify_reviewer'")
    wait_until(lambda: len(smtp.messages) == notices + len(pending) + escalations, timeout=20)
    ids = [m["Message-ID"] for m in smtp.messages]
    assert len(ids) == len(set(ids))
    audit = conn.execute("SELECT action, details->>'key' FROM audit_log ORDER BY id").fetchall()
    assert audit == [("workflow.event", "calibration#2"), ("workflow.event", "calibration#3")]
    assert csrf_token(client, detail)
