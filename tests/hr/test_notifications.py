"""End to end: activation through the web app, a real worker.py, a real SMTP server on loopback.

The worker runs ``hr.tasks`` with retries shortened by ``PAUTA_MAIL_RETRY_BASE_SECONDS``.
"""

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from typing import Any

import psycopg
import pytest

from hr.tasks import NOTIFICATIONS_QUEUE, mail_settings, notify_reviewer
from jobqueue import JobContext, JobStore
from models.people import Role
from tests.support.db import attempt_rows, job_row, scalar
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
DUE = date.today() + timedelta(days=10)


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer().start()
    yield server
    server.stop()


def run_worker(workers: list[WorkerProcess], database_url: str, smtp: SmtpServer) -> None:
    env = {**smtp.env, "PAUTA_MAIL_RETRY_BASE_SECONDS": "0.2"}
    start_worker(
        workers, database_url, "--queues", "notifications=4", "--poll", "0.05",
        tasks="hr.tasks,tests.support.tasks", env=env,
    )  # fmt: skip


def prepare(app: Any, participants: int, default_locale: str = "en") -> tuple[Any, Any, list[Any]]:
    """A tenant with an HR admin and a draft cycle of ``participants`` employees; its people
    read ``default_locale`` unless they chose otherwise."""
    with seeding(app) as session:
        tenant = make_tenant(session)
        tenant.default_locale = default_locale
        people = make_employees(session, tenant, participants)
        admin = make_user(session, tenant, Role.HR_ADMIN)
        cycle = make_cycle(session, tenant, people, due_date=DUE, name="Spring <review>")
    return admin, cycle, people


def notification(conn: Conn) -> dict[str, Any]:
    return job_row(conn, scalar(conn, "SELECT id FROM jobs WHERE task = 'hr.notify_reviewer'"))


def test_forty_participants_get_one_email_per_reviewer_and_the_page_shows_them_delivered(
    app: Any, client: Any, conn: Conn, database_url: str, workers: list[WorkerProcess],
    smtp: SmtpServer,
) -> None:  # fmt: skip
    admin, cycle, _ = prepare(app, 40)
    reviewers = {
        row[0]: row[1]
        for row in conn.execute(
            "SELECT DISTINCT e.email, e.name FROM reviews r"
            " JOIN employees e ON e.id = r.reviewer_id WHERE r.cycle_id = %s",
            (cycle.id,),
        )
    }
    run_worker(workers, database_url, smtp)
    login_as(client, admin)

    response = post_form(
        client, f"/cycles/{cycle.id}/activate", {"confirmed": "1"}, token_from=f"/cycles/{cycle.id}"
    )
    assert response.status_code == 303

    mails = smtp.wait_for(len(reviewers))
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE state = 'succeeded'") == 40)
    assert sorted(re.sub(r".*<|>", "", str(m["To"])) for m in mails) == sorted(reviewers)
    for mail in mails:
        assert mail["Subject"] == f"Reviews due {DUE:%d %b %Y}: Spring <review>"
        text = mail.get_body(("plain",)).get_content()
        html = mail.get_body(("html",)).get_content()
        link = f"https://pauta.example/my/reviews?cycle={cycle.id}"
        assert link in text and f'href="{link}"' in html
        assert f"{DUE.day} {DUE:%B %Y}" in text
        assert "Spring &lt;review&gt;" in html  # escaped in HTML
    page = client.get(f"/cycles/{cycle.id}").get_data(as_text=True)
    assert page.count(">delivered</a>") == len(reviewers)
    assert "40 delivered" in page


def test_a_server_refusing_the_first_two_connections_gets_the_mail_on_the_third_attempt(
    app: Any, client: Any, conn: Conn, database_url: str, workers: list[WorkerProcess],
    smtp: SmtpServer,
) -> None:  # fmt: skip
    admin, cycle, _ = prepare(app, 1)
    smtp.refuse_connections(2)
    run_worker(workers, database_url, smtp)
    login_as(client, admin)
    post_form(
        client, f"/cycles/{cycle.id}/activate", {"confirmed": "1"}, token_from=f"/cycles/{cycle.id}"
    )

    smtp.wait_for(1)
    wait_until(lambda: notification(conn)["state"] == "succeeded")
    job = notification(conn)
    attempts = attempt_rows(conn, job["id"])
    assert [a["outcome"] for a in attempts] == ["failed", "failed", "succeeded"]
    assert attempts[0]["error"] == (
        "MailDeferred: SMTP server answered: 421 4.3.2 Service not available, try again later"
    )
    assert smtp.connections_refused == 2
    page = client.get(f"/cycles/{cycle.id}").get_data(as_text=True)
    assert ">delivered</a>" in page and "attempt 3" in page
    history = client.get(f"/cycles/{cycle.id}/notifications/{job['id']}").get_data(as_text=True)
    assert history.count("421 4.3.2 Service not available") == 2
    assert "succeeded" in history


def test_a_server_that_is_down_shows_retrying_with_the_next_try_then_delivers(
    app: Any, client: Any, conn: Conn, database_url: str, workers: list[WorkerProcess],
    smtp: SmtpServer,
) -> None:  # fmt: skip
    admin, cycle, _ = prepare(app, 1)
    smtp.stop()
    run_worker(workers, database_url, smtp)
    login_as(client, admin)
    post_form(
        client, f"/cycles/{cycle.id}/activate", {"confirmed": "1"}, token_from=f"/cycles/{cycle.id}"
    )

    def retrying_page() -> str | None:
        page = client.get(f"/cycles/{cycle.id}").get_data(as_text=True)
        return page if ">retrying</a>" in page else None

    page = wait_until(retrying_page)
    # the reader's time (the tenant's zone), in UTC on hover
    assert re.search(
        r'attempt \d of 5 failed; next try <time datetime="[0-9-]+T[0-9:]+Z" '
        r'title="[0-9-]+ \d\d:\d\d:\d\d UTC">\d\d:\d\d:\d\d</time>',
        page,
    )
    assert "Connection refused" in attempt_rows(conn, notification(conn)["id"])[0]["error"]

    smtp.start()
    smtp.wait_for(1)
    wait_until(lambda: notification(conn)["state"] == "succeeded")


def test_a_550_reply_kills_the_job_at_once_with_the_reply_masked_on_the_cycle_page(
    app: Any, client: Any, conn: Conn, database_url: str, workers: list[WorkerProcess],
    smtp: SmtpServer,
) -> None:  # fmt: skip
    admin, cycle, people = prepare(app, 1)
    reply = f"550 5.1.1 <{people[0].email}>: Recipient address rejected: User unknown"
    smtp.reject_recipient(people[0].email, reply)
    run_worker(workers, database_url, smtp)
    login_as(client, admin)
    post_form(
        client, f"/cycles/{cycle.id}/activate", {"confirmed": "1"}, token_from=f"/cycles/{cycle.id}"
    )

    wait_until(lambda: notification(conn)["state"] == "dead")
    job = notification(conn)
    # The reply quotes the address: stored (and shown) masked to its first letter and domain.
    address = people[0].email
    masked = f"{address[0]}***@{address.split('@')[1]}"
    reply = reply.replace(address, masked)
    expected = f"PermanentError: SMTP server refused recipient {masked}: {reply}"
    assert (job["attempt"], job["last_error"]) == (1, expected)
    [attempt] = attempt_rows(conn, job["id"])
    assert attempt["error"] == expected
    assert masked in attempt["traceback"]
    assert address not in attempt["traceback"]
    assert smtp.messages == []
    page = client.get(f"/cycles/{cycle.id}").get_data(as_text=True)
    assert ">dead</a>" in page
    assert expected.replace("<", "&lt;").replace(">", "&gt;") in page


def test_two_simultaneous_activations_one_wins_one_is_refused_one_email_per_reviewer(
    app: Any, conn: Conn, database_url: str, workers: list[WorkerProcess], smtp: SmtpServer
) -> None:
    admin, cycle, _ = prepare(app, 15)
    with seeding(app) as session:
        other_admin = make_user(session, session.merge(admin).tenant, Role.HR_ADMIN)
    reviewers = scalar(
        conn, "SELECT count(DISTINCT reviewer_id) FROM reviews WHERE cycle_id = %s", cycle.id
    )
    run_worker(workers, database_url, smtp)
    clients = [app.test_client(), app.test_client()]
    tokens = []
    for client, user in zip(clients, (admin, other_admin), strict=True):
        login_as(client, user)
        tokens.append(csrf_token(client, f"/cycles/{cycle.id}"))
    start = threading.Barrier(2)
    answers: list[Any] = []

    def activate(client: Any, token: str) -> None:
        start.wait()
        response = client.post(
            f"/cycles/{cycle.id}/activate",
            data={"csrf_token": token},
            headers={"Accept": "application/json"},
        )
        answers.append((response.status_code, response.get_json()))

    threads = [
        threading.Thread(target=activate, args=pair) for pair in zip(clients, tokens, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(status for status, _ in answers) == [200, 409]
    refusal = next(body for status, body in answers if status == 409)
    assert refusal["error"].startswith("“Spring <review>” cannot be activated: it is active")
    smtp.wait_for(reviewers)
    wait_until(
        lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE state = 'succeeded'") == reviewers
    )
    assert len(smtp.messages) == reviewers
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE queue <> 'workflows'") == reviewers


def test_a_cycle_name_that_breaks_the_subject_kills_the_notice_at_the_first_attempt(
    app: Any, client: Any, conn: Conn, database_url: str, workers: list[WorkerProcess],
    smtp: SmtpServer,
) -> None:  # fmt: skip
    admin, cycle, _ = prepare(app, 1)
    # A name stored before the form refused line breaks.
    conn.execute("UPDATE review_cycles SET name = E'Spring\\r\\nBcc: all@x.example'")
    run_worker(workers, database_url, smtp)
    login_as(client, admin)
    post_form(
        client, f"/cycles/{cycle.id}/activate", {"confirmed": "1"}, token_from=f"/cycles/{cycle.id}"
    )

    wait_until(lambda: notification(conn)["state"] == "dead")
    job = notification(conn)
    assert job["attempt"] == 1
    assert job["last_error"].startswith(
        "UnrenderableNotice: the notice cannot be rendered: Header values may not contain"
    )
    assert [a["outcome"] for a in attempt_rows(conn, job["id"])] == ["failed"]
    assert smtp.messages == []


def test_the_email_and_my_reviews_name_each_review_alike(
    app: Any, client: Any, conn: Conn, database_url: str, workers: list[WorkerProcess],
    smtp: SmtpServer,
) -> None:  # fmt: skip
    admin, cycle, people = prepare(app, 6)  # people[0] manages the other five
    with seeding(app) as session:
        manager = make_user(session, session.merge(admin).tenant, Role.EMPLOYEE, people[0])
    run_worker(workers, database_url, smtp)
    login_as(client, admin)
    post_form(
        client, f"/cycles/{cycle.id}/activate", {"confirmed": "1"}, token_from=f"/cycles/{cycle.id}"
    )

    wait_until(lambda: smtp.to(people[0].email))
    mail = smtp.to(people[0].email)[0]
    text = mail.get_body(("plain",)).get_content()
    in_mail = re.findall(r"^  - (.+?)\r?$", text, re.MULTILINE)
    reader = app.test_client()
    login_as(reader, manager)
    page = reader.get(f"/my/reviews?cycle={cycle.id}").get_data(as_text=True)
    on_page = re.findall(r'<span class="review-label">([^<]+)</span>', page)
    assert in_mail == [label.replace("&#39;", "'") for label in on_page]
    assert in_mail[0] == "Yourself (self-review)"
    assert sorted(in_mail[1:]) == sorted(f"{p.name} (your direct report)" for p in people[1:])
    assert mail["Date"] and mail["Message-ID"].startswith("<review-notice.")


def test_claimed_notices_stay_queued_until_a_worker_thread_starts_one(
    app: Any, client: Any, conn: Conn, database_url: str, smtp: SmtpServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    admin, cycle, _ = prepare(app, 6)  # six reviewers
    login_as(client, admin)
    post_form(
        client, f"/cycles/{cycle.id}/activate", {"confirmed": "1"}, token_from=f"/cycles/{cycle.id}"
    )
    # A worker claims ahead of its threads (prefetch): the jobs are running, none started.
    claimed = JobStore(conn).claim(NOTIFICATIONS_QUEUE, 10, "host:1:prefetch", 30)
    assert len(claimed) == 6
    page = client.get(f"/cycles/{cycle.id}").get_data(as_text=True)
    assert (page.count(">queued</a>"), page.count(">sending</a>")) == (6, 0)
    assert f'data-refresh-url="/cycles/{cycle.id}/progress"' in page

    @contextmanager
    def connection() -> Iterator[psycopg.Connection[Any]]:
        with psycopg.connect(database_url) as borrowed:  # commits when the block ends
            yield borrowed

    for name, value in smtp.env.items():
        monkeypatch.setenv(name, value)
    mail_settings.cache_clear()
    first = claimed[0]
    notify_reviewer(JobContext(first, "host:1:prefetch", connection), **first.payload)
    mail_settings.cache_clear()
    assert len(smtp.messages) == 1  # sent; the worker has not written the result yet
    progress = client.get(f"/cycles/{cycle.id}/progress").get_data(as_text=True)
    assert (progress.count(">queued</a>"), progress.count(">sending</a>")) == (5, 1)
    assert f'/notifications/{first.id}">sending</a>' in progress
    assert "data-refresh-done" not in progress


def test_each_reviewer_is_written_to_in_their_language_with_the_due_date_in_its_format(
    app: Any, client: Any, conn: Conn, database_url: str, workers: list[WorkerProcess],
    smtp: SmtpServer,
) -> None:  # fmt: skip
    """A Brazilian tenant: the reviewer who chose English on their profile gets English, the
    one who chose nothing gets the tenant's Brazilian Portuguese, subject and due date too."""
    admin, cycle, people = prepare(app, 3, default_locale="pt_BR")
    english, brazilian = people[0], people[1]
    with seeding(app) as session:
        tenant = session.merge(admin).tenant
        reader = make_user(session, tenant, Role.EMPLOYEE, english)
        reader.language = "en"
        make_user(session, tenant, Role.EMPLOYEE, brazilian)  # no preference
    run_worker(workers, database_url, smtp)
    login_as(client, admin)
    post_form(
        client, f"/cycles/{cycle.id}/activate", {"confirmed": "1"}, token_from=f"/cycles/{cycle.id}"
    )
    wait_until(lambda: smtp.to(english.email) and smtp.to(brazilian.email))

    mail = smtp.to(english.email)[0]
    assert mail["Subject"] == f"Reviews due {DUE:%d %b %Y}: Spring <review>"
    text = mail.get_body(("plain",)).get_content()
    assert f"Hello {english.name}," in text
    assert f"{DUE:%A} {DUE.day} {DUE:%B %Y}" in text  # Wednesday 9 December 2026
    assert "Yourself (self-review)" in text
    assert 'lang="en"' in mail.get_body(("html",)).get_content()

    mail = smtp.to(brazilian.email)[0]
    assert mail["Subject"] == f"Avaliações com prazo em {DUE:%d/%m/%Y}: Spring <review>"
    text = mail.get_body(("plain",)).get_content()
    html = mail.get_body(("html",)).get_content()
    weekday = WEEKDAYS_PT[DUE.weekday()]
    long_date = f"{weekday}, {DUE.day} de {MONTHS_PT[DUE.month - 1]} de {DUE.year}"
    assert f"Olá, {brazilian.name}," in text
    assert re.search(f"Envie-as? até {long_date}:", text)
    assert re.search(f"Envie-as? até <strong>{long_date}</strong>.", html)
    assert "Você (autoavaliação)" in text
    assert 'lang="pt-BR"' in html and "Abrir minhas avaliações" in html
    assert "Reviews due" not in text and "Please submit" not in text


WEEKDAYS_PT = (
    "segunda-feira", "terça-feira", "quarta-feira", "quinta-feira", "sexta-feira", "sábado",
    "domingo",
)  # fmt: skip
MONTHS_PT = (
    "janeiro", "fevereiro", "março", "abril", "maio", "junho", "julho", "agosto", "setembro",
    "outubro", "novembro", "dezembro",
)  # fmt: skip
