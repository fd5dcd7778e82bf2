"""Logging in and out: hashing, a fresh session at log-in, a logout that really ends it."""

from typing import Any

import psycopg
import pytest
from argon2 import PasswordHasher

from models.people import Role
from tests.support.db import scalar
from tests.support.factories import (
    PASSWORD,
    csrf_token,
    login_as,
    make_tenant,
    make_user,
    post_form,
    seeding,
)

Conn = psycopg.Connection[Any]


@pytest.fixture
def hr_admin(app: Any) -> Any:
    with seeding(app) as session:
        return make_user(session, make_tenant(session), Role.HR_ADMIN)


def test_passwords_are_stored_as_argon2id_at_asvs_parameters(hr_admin: Any, conn: Conn) -> None:
    stored = scalar(conn, "SELECT password_hash FROM users WHERE id = %s", hr_admin.id)
    assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    assert PasswordHasher().verify(stored, PASSWORD)


def test_logging_in_lands_on_the_home_page_of_the_role(client: Any, hr_admin: Any) -> None:
    response = login_as(client, hr_admin)
    assert response.headers["Location"] == "/cycles/"
    assert "Log out" in client.get("/cycles/").get_data(as_text=True)


def test_a_wrong_password_or_unknown_email_gets_the_same_answer(client: Any, hr_admin: Any) -> None:
    answers = []
    for email, password in ((hr_admin.email, "wrong password!"), ("nobody@x.example", PASSWORD)):
        token = csrf_token(client, "/login")
        response = client.post(
            "/login", data={"email": email, "password": password, "csrf_token": token}
        )
        answers.append((response.status_code, "The e-mail or the password is wrong." in
                        response.get_data(as_text=True)))  # fmt: skip
    assert answers == [(401, True), (401, True)]


def test_an_inactive_user_cannot_log_in_and_is_logged_out(
    client: Any, hr_admin: Any, conn: Conn
) -> None:
    login_as(client, hr_admin)
    conn.execute("UPDATE users SET active = false WHERE id = %s", (hr_admin.id,))
    assert client.get("/cycles/").status_code == 302
    token = csrf_token(client, "/login")
    response = client.post(
        "/login", data={"email": hr_admin.email, "password": PASSWORD, "csrf_token": token}
    )
    assert response.status_code == 401


def test_login_starts_a_new_session(client: Any, hr_admin: Any) -> None:
    with client.session_transaction() as session:
        session["planted"] = "by an attacker"
    login_as(client, hr_admin)
    with client.session_transaction() as session:
        assert "planted" not in session
        assert session["_user_id"] != str(hr_admin.id)  # the session token, not the id


def test_login_renews_the_session_identifier_so_an_earlier_cookie_stops_working(
    app: Any, client: Any, hr_admin: Any, conn: Conn
) -> None:
    login_as(client, hr_admin)
    first = client.get_cookie("session").value
    token = scalar(conn, "SELECT session_token FROM users WHERE id = %s", hr_admin.id)
    assert client.get("/cycles/").status_code == 200

    elsewhere = app.test_client()
    login_as(elsewhere, hr_admin)

    assert scalar(conn, "SELECT session_token FROM users WHERE id = %s", hr_admin.id) != token
    assert elsewhere.get("/cycles/").status_code == 200
    earlier = app.test_client()
    earlier.set_cookie("session", first)
    response = earlier.get("/cycles/")
    assert (response.status_code, response.headers["Location"]) == (302, "/login?next=%2Fcycles%2F")


def test_logout_invalidates_every_copy_of_the_session_cookie(
    app: Any, client: Any, hr_admin: Any
) -> None:
    login_as(client, hr_admin)
    stolen = client.get_cookie("session").value
    response = post_form(client, "/logout", token_from="/cycles/")
    assert response.headers["Location"] == "/login"
    assert client.get("/cycles/").status_code == 302

    replay = app.test_client()
    replay.set_cookie("session", stolen)
    response = replay.get("/cycles/")
    assert (response.status_code, response.headers["Location"]) == (302, "/login?next=%2Fcycles%2F")


@pytest.mark.parametrize(
    ("target", "landing"),
    [
        ("/cycles/new", "/cycles/new"),
        ("https://evil.example/", "/cycles/"),
        ("//evil.example/", "/cycles/"),
        ("/\\evil.example", "/cycles/"),
    ],
)
def test_next_only_follows_paths_on_this_site(
    client: Any, hr_admin: Any, target: str, landing: str
) -> None:
    token = csrf_token(client, "/login")
    response = client.post(
        "/login",
        query_string={"next": target},
        data={"email": hr_admin.email.upper(), "password": PASSWORD, "csrf_token": token},
    )
    assert response.headers["Location"] == landing


def test_the_login_form_needs_its_csrf_token(client: Any, hr_admin: Any) -> None:
    response = client.post("/login", data={"email": hr_admin.email, "password": PASSWORD})
    assert response.status_code == 400
    assert client.get("/cycles/").status_code == 302


def test_the_session_cookie_is_httponly_and_samesite_lax(client: Any, hr_admin: Any) -> None:
    response = login_as(client, hr_admin)
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
