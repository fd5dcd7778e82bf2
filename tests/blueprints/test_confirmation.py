"""The actions that cannot be taken back ask first: the page's button carries the question for
the bundled dialog, and the server acts only on a confirmed post; any other post is answered
with the same question and a button that posts the same fields again, confirmed."""

import html
import re
from typing import Any

import psycopg
import pytest

from models.people import Role
from tests.support.db import job_row, scalar
from tests.support.factories import (
    csrf_token,
    login_as,
    make_cycle,
    make_employees,
    make_tenant,
    make_user,
    seeding,
    system_tenant,
)
from tests.support.jobs import make_job, register_worker

Conn = psycopg.Connection[Any]
NOTICES = "SELECT count(*) FROM jobs WHERE task = 'hr.notify_reviewer'"  # not the lifecycle's slice
HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')


def logged_in(app: Any, user: Any) -> Any:
    client = app.test_client()
    login_as(client, user)
    return client


def unconfirmed(client: Any, path: str, data: dict[str, str] | None = None) -> str:
    """POST as a tool or a browser without script would: the question comes back, as a page."""
    token = csrf_token(client, "/my/reviews")
    response = client.post(path, data={**(data or {}), "csrf_token": token})
    assert response.status_code == 200, response.status_code
    page = response.get_data(as_text=True)
    assert "data-confirm-page" in page
    return page


def answer(client: Any, page: str) -> Any:
    """Press the question page's button: post its form, as it is."""
    question = page.split("data-confirm-page", 1)[1]
    action = re.search(r'<form method="post" action="([^"]+)"', question)
    assert action is not None
    fields: dict[str, list[str]] = {}
    for name, value in HIDDEN.findall(question):
        fields.setdefault(name, []).append(html.unescape(value))
    return client.post(action.group(1), data=fields)


def question_on(page: str, path: str) -> str:
    """The question the form posting to ``path`` asks before it posts (for the dialog)."""
    form = re.search(rf'<form method="post" action="{re.escape(path)}"[^>]*>', page)
    assert form is not None, f"no form posting to {path}"
    question = re.search(r'data-confirm="([^"]+)"', form.group(0))
    assert question is not None, f"the form posting to {path} asks nothing"
    return html.unescape(question.group(1))


@pytest.fixture
def admin(app: Any) -> Any:
    with seeding(app) as session:
        user = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
    return logged_in(app, user)


def test_pausing_a_queue_asks_first_and_only_the_answer_pauses_it(admin: Any, conn: Conn) -> None:
    make_job(conn, queue="mail")
    assert question_on(admin.get("/queues/mail").text, "/queues/mail/pause") == (
        "Pause queue mail?"
    )
    page = unconfirmed(admin, "/queues/mail/pause", {"next": "/queues/"})
    assert "Pause queue mail?" in page and 'name="next" value="/queues/"' in page
    assert not scalar(conn, "SELECT paused FROM queues WHERE name = 'mail'")
    assert scalar(conn, "SELECT count(*) FROM audit_log") == 0

    done = answer(admin, page)
    assert done.status_code == 303 and done.headers["Location"] == "/queues/"
    assert scalar(conn, "SELECT paused FROM queues WHERE name = 'mail'")
    assert scalar(conn, "SELECT action FROM audit_log") == "queue.pause"
    resumed = admin.post("/queues/mail/resume", data={"csrf_token": csrf_token(admin, "/queues/")})
    assert resumed.status_code == 303  # resuming undoes nothing: it does not ask


def test_discarding_a_dead_job_asks_first(admin: Any, conn: Conn) -> None:
    job = make_job(conn, state="dead", error="E: x")
    assert question_on(admin.get(f"/jobs/{job}").text, f"/jobs/{job}/discard") == (
        f"Discard job #{job}?"
    )
    page = unconfirmed(admin, f"/jobs/{job}/discard")
    assert job_row(conn, job)["state"] == "dead"
    assert answer(admin, page).status_code == 303
    assert job_row(conn, job)["state"] == "cancelled"


def test_shutting_workers_down_asks_first(admin: Any, conn: Conn) -> None:
    supervisor = register_worker(conn, queue=None, pid=100)
    register_worker(conn, queue="mail", parent_id=supervisor, pid=101)
    workers = admin.get("/workers/").text
    assert question_on(workers, f"/workers/{supervisor}/drain") == (
        "Shut down host:100:supervisor?"
    )
    assert question_on(workers, "/workers/drain") == "Shut down every worker?"
    asked = "SELECT count(*) FROM workers WHERE drain_requested_at IS NOT NULL"
    for path in (f"/workers/{supervisor}/drain", "/workers/drain"):
        page = unconfirmed(admin, path)
        assert scalar(conn, asked) == 0
    assert answer(admin, page).status_code == 303
    assert scalar(conn, asked) == 2


def test_activating_closing_and_cancelling_a_cycle_ask_first(app: Any, conn: Conn) -> None:
    with seeding(app) as session:
        tenant = make_tenant(session, "acme")
        people = make_employees(session, tenant, 4)
        hr_admin = make_user(session, tenant, Role.HR_ADMIN)
        cycle = make_cycle(session, tenant, people, name="Q3 <check>")
        spare = make_cycle(session, tenant, people, name="Spare")
    client = logged_in(app, hr_admin)

    def status(cycle_id: int) -> str:
        return str(scalar(conn, "SELECT status FROM review_cycles WHERE id = %s", cycle_id))

    detail = client.get(f"/cycles/{cycle.id}").text
    assert question_on(detail, f"/cycles/{cycle.id}/activate") == "Activate “Q3 <check>”?"
    assert question_on(detail, f"/cycles/{cycle.id}/cancel") == "Cancel “Q3 <check>”?"
    page = unconfirmed(client, f"/cycles/{cycle.id}/activate")
    assert "Activate “Q3 &lt;check&gt;”?" in page
    assert status(cycle.id) == "draft" and scalar(conn, "SELECT count(*) FROM jobs") == 0
    assert answer(client, page).status_code == 303
    assert status(cycle.id) == "active" and scalar(conn, NOTICES) == 4

    detail = client.get(f"/cycles/{cycle.id}").text
    assert question_on(detail, f"/cycles/{cycle.id}/close") == "Close “Q3 <check>”?"
    page = unconfirmed(client, f"/cycles/{cycle.id}/close")
    assert status(cycle.id) == "active"
    answer(client, page)
    assert status(cycle.id) == "closed"

    page = unconfirmed(client, f"/cycles/{spare.id}/cancel")
    assert status(spare.id) == "draft"
    answer(client, page)
    assert status(spare.id) == "cancelled"


def test_a_json_client_is_not_asked(app: Any, conn: Conn) -> None:
    with seeding(app) as session:
        tenant = make_tenant(session, "acme")
        hr_admin = make_user(session, tenant, Role.HR_ADMIN)
        cycle = make_cycle(session, tenant, make_employees(session, tenant, 3))
    client = logged_in(app, hr_admin)
    response = client.post(
        f"/cycles/{cycle.id}/activate",
        data={"csrf_token": csrf_token(client, "/my/reviews")},
        headers={"Accept": "application/json"},
    )
    assert response.status_code == 200 and response.get_json()["status"] == "active"
